"""What a task generator is: it lists candidate (sample, truth[, region]) pairs, names the
label vocabulary distractors come from, and words the question from rotating templates."""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..geometry import COORD_HINTS
from ..media.encode import encode_image
from ..media.refs import generated_ref, sample_ref
from ..negatives import OptionRequest, place_answer
from ..negatives.frequency import FrequencyLedger
from ..ontology import Ontology
from ..records import DrawnShape, Item, Region, Sample
from ..registry import Registry
from ..store.atomic import write_atomic
from ..vocab import LETTERS

if TYPE_CHECKING:
    from ..manifest import SourceManifest
    from ..negatives.placement import BalancedSlots
    from ..recipe import Recipe, TaskSpec


class ItemProblem(Exception):
    """A candidate that cannot become a valid item (reported as dropped, with this reason)."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """One possible item: the sample, the true answer text and, for region tasks, the region.

    Multi-image tasks put every sample they use in ``samples`` (the first is ``sample``);
    ``extra`` carries task-specific data (e.g. the other regions of a region-selection item).
    """

    sample: Sample
    truth: str
    region: Region | None = None
    region_index: int | None = None
    samples: tuple[Sample, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def all_samples(self) -> tuple[Sample, ...]:
        return self.samples or (self.sample,)


@dataclass
class GenContext:
    """What a generator may use while making one task's items."""

    recipe: Recipe
    spec: TaskSpec
    rng: np.random.Generator
    sampler: Any
    slots: BalancedSlots
    vocab: dict[str, list[str]]  # source -> answer vocabulary of this task
    ontologies: dict[str, Ontology]
    manifests: dict[str, SourceManifest]
    out_dir: Path | None = None  # where synthesised images go (``generated://`` refs)
    pool: Sequence[Sample] = ()  # every sample the task may use (``draws_from_pool`` tasks)
    roots: dict[str, Path] = field(default_factory=dict)  # source id -> its files (or materialised)
    # each option text's showings as the answer and as a distractor in this task (issue 32.2)
    ledger: FrequencyLedger = field(default_factory=FrequencyLedger)
    # the kind of shape one mark of the task's prompt level records (its renderer's
    # ``shape_kind``: box, contour, mask, point, text; None: nothing is drawn), given by the
    # generate stage, so generators plan shapes without importing the renderers
    shape_kind: str | None = None

    def write_image(self, name: str, rgb: np.ndarray) -> str:
        """Save a synthesised image (PNG, lossless) in the generate stage; returns its reference."""
        if self.out_dir is None:
            raise ItemProblem("this task synthesises images but no output folder was given")
        rel = f"images/{name}.png"
        write_atomic(self.out_dir / rel, encode_image(rgb, "png"))
        return generated_ref(rel)

    def item_id(self, cand: Candidate) -> str:
        key = repr(
            (
                self.recipe.benchmark,
                self.spec.name,
                [s.sample_id for s in cand.all_samples],
                cand.region_index,
                self.recipe.seed,
            )
        )
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    def base_item(self, cand: Candidate, **fields: Any) -> Item:
        """An Item with taxonomy, provenance, licence and clean images filled in."""
        spec, source = self.spec, cand.sample.source
        defaults: dict[str, Any] = dict(
            item_id=self.item_id(cand),
            benchmark=self.recipe.benchmark,
            category=spec.category,
            task=spec.task,
            subtask=spec.subtask or spec.task,
            scene=cand.sample.scene,
            source=source,
            sample_ids=tuple(s.sample_id for s in cand.all_samples),
            images=tuple(sample_ref(s) for s in cand.all_samples),
            prompt_level=spec.prompt_level,
            coord_format=spec.coord_format if spec.prompt_level == "coord" else None,
            split="test",
            licence=self.manifests[source].licence,
        )
        defaults.update(fields)
        return Item(**defaults)


class TaskGenerator(ABC):
    """Base of every generator. Subclasses set ``needs`` and ``templates`` and implement
    :meth:`candidates` and :meth:`truth_vocabulary`."""

    name: ClassVar[str]
    needs: ClassVar[str]  # human-readable: which sample field feeds the task
    templates: ClassVar[tuple[str, ...]]
    # True when a sample's candidates depend on that sample alone and the vocabulary is the
    # set of candidate truths (plus fixed extras): the generate stage then streams the pool
    # instead of holding it. Tasks that pair samples across the pool leave it False.
    per_sample: ClassVar[bool] = False
    # A ``per_sample`` task whose candidates also depend on a summary of its whole pool (which
    # tools a source annotates at all) sets this: :meth:`scan` then reads the pool, streamed,
    # before any ``candidates`` call, so the pool is still never held.
    scans_pool: ClassVar[bool] = False
    # A ``scans_pool`` task planned from columns (stages/plan_columns.py) whose candidates
    # depend on what the scan found: its ``column_scan`` then reads the whole pool before the
    # first ``column_candidates`` call (else the scan is made as the candidates are planned).
    scan_first: ClassVar[bool] = False
    # True when the candidates come from groups of samples (a volume's slices, a video's
    # frames) that :meth:`pool_group` names: ``candidates(pool)`` must equal the candidates of
    # each group's samples (in pool order), groups taken in sorted key order, a key naming one
    # source, and the vocabulary must be the candidates' truths. The generate stage then holds
    # one group at a time, not the pool.
    groups_pool: ClassVar[bool] = False
    # A ``per_sample`` task whose items also show other samples of the pool (MedSG
    # cross-modal partners, referring fillers) sets this: ``ctx.pool`` is then a
    # :class:`~medvqa_build.sample_spill.SampleSpill` (on disk; a sample read when indexed).
    draws_from_pool: ClassVar[bool] = False
    # True when the item's answer text is the candidate's truth: the recipe's answer balance
    # (docs/validity.md) then spreads the truths. Tasks answered by a box or a colour set it
    # False: their truth is the finding asked about, not the answer, and spreading it would
    # only cost items (a task's own ``balance`` still applies).
    answer_is_truth: ClassVar[bool] = True
    # the key of the seeded draws a task makes while it is planned (a capped box pool, issue
    # 35): the generate stage sets it from the recipe's seed and the task's name
    # (:func:`~medvqa_build.stages.generate.generator_for`)
    seed: bytes = b""

    def __init__(self, params: dict | None = None, n_options: int | None = None):
        self.params = dict(params or {})
        self.n_options = n_options  # the task's option count (a vocabulary may depend on it)
        if "templates" in self.params:  # a recipe may supply its own paraphrases
            self.templates = tuple(self.params["templates"])

    @abstractmethod
    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        """Every (sample, truth[, region]) this task could ask about."""

    def scan(self, samples: Iterable[Sample]) -> None:
        """Read the whole pool once (``scans_pool`` tasks): what :meth:`candidates` of one
        sample then needs to know about the others. The default needs nothing."""
        return None

    def pool_group(self, sample: Sample) -> tuple | None:
        """``groups_pool`` tasks: the (sortable) key of the group a sample belongs to, None
        when it can be in none."""
        return None

    def vocabulary(self, samples: Sequence[Sample]) -> list[str]:
        """The answer vocabulary over ``samples`` (distractors for ``label_pool`` come from it)."""
        return sorted({c.truth for c in self.candidates(samples)})

    coord_templates: ClassVar[tuple[str, ...]] = ()
    # per prompt level (contour, mask, point): templates naming what is drawn; levels not
    # listed use ``templates``. A recipe's own ``templates`` replace them all.
    level_templates: ClassVar[dict[str, tuple[str, ...]]] = {}

    def question(
        self,
        candidate: Candidate,
        template_index: int,
        color: str = "red",
        level: str = "image",
        convention: str = "abs",
    ) -> tuple[str, str]:
        """``(question text, template_id)`` — templates rotate deterministically by index.

        At the ``coord`` level the text keeps a ``{box}`` slot for the box in ``convention``.
        """
        if level == "coord" and self.coord_templates and candidate.region is not None:
            # "{box}" is filled by the render stage from the box as finally drawn (after any
            # resize), so the text and the pixels the model sees cannot disagree.
            k = template_index % len(self.coord_templates)
            return f"{self.coord_templates[k]} {COORD_HINTS[convention]}", f"{self.name}/coord/{k}"
        wording = self.level_templates.get(level) if "templates" not in self.params else None
        if wording:  # the prompt's own word (contour, overlay, point), not "box" for all
            k = template_index % len(wording)
            return wording[k].format(color=color), f"{self.name}/{level}/{k}"
        k = template_index % len(self.templates)
        return self.templates[k].format(color=color), f"{self.name}/{k}"

    def make_item(self, cand: Candidate, ctx: GenContext, index: int) -> Item:
        """A single-answer MCQ: distractors from the task's sampler, the answer on a balanced
        letter. Tasks with other answer shapes (multi-select, colours, boxes) override this."""
        spec, source = ctx.spec, cand.sample.source
        request = OptionRequest(
            truth=cand.truth,
            pool=tuple(ctx.vocab.get(source, ())),
            n_options=spec.n_options,
            sample=cand.sample,
            mandatory=tuple(spec.negatives.mandatory),
            ontology=ctx.ontologies.get(source, Ontology()),
            ledger=ctx.ledger,
        )
        negatives = ctx.sampler.sample(request, ctx.rng)
        slot = ctx.slots.next(spec.name, spec.n_options)
        options, pos = place_answer(cand.truth, negatives.candidates, slot, ctx.rng)
        color = "red"
        question, template_id = self.question(
            cand, index, color, spec.prompt_level, spec.coord_format
        )
        return ctx.base_item(
            cand,
            question=question,
            options=tuple(options),
            answer=LETTERS[pos],
            gt=cand.truth,
            prompt_geometry=self.prompt_shapes(cand, ctx.shape_kind, color),
            negatives=negatives,
            template_id=template_id,
        )

    def repeat_scope(self, candidate: Candidate) -> tuple:
        """What counts as "the same images" for a repeated answer (:mod:`.repeats`): the
        candidate's samples. A task whose images of one case are co-registered (MedSG's MR
        sequences) widens it to the case."""
        return tuple(s.sample_id for s in candidate.all_samples)

    def answer_key(self, candidate: Candidate) -> str | None:
        """The answer text ``candidate`` will have, known before its item is made: a second
        candidate of the same images with the same answer is dropped (:mod:`.repeats`).
        ``None``: answers that differ per candidate (boxes) or are drawn at random (colours)."""
        return candidate.truth

    def prompt_shapes(
        self, candidate: Candidate, kind: str | None, color: str
    ) -> tuple[DrawnShape, ...]:
        """What the render stage should draw: one ``kind`` shape (``GenContext.shape_kind``)
        on the candidate's region (planned; the renderer records what it drew)."""
        if kind is None or candidate.region is None:
            return ()
        return (
            DrawnShape(
                image_index=0,
                kind=kind,
                label=candidate.region.label,
                color=color,
                bbox=candidate.region.bbox,
                mask=candidate.region.mask,
            ),
        )


TASKS: Registry[type[TaskGenerator]] = Registry("task generator")
