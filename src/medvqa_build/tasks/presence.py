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

from ..records import Item, Sample
from .base import TASKS, Candidate, GenContext, TaskGenerator
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
