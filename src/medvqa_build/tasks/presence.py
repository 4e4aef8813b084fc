"""``instrument_presence``: "Is the <tool> visible in this frame?" with the options Yes / No
(EndoBench's Instrument Presence; its random baseline, 48.98%, says two options).

Which tools a sample shows comes from ``tool:<name>`` attributes (Cholec80-style 0/1 tables)
or, for sources without them, from its region labels (``params.labels`` restricts them to
instruments). Absent tools are the other tools of the same source, so a question never asks
about an instrument the source does not annotate. Each sample gives one question; whether it
asks about a present or an absent tool is fixed by the sample id, so Yes and No come out
about even and the round-robin over answers evens them exactly where the data allows.

The tools of a source are those of the whole pool, so the generate stage first streams the
pool through :meth:`InstrumentPresence.scan` and then asks about one sample at a time: a pool
of 10^5 Cholec80 frames is never held (it was, ~2 kB a frame).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..records import Item, Sample
from .base import TASKS, Candidate, GenContext, TaskGenerator
from .columns import Columns, NotColumnar, strings, tool_flags
from .common import NO, YES, choice_item, stable_unit, templated
from .counting import TOOL_PREFIX


@TASKS.register("instrument_presence")
class InstrumentPresence(TaskGenerator):
    name = "instrument_presence"
    per_sample = True
    scans_pool = True
    needs = "tool presence attributes (tool:<name> = 0/1) or instrument regions"
    templates = (
        "Is the {tool} visible in this surgical frame?",
        "Does this image show the {tool}?",
        "Can you see the {tool} in this endoscopic view?",
        "Is the {tool} present in the surgical field?",
        "Does the {tool} appear in this frame?",
        "Is the {tool} being used in this image?",
    )

    def __init__(self, params: dict | None = None, n_options: int | None = None):
        super().__init__(params, n_options)
        self._pool_tools: dict[str, set[str]] | None = None  # set by scan

    @classmethod
    def requirements(cls, params: dict, prompt_level: str) -> list[set[str]]:
        return [{"attribute:tool"}, {"regions"}]

    def _tools(self, sample: Sample) -> tuple[set[str], set[str]] | None:
        """(tools present, tools annotated as absent) or None when the sample says nothing."""
        flags = {
            k[len(TOOL_PREFIX) :]: v
            for k, v in sample.attributes.items()
            if k.startswith(TOOL_PREFIX)
        }
        if flags:
            return {t for t, v in flags.items() if v == "1"}, {
                t for t, v in flags.items() if v != "1"
            }
        only = set(self.params.get("labels", []))
        present = {r.label for r in sample.regions if not only or r.label in only}
        return (present, set()) if sample.regions or self.params.get("count_empty") else None

    def _source_tools(self, samples: Iterable[Sample]) -> dict[str, set[str]]:
        """Every tool each source annotates (present or absent) in ``samples``."""
        vocab: dict[str, set[str]] = defaultdict(set)
        for s in samples:
            tools = self._tools(s)
            if tools is not None:
                vocab[s.source] |= tools[0] | tools[1]
        return vocab

    def scan(self, samples: Iterable[Sample]) -> None:
        """Remember the pool's tools per source: later ``candidates`` calls, one sample at a
        time, then pick absent tools as they would from the whole pool."""
        self._pool_tools = self._source_tools(samples)

    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        known: dict[str, tuple[set[str], set[str]]] = {}
        for s in samples:
            tools = self._tools(s)
            if tools is not None:
                known[s.sample_id] = tools
        scanned = self._pool_tools
        vocab = scanned if scanned is not None else self._source_tools(samples)
        out = []
        for s in samples:
            if s.sample_id not in known:
                continue
            present, absent = known[s.sample_id]
            absent = absent | (vocab.get(s.source, set()) - present)
            ask_present = stable_unit(self.name, s.sample_id) < 0.5
            if not present or not absent:
                ask_present = bool(present)
            choices = sorted(present if ask_present else absent)
            if not choices:
                continue
            tool = choices[int(stable_unit(self.name, s.sample_id, "tool") * len(choices))]
            out.append(Candidate(s, YES if ask_present else NO, extra={"tool": tool}))
        return out

    # -- planned from columns (stages/plan_columns.py) ----------------------------------------
    plan_columns = ("attributes", "regions.list.element.label")
    scan_first = True  # the absent tools of a sample are those of its source's whole pool

    def _column_tools(self, batch, pool):
        """:meth:`_tools` of each pool sample from columns: which samples say something, and
        their tools as entries (pool index, tool name, whether present)."""
        n = len(pool)
        parents, names, values = tool_flags(batch, pool, TOOL_PREFIX)
        flagged = np.bincount(parents, minlength=n) > 0
        present = np.asarray(pc.equal(values, "1"))
        take = pool if len(pool) < len(batch["regions"]) else None
        regions = batch["regions"] if take is None else batch["regions"].take(pa.array(take))
        owner = np.asarray(pc.list_parent_indices(regions), np.int64)
        flat = pc.list_flatten(regions)
        if flat.null_count:
            raise NotColumnar("a null region")
        labels = pc.struct_field(flat, "label")
        if labels.null_count:
            raise NotColumnar("a region without a label")
        has_regions = np.bincount(owner, minlength=n) > 0
        mine = ~flagged[owner]  # a sample with tool flags reads no region
        only = strings(self.params.get("labels", []))
        if only:
            mine &= np.asarray(pc.is_in(labels, pa.array(only, pa.string())).fill_null(False))
        known = flagged | has_regions | bool(self.params.get("count_empty"))
        return (
            known,
            np.concatenate([parents, owner[mine]]),
            pa.concat_arrays([names.cast(pa.string()), labels.filter(pa.array(mine))]),
            np.concatenate([present, np.ones(int(mine.sum()), bool)]),
        )

    def column_scan(self, batch, pool) -> None:
        """:meth:`scan` of one batch's pool from columns (the tools so far: ``_scanned``)."""
        _, at, names, _ = self._column_tools(batch, pool)
        sources = batch["source"].take(pa.array(pool[at], pa.int64()))
        pairs = pa.table({"source": sources, "tool": names}).group_by(["source", "tool"])
        scanned = self.__dict__.setdefault("_scanned", defaultdict(set))
        for src, tool in zip(*pairs.aggregate([]).to_pydict().values(), strict=True):
            scanned[src].add(tool)

    def column_scanned(self) -> None:
        """The scan is complete: every tool each source annotates."""
        self._pool_tools = self.__dict__.pop("_scanned", defaultdict(set))

    def column_candidates(self, batch, pool) -> Columns:
        """:meth:`candidates` (after the scan) from columns: Yes where the question asks
        about a present tool, No where about an absent one."""
        if self._pool_tools is None:
            raise NotColumnar("no scan of the pool")
        n = len(pool)
        known, at, names, present = self._column_tools(batch, pool)
        codes = np.asarray(names.dictionary_encode().indices, np.int64)
        width = int(codes.max()) + 1 if len(codes) else 1
        distinct = np.unique(at[present] * width + codes[present])
        n_present = np.bincount(distinct // width, minlength=n)
        n_absent = np.bincount(at[~present], minlength=n)
        src = batch["source"].take(pa.array(pool, pa.int64())).dictionary_encode()
        n_source = np.array(
            [len(self._pool_tools.get(x, ())) for x in src.dictionary.to_pylist()], np.int64
        )[np.asarray(src.indices, np.int64)]
        has_present = n_present > 0
        has_absent = (n_absent > 0) | (n_source > n_present)
        ok = known & (has_present | has_absent)
        ask = has_present.copy()
        both = np.flatnonzero(ok & has_present & has_absent)
        if len(both):
            ids = batch["sample_id"].take(pa.array(pool[both], pa.int64())).to_pylist()
            ask[both] = [stable_unit(self.name, sid) < 0.5 for sid in ids]
        truths = pa.array(np.where(ask[ok], YES, NO), pa.string())
        return pool[ok], np.zeros(int(ok.sum()), np.int64), truths

    def vocabulary(self, samples: Sequence[Sample]) -> list[str]:
        return [NO, YES]

    def make_item(self, cand: Candidate, ctx: GenContext, index: int) -> Item:
        question, template_id = templated(self, index, tool=cand.extra["tool"])
        other = NO if cand.truth == YES else YES
        return choice_item(
            cand,
            ctx,
            cand.truth,
            [other],
            question=question,
            template_id=template_id,
            strategy="yes_no",
        )
