"""``spine_localisation``: SpineBench's spinal lesion localisation (SLL), a multi-select over
the five lumbar disc levels (L1/L2 .. L5/S1, shuffled); the answer is every correct letter,
e.g. ``"A,C"``, and ``gt`` the correct levels comma-joined in option order."""

from __future__ import annotations

from collections.abc import Sequence

from ..records import Item, Negatives, Sample
from ..vocab import LETTERS, LEVELS_ATTRIBUTE, LUMBAR_LEVELS
from .base import TASKS, Candidate, GenContext, ItemProblem, TaskGenerator
from .columns import Columns, attribute_values, one_per_sample


def _levels(raw: str) -> str | None:
    """The truth of a ``lesion_levels`` value: its levels, when there are some and all are
    lumbar disc levels, else None."""
    levels = [lv for lv in raw.split(",") if lv]
    return ",".join(levels) if levels and all(lv in LUMBAR_LEVELS for lv in levels) else None


@TASKS.register("spine_localisation")
class SpineLocalisation(TaskGenerator):
    """Samples whose ``lesion_levels`` attribute names at least one lumbar level."""

    per_sample = True  # candidates from one sample at a time: the pool is streamed

    name = "spine_localisation"
    needs = f"a '{LEVELS_ATTRIBUTE}' attribute (comma-joined lumbar disc levels)"
    # SpineBench's example question, plus paraphrases of the same intent
    templates = (
        "What is the site of the disease in the spine?",
        "At which spinal levels is the lesion located?",
        "Which intervertebral levels are affected in this image?",
        "Where in the lumbar spine is the pathology found?",
        "Identify the disc levels where the spinal disease is present.",
    )
    instruction = "More than one option may be correct; answer with every correct letter."

    @classmethod
    def requirements(cls, params: dict, prompt_level: str) -> list[set[str]]:
        return [{f"attribute:{LEVELS_ATTRIBUTE}"}]

    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        out = []
        for s in samples:
            truth = _levels(s.attributes.get(LEVELS_ATTRIBUTE, ""))
            if truth is not None:
                out.append(Candidate(s, truth))
        return out

    plan_columns = ("attributes",)

    def column_candidates(self, batch, pool) -> Columns:
        """:meth:`candidates` from the ``attributes`` column (:mod:`.columns`)."""
        values = attribute_values(batch, pool, LEVELS_ATTRIBUTE)
        return one_per_sample(pool, values, lambda raw: _levels(raw or ""))

    def make_item(self, cand: Candidate, ctx: GenContext, index: int) -> Item:
        truths = set(cand.truth.split(","))
        if len(truths) == len(LUMBAR_LEVELS) and not self.params.get("allow_all", False):
            raise ItemProblem("every level is affected: the item has no distractor")
        options = [LUMBAR_LEVELS[i] for i in ctx.rng.permutation(len(LUMBAR_LEVELS))]
        picked = [i for i, lv in enumerate(options) if lv in truths]
        k = int(ctx.rng.integers(len(self.templates)))
        return ctx.base_item(
            cand,
            question=f"{self.templates[k]} {self.instruction}",
            options=tuple(options),
            answer=",".join(LETTERS[i] for i in picked),
            gt=",".join(options[i] for i in picked),
            negatives=Negatives(
                strategy="all_levels",
                candidates=tuple(lv for lv in options if lv not in truths),
                pool_size=len(LUMBAR_LEVELS),
            ),
            template_id=f"{self.name}/{k}",
        )
