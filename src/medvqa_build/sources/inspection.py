"""``medvqa-build inspect``: a quick look at a download before converting it.

It resolves ROOT as ``convert`` would, names the parts found and missing (and what a missing
part costs), counts each part's candidate files and reads the first ``limit`` of them the way
``convert`` does (headers only, no pixels decoded) to show the label tables and their columns,
the labels and attributes seen, labels left out and the first problems with their reasons.
It ends with the ``convert`` command to run.
"""

from __future__ import annotations

import os
import shlex
from collections import Counter
from dataclasses import dataclass, field

from ..layouts.base import ScanContext
from ..layouts.discovery import RootResolution
from ..records import QuarantineEntry, Sample
from ..store.limits import read_limits
from ..store.memory import worker_budget
from ..store.paths import LINKED_FOLDER_REASON, linked_folders_outside
from . import get_source

PROBLEMS_SHOWN = 5  # quarantine reasons kept per part
VALUES_SHOWN = 12  # most common values kept per label or attribute


class _LimitedContext(ScanContext):
    """Counts every candidate that goes through :meth:`defer` and reads only the first
    ``limit`` (the rest are skipped as if another shard owned them)."""

    limit: int = 0

    def defer(self, fn, *args, **kwargs):
        self.candidates_seen += 1
        if self.candidates_seen > self.limit:
            return None
        return fn(*args, **kwargs)


@dataclass
class PartInspection:
    """One found part: how many candidates, and what the first ``read`` of them hold."""

    name: str
    layout: str
    candidates: int = 0
    counted_all: bool = True  # False: the layout had more candidates than were read
    read: int = 0
    converted: int = 0
    quarantined: int = 0
    labels: Counter = field(default_factory=Counter)
    region_labels: Counter = field(default_factory=Counter)
    attributes: dict[str, Counter] = field(default_factory=dict)
    tables: dict[str, list[str]] = field(default_factory=dict)
    labels_missing: Counter = field(default_factory=Counter)
    problems: list[tuple[str, str]] = field(default_factory=list)

    def add(self, entry: Sample | QuarantineEntry) -> None:
        self.read += 1
        if isinstance(entry, QuarantineEntry):
            self.quarantined += 1
            if len(self.problems) < PROBLEMS_SHOWN:
                self.problems.append((entry.file, entry.reason))
            return
        self.converted += 1
        self.labels.update(entry.labels)
        self.region_labels.update(r.label for r in entry.regions)
        for key, value in entry.attributes.items():
            self.attributes.setdefault(key, Counter())[value] += 1

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "layout": self.layout,
            "candidates": self.candidates,
            "counted_all": self.counted_all,
            "read": self.read,
            "converted": self.converted,
            "quarantined": self.quarantined,
            "tables": self.tables,
            "labels": dict(self.labels.most_common()),
            "region_labels": dict(self.region_labels.most_common()),
            "attributes": {
                k: {"distinct": len(c), "top": dict(c.most_common(VALUES_SHOWN))}
                for k, c in sorted(self.attributes.items())
            },
            "labels_missing": dict(sorted(self.labels_missing.items())),
            "problems": [{"file": f, "reason": r} for f, r in self.problems],
        }


@dataclass
class SourceInspection:
    source: str
    resolution: RootResolution
    parts: list[PartInspection]
    lost: dict[str, list[str]]  # missing part -> capabilities no found part provides
    # folders linked from outside the root: not followed, their files not read (see convert)
    linked_out: list[str] = field(default_factory=list)

    @property
    def convert_command(self) -> str:
        root = shlex.quote(str(self.resolution.root))
        return f"medvqa-build convert {self.source} {root} -o {self.source}.parquet"

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "root": self.resolution.to_dict(),
            "parts": [p.to_dict() for p in self.parts],
            "missing_parts_lose": self.lost,
            "convert_command": self.convert_command,
            "linked_out": self.linked_out,
        }

    def lines(self) -> list[str]:
        """The human-readable report ``medvqa-build inspect`` prints."""
        r = self.resolution
        out = [r.line()]
        for name in r.missing:
            lost = ", ".join(self.lost.get(name, [])) or "nothing the found parts lack"
            out.append(f"  without part {name}: loses {lost}")
        for p in self.parts:
            count = f"{p.candidates}" if p.counted_all else f"at least {p.candidates}"
            out.append(
                f"part {p.name} ({p.layout}): {count} candidate file(s); read {p.read}: "
                f"{p.converted} convert, {p.quarantined} quarantined"
            )
            for table, columns in p.tables.items():
                out.append(f"  table {table}: columns {', '.join(columns)}")
            if p.labels:
                out.append("  labels: " + _top(p.labels))
            if p.region_labels:
                out.append("  region labels: " + _top(p.region_labels))
            for key, values in sorted(p.attributes.items()):
                out.append(f"  attribute {key}: {len(values)} value(s), e.g. {_top(values, 3)}")
            if p.labels_missing:
                out.append("  labels left out (empty / not assessed): " + _top(p.labels_missing))
            for file, reason in p.problems:
                out.append(f"  problem: {file}: {reason}")
        for rel in self.linked_out:
            out.append(f"problem: {rel}: {LINKED_FOLDER_REASON}")
        out.append(f"next: {self.convert_command}")
        return out


def _top(counter: Counter, n: int = VALUES_SHOWN) -> str:
    items = counter.most_common(n)
    text = ", ".join(f"{k} ({v})" for k, v in items)
    return text + (f", ... {len(counter) - n} more" if len(counter) > n else "")


def inspect_source(
    source_id: str, root: str | os.PathLike, limit: int = 200, verify: str = "header"
) -> SourceInspection:
    """Resolve ``root`` for ``source_id`` and look at each found part without writing
    anything: every candidate counted where the layout can count without reading (else the
    first ``limit``), the first ``limit`` read as ``convert`` reads them, under the worker
    memory budget a convert shard runs under (``max_worker_bytes``: a read past it is that
    file's quarantine entry)."""
    with worker_budget(read_limits().max_worker_bytes):
        return _inspect(source_id, root, limit, verify)


def _inspect(source_id: str, root: str | os.PathLike, limit: int, verify: str) -> SourceInspection:
    source = get_source(source_id)
    resolution = source.resolve(root)
    parts = []
    for part, layout in source.layouts:
        if part.name not in resolution.found:
            continue
        ctx = source.context(part, layout, resolution.root, verify, cls=_LimitedContext)
        ctx.limit = limit
        seen = PartInspection(part.name, part.layout)
        # layouts that go through defer are counted by it; the others by what they yield
        deferring = getattr(layout, "shardable", False)
        countable = deferring and getattr(layout, "counts_cheaply", False)
        for _, entry in source.scan_part(layout, ctx):
            seen.add(entry)
            if not countable and (ctx.candidates_seen if deferring else seen.read) >= limit:
                seen.counted_all = False
                break
        seen.candidates = ctx.candidates_seen if deferring else seen.read
        seen.tables = dict(ctx.tables)
        seen.labels_missing = Counter(ctx.labels_missing)
        parts.append(seen)
    have = source.capabilities(resolution.found)
    lost = {name: sorted(source.capabilities([name]) - have) for name in resolution.missing}
    linked = linked_folders_outside(resolution.root)
    return SourceInspection(source_id, resolution, parts, lost, linked)


__all__ = ["PartInspection", "SourceInspection", "inspect_source"]
