"""Helpers the task families share: options from a fixed or computed set placed on a balanced
letter, and question templates with named slots (``{finding}``, ``{tool}``) rotated by index."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from ..geometry import sample_distractor_boxes
from ..negatives import OptionRequest, place_answer
from ..ontology import Ontology
from ..records import Item, Negatives
from ..vocab import LETTERS
from .base import Candidate, GenContext, ItemProblem, TaskGenerator
from .box_options import BoxPool, pool_distractor_boxes
from .columns import Columns, region_columns

YES, NO = "Yes", "No"


def templated(gen: TaskGenerator, index: int, **slots: str) -> tuple[str, str]:
    """``(question, template_id)``: template ``index % len`` with its named slots filled."""
    templates = gen.templates
    k = index % len(templates)
    return templates[k].format(**slots), f"{gen.name}/{k}"


def stable_unit(*key: object) -> float:
    """A number in [0, 1) fixed by ``key``: for choices that must not depend on the seed or on
    the order candidates are listed in (e.g. which tool a presence question asks about)."""
    digest = hashlib.sha256(repr(key).encode()).digest()
    return int.from_bytes(digest[:8], "little") / 2**64


def choice_item(
    cand: Candidate,
    ctx: GenContext,
    truth: str,
    distractors: Sequence[str],
    *,
    question: str,
    template_id: str,
    strategy: str,
    pool_size: int | None = None,
    **fields,
) -> Item:
    """An MCQ whose options are ``truth`` + ``distractors`` with the answer on the task's next
    balanced letter. Every check that can fail must run before this (the slot is consumed)."""
    distractors = list(distractors)
    folded = [d.casefold() for d in distractors]
    if truth.casefold() in folded or len(set(folded)) != len(folded):
        raise ItemProblem(f"options are not distinct: {[truth, *distractors]}")
    n = len(distractors) + 1
    slot = ctx.slots.next(ctx.spec.name, n)
    options, pos = place_answer(truth, distractors, slot, ctx.rng)
    fields.setdefault("gt", truth)
    return ctx.base_item(
        cand,
        question=question,
        options=tuple(options),
        answer=LETTERS[pos],
        negatives=Negatives(
            strategy=strategy,
            candidates=tuple(distractors),
            pool_size=len(distractors) if pool_size is None else pool_size,
        ),
        template_id=template_id,
        **fields,
    )


def sampled_item(
    cand: Candidate,
    ctx: GenContext,
    negatives: Negatives,
    question: str,
    template_id: str,
    **fields,
) -> Item:
    """:func:`choice_item` on the candidate's truth with the distractors ``negatives`` that the
    task's sampler gave (:func:`sampled_distractors`), recorded as it gave them."""
    return choice_item(
        cand,
        ctx,
        cand.truth,
        negatives.candidates,
        question=question,
        template_id=template_id,
        strategy=negatives.strategy,
        pool_size=negatives.pool_size,
        **fields,
    )


def sampled_distractors(
    cand: Candidate,
    ctx: GenContext,
    truth: str,
    n_options: int,
    pool: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
) -> Negatives:
    """Distractors from the task's sampler (``label_pool``, ``visual_class``, ...) over ``pool``
    (default: the source's vocabulary), never one of ``exclude`` (other true answers)."""
    source = cand.sample.source
    banned = {e.casefold() for e in exclude}
    base = ctx.vocab.get(source, ()) if pool is None else pool
    request = OptionRequest(
        truth=truth,
        pool=tuple(p for p in base if p.casefold() not in banned),
        n_options=n_options,
        sample=cand.sample,
        mandatory=tuple(m for m in ctx.spec.negatives.mandatory if m.casefold() not in banned),
        ontology=ctx.ontologies.get(source, Ontology()),
        ledger=ctx.ledger,
    )
    return ctx.sampler.sample(request, ctx.rng)


def region_candidates(samples, labels: Sequence[str] = ()) -> list[Candidate]:
    """One candidate per region with a box (optionally only ``labels``); truth = its label."""
    only = set(labels)
    out = []
    for s in samples:
        for k, region in enumerate(s.regions):
            if region.bbox is not None and (not only or region.label in only):
                out.append(Candidate(s, region.label, region, k))
    return out


class RegionBoxCandidates:
    """Mixin of the tasks that ask about a region's box (grounding, selection): one candidate
    per region with a box (of ``params.labels`` when given), planned from the ``regions``
    column (:mod:`.columns`) with the image sizes their box pool reads."""

    params: dict

    @classmethod
    def requirements(cls, params: dict, prompt_level: str) -> list[set[str]]:
        return [{"regions"}]

    def candidates(self, samples) -> list[Candidate]:
        return region_candidates(samples, self.params.get("labels", ()))

    plan_columns = (
        "regions.list.element.label",
        "regions.list.element.bbox",
        "width",
        "height",
    )

    def column_candidates(self, batch, pool) -> Columns:
        """:meth:`candidates` from the ``regions`` column (:mod:`.columns`)."""
        return region_columns(batch, pool, self.params.get("labels", ()))


def other_boxes(cand: Candidate) -> list[tuple[float, float, float, float]]:
    """Boxes of the sample's other regions (distractor boxes must stay clear of them)."""
    return [
        r.bbox
        for k, r in enumerate(cand.sample.regions)
        if k != cand.region_index and r.bbox is not None
    ]


def distractor_boxes(
    cand: Candidate,
    ctx: GenContext,
    n: int,
    params: dict,
    pool: BoxPool | None = None,
    fresh: Callable[[tuple], bool] | None = None,
    larger: int | None = None,
) -> list[tuple[float, ...]]:
    """``n`` boxes with IoU below ``params.max_iou`` (default 0.1) with the target, with every
    other true region and with each other; ItemProblem when none fit. With the task's
    ``pool`` (its true boxes, :mod:`.box_options`) they are true boxes of other images,
    jittered by ``params.box_jitter`` (0.05) of their sides, whose text is ``fresh``, and
    ``larger`` of them (None: any number) larger than the target; without one, boxes of about
    the target's size (``params.size_jitter``) placed uniformly."""
    if cand.region is None or cand.region.bbox is None:
        raise ItemProblem("the candidate has no region box")
    s = cand.sample
    max_iou = float(params.get("max_iou", 0.1))
    try:
        if pool is not None:
            return pool_distractor_boxes(
                pool,
                s,
                cand.region.label,
                cand.region.bbox,
                n,
                ctx.rng,
                max_iou=max_iou,
                avoid=other_boxes(cand),
                jitter=float(params.get("box_jitter", 0.05)),
                fresh=fresh,
                larger=larger,
            )
        return sample_distractor_boxes(
            cand.region.bbox,
            s.width,
            s.height,
            n,
            ctx.rng,
            max_iou=max_iou,
            avoid=other_boxes(cand),
            size_jitter=float(params.get("size_jitter", 0.2)),
        )
    except ValueError as exc:
        raise ItemProblem(f"distractor boxes: {exc}") from None
