"""Counting: EndoBench's Lesion Quantification (polyp counting, six options ``0, 1, 2, 3, 4,
More than 4``; lesion counting, four options) and Instrument Counting (four options such as
``0, 1, 2, 3`` or ``0, 1, 2, 4``; here the truth's rank among them is spread evenly).

The count is, in order of preference: the sample attribute ``params.count_attribute`` (e.g.
LDPolypVideo's ``polyp_count``), the number of ``tool:<name>`` attributes equal to ``1``
(Cholec80-style presence tables; instrument counting only), or the number of regions whose
label is in ``params.labels`` (all regions when not given). A sample without regions counts as
0 only with ``params.count_empty: true`` (a detection source whose negatives are real negatives,
not a classification source that has no boxes at all).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

from ..records import Item, Sample
from ..vocab import LETTERS
from .base import TASKS, Candidate, GenContext, ItemProblem, TaskGenerator
from .common import choice_item, templated
from .count_options import count_distractors, count_range

TOOL_PREFIX = "tool:"


class CountingTask(TaskGenerator):
    """Base of the counting tasks: ``fixed_options`` (polyp counting) or computed distractor
    counts in ``0..max_count`` (the other counting tasks), the truth's rank among them spread
    evenly over the task (:mod:`.count_options`)."""

    per_sample = True  # candidates from one sample at a time: the pool is streamed
    scans_pool = True  # the counts the pool's answers span bound the options (count_range)

    noun: ClassVar[str]
    fixed_options: ClassVar[tuple[str, ...]] = ()
    use_tool_attributes: ClassVar[bool] = False
    default_max_count: ClassVar[int] = 4

    def __init__(self, params: dict | None = None, n_options: int | None = None):
        super().__init__(params, n_options)
        if "options" in self.params:
            self.fixed_options = tuple(str(o) for o in self.params["options"])
        self._observed: set[int] = set()  # the pool's counts (scan)

    def scan(self, samples: Iterable[Sample]) -> None:
        """The counts of the pool, so no option is a count no item can have."""
        if not self.fixed_options:
            self._observed = {n for s in samples if (n := self.count(s)) is not None}

    @classmethod
    def requirements(cls, params: dict, prompt_level: str) -> list[set[str]]:
        alternatives = [{"regions"}]
        if params.get("count_attribute"):
            alternatives.append({f"attribute:{params['count_attribute']}"})
        if cls.use_tool_attributes:
            alternatives.append({"attribute:tool"})
        return alternatives

    # -- the count --------------------------------------------------------------------------
    def count(self, sample: Sample) -> int | None:
        attr = self.params.get("count_attribute")
        if attr and attr in sample.attributes:
            try:
                return int(sample.attributes[attr])
            except ValueError:
                return None
        if self.use_tool_attributes:
            tools = [v for k, v in sample.attributes.items() if k.startswith(TOOL_PREFIX)]
            if tools:
                return sum(v == "1" for v in tools)
        only = set(self.params.get("labels", []))
        if sample.regions:
            return sum(1 for r in sample.regions if not only or r.label in only)
        if only and set(sample.labels) & only:
            return None  # labelled with the counted class but no boxes: count unknown
        return 0 if self.params.get("count_empty", False) else None

    def answer_text(self, count: int) -> str:
        """The option text of a count: itself, or the open-ended last fixed option."""
        if not self.fixed_options:
            return str(count)
        numeric = [o for o in self.fixed_options if o.isdigit()]
        if str(count) in numeric:
            return str(count)
        last = self.fixed_options[-1]
        if not last.isdigit() and numeric and count > max(int(o) for o in numeric):
            return last
        raise ItemProblem(f"count {count} has no option among {list(self.fixed_options)}")

    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        out = []
        for s in samples:
            n = self.count(s)
            if n is None:
                continue
            try:
                out.append(Candidate(s, self.answer_text(n), extra={"count": n}))
            except ItemProblem:
                continue
        return out

    def vocabulary(self, samples: Sequence[Sample]) -> list[str]:
        return list(self.fixed_options) or sorted(
            {c.truth for c in self.candidates(samples)}, key=int
        )

    # -- the item ---------------------------------------------------------------------------
    def make_item(self, cand: Candidate, ctx: GenContext, index: int) -> Item:
        noun = str(self.params.get("noun", self.noun))
        question, template_id = templated(self, index, noun=noun)
        if self.fixed_options:
            options = list(self.fixed_options)
            distractors = [o for o in options if o != cand.truth]
            if self.params.get("ordered", False):
                # numeric order, as EndoBench printed them; the letter then follows the count
                return ctx.base_item(
                    cand,
                    question=question,
                    options=tuple(options),
                    answer=LETTERS[options.index(cand.truth)],
                    gt=cand.truth,
                    template_id=template_id,
                )
            return choice_item(
                cand,
                ctx,
                cand.truth,
                distractors,
                question=question,
                template_id=template_id,
                strategy="fixed_options",
            )
        n = int(cand.extra["count"])
        cap = int(self.params.get("max_count", self.default_max_count))
        lo, hi = count_range(self._observed, ctx.spec.n_options, cap)
        max_count = max(hi, n)
        k = ctx.spec.n_options - 1
        others = count_distractors(n, k, max_count, ctx.rng, ctx.ledger, min_count=lo)
        return choice_item(
            cand,
            ctx,
            cand.truth,
            [str(o) for o in others],
            question=question,
            template_id=template_id,
            strategy="rank_balanced_counts",
            pool_size=max_count - min(lo, n),
        )


@TASKS.register("polyp_counting")
class PolypCounting(CountingTask):
    name = "polyp_counting"
    needs = "polyp regions (boxes or masks) or a count attribute; six fixed options"
    noun = "polyps"
    fixed_options = ("0", "1", "2", "3", "4", "More than 4")
    templates = (
        "How many {noun} can be seen in this endoscopic image?",
        "Count the {noun} visible in this colonoscopy image.",
        "What is the number of {noun} present in this image?",
        "How many {noun} does this image contain?",
        "Please count the {noun} shown in this endoscopy frame.",
        "In this image, how many {noun} are visible?",
    )


@TASKS.register("lesion_counting")
class LesionCounting(CountingTask):
    name = "lesion_counting"
    needs = "lesion regions (boxes or masks) or a count attribute"
    noun = "lesions"
    templates = (
        "How many {noun} can be identified in this endoscopic image?",
        "Count the {noun} visible in this image.",
        "What is the number of {noun} shown in this endoscopy image?",
        "How many distinct {noun} does this image contain?",
        "Please count the {noun} present in this frame.",
    )


@TASKS.register("instrument_counting")
class InstrumentCounting(CountingTask):
    name = "instrument_counting"
    needs = "instrument regions or tool presence attributes (tool:<name> = 0/1)"
    noun = "surgical instruments"
    use_tool_attributes = True
    templates = (
        "How many {noun} are visible in this frame?",
        "Count the {noun} that appear in this surgical image.",
        "What is the number of {noun} present in this image?",
        "How many {noun} can be seen in the surgical field?",
        "Please count the {noun} shown in this endoscopic frame.",
    )
