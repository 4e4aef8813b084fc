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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..records import Item, Sample
from ..vocab import LETTERS
from .base import TASKS, Candidate, GenContext, ItemProblem, TaskGenerator
from .columns import Columns, NotColumnar, attribute_values, strings, tool_flags
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

    # -- planned from columns (stages/plan_columns.py) ----------------------------------------
    plan_columns = ("labels", "attributes", "regions.list.element.label")

    def column_counts(self, batch, pool) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`count` of each pool sample from columns: the counts, and which are known."""
        n = len(pool)
        count, known = np.zeros(n, np.int64), np.zeros(n, bool)
        done = np.zeros(n, bool)  # decided by an earlier rule
        attr = self.params.get("count_attribute")
        if attr:
            if not isinstance(attr, str):
                raise NotColumnar("a count attribute that is not a string")
            values = attribute_values(batch, pool, attr)
            done = np.asarray(pc.is_valid(values))
            encoded = values.dictionary_encode()
            parsed = [_int_or_none(v) for v in encoded.dictionary.to_pylist()]
            codes = np.asarray(encoded.indices.fill_null(0), np.int64)[done]
            known[done] = np.array([p is not None for p in parsed] + [False], bool)[codes]
            count[done] = np.array([p or 0 for p in parsed] + [0], np.int64)[codes]
        if self.use_tool_attributes:
            parents, _, values = tool_flags(batch, pool, TOOL_PREFIX)
            has = np.bincount(parents, minlength=n) > 0
            ones = np.bincount(parents, np.asarray(pc.equal(values, "1")), minlength=n)
            tools = has & ~done
            known[tools], count[tools] = True, ones[tools].astype(np.int64)
            done = done | has
        only = strings(self.params.get("labels", []))
        regions = _of_pool(batch["regions"], pool)  # null: none, as in a Sample
        flat = pc.list_flatten(regions)
        if flat.null_count:
            raise NotColumnar("a null region")
        owner = np.asarray(pc.list_parent_indices(regions), np.int64)
        has = np.bincount(owner, minlength=n) > 0
        counted = np.ones(len(owner), bool)
        if only:
            counted = _in(pc.struct_field(flat, "label"), only)
        by_regions = has & ~done
        known[by_regions] = True
        count[by_regions] = np.bincount(owner[counted], minlength=n)[by_regions]
        done = done | has
        rest = ~done
        if only:
            labels = _of_pool(batch["labels"], pool)
            parents = np.asarray(pc.list_parent_indices(labels), np.int64)
            hit = _in(pc.list_flatten(labels), only)
            rest &= ~(np.bincount(parents[hit], minlength=n) > 0)  # count unknown
        if self.params.get("count_empty", False):
            known[rest], count[rest] = True, 0
        return count, known

    def column_candidates(self, batch, pool) -> Columns:
        """:meth:`candidates` from columns (:mod:`.columns`)."""
        count, known = self.column_counts(batch, pool)
        distinct, inverse = np.unique(count[known], return_inverse=True)
        texts = [self._answer_or_none(int(c)) for c in distinct]
        kept = np.array([t is not None for t in texts], bool)[inverse]
        truths = pa.array([t or "" for t in texts], pa.string())
        at = pool[known][kept]
        return at, np.zeros(len(at), np.int64), truths.take(pa.array(inverse[kept], pa.int64()))

    def column_scan(self, batch, pool) -> None:
        """:meth:`scan` of one batch's pool from columns (the counts so far: ``_scanned``)."""
        if not self.fixed_options:
            count, known = self.column_counts(batch, pool)
            self.__dict__.setdefault("_scanned", set()).update(count[known].tolist())

    def column_scanned(self) -> None:
        """The scan is complete: the counts the pool's answers span."""
        if not self.fixed_options:
            self._observed = self.__dict__.pop("_scanned", set())

    def _answer_or_none(self, count: int) -> str | None:
        try:
            return self.answer_text(count)
        except ItemProblem:
            return None

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


def _int_or_none(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _of_pool(column: pa.Array, pool: np.ndarray) -> pa.Array:
    return column if len(pool) == len(column) else column.take(pa.array(pool, pa.int64()))


def _in(values: pa.Array, allowed: list[str]) -> np.ndarray:
    return np.asarray(pc.is_in(values, pa.array(allowed, pa.string())).fill_null(False))


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
