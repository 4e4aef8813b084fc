"""Group-aware, stratified splits of items.

Items that share a group (``group_id`` of any of their samples: patient, video, case) form
one unit that goes to one split as a whole, so no patient is on both sides. Units are placed
largest first (seeded order among equal sizes) into the split whose stratum counts (task,
label, ...) are furthest below their targets, so each stratum follows the proportions as far
as the group sizes allow. A source's official split is kept when ``use_official`` is set.
"""

from __future__ import annotations

from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

import numpy as np

from ..records import Item, Sample
from ..rng import rng_for
from ..store.packed import PackedStrings, SortedStrings
from .dedup import UnionFind
from .spec import SplitSpec


def _stratum(item: Item, keys: Sequence[str]) -> tuple:
    values = {"task": item.task, "label": item.gt, "source": item.source, "scene": item.scene or ""}
    return tuple(values[k] for k in keys)


class SplitPlan:
    """What assigning splits reads of each item, packed, fed one item at a time (the build
    streams its items to disk and rewrites them with :meth:`assign`'s splits): the stratum
    as a code and the sample ids. Per sample, :meth:`assign` keeps the group and official
    split codes of the samples the items use, read in one pass over the samples."""

    def __init__(self, spec: SplitSpec):
        self.spec = spec
        self._strata: dict[tuple, int] = {}
        self.strata = array("i")
        self.sample_ids = PackedStrings()  # each item's ids joined by \x1f ("" for none)

    def add(self, item: Item) -> None:
        key = _stratum(item, self.spec.stratify)
        self.strata.append(self._strata.setdefault(key, len(self._strata)))
        self.sample_ids.append(_SEP.join(item.sample_ids))

    def __len__(self) -> int:
        return len(self.strata)

    def assign(self, samples: Iterable[Sample], seed: int) -> list[str]:
        """The split of every item added, in order (:func:`assign_splits_with`'s choice)."""
        spec, n_items = self.spec, len(self)
        used = SortedStrings(sorted({s for ids in self.sample_ids for s in _split_ids(ids)}))
        m = len(used)
        named: dict[str, int] = {}  # "source:group" -> group code (< m: a sample's own)
        group = np.full(m, -1, np.int64)  # -1: the sample is its own group ("sample:<id>")
        official = np.full(m, -1, np.int64)
        official_names: list[str] = []
        for sample in samples:
            pos = used.index(sample.sample_id)
            if pos is None:
                continue
            if sample.group_id and spec.by == "group_id":
                key = f"{sample.source}:{sample.group_id}"
                group[pos] = named.setdefault(key, m + len(named))
            if sample.split is not None:  # the source's own name: mapped once it is unique
                if sample.split not in official_names:
                    official_names.append(sample.split)
                official[pos] = official_names.index(sample.split)
        # a sample's own group "sample:<id>" is code pos, unless a named group has that text
        for pos in np.flatnonzero(group < 0).tolist():
            group[pos] = named.get(f"sample:{used.keys[pos].decode()}", pos)
        item_samples = _Ragged([used.index(s) for s in _split_ids(ids)] for ids in self.sample_ids)
        units = _units_of(item_samples, group, m + len(named))
        strata = self.strata
        names = sorted(spec.proportions, key=lambda n: (-spec.proportions[n], n))
        totals = Counter(strata)
        target = {n: {k: spec.proportions[n] * c for k, c in totals.items()} for n in names}
        have: dict[str, Counter] = {n: Counter() for n in names}
        size: Counter = Counter()
        result: list[str | None] = [None] * n_items
        free_units = []
        for unit in units:
            known = []
            if spec.use_official:
                for i in unit:
                    codes = {int(official[p]) for p in item_samples[i]} - {-1}
                    name = official_names[codes.pop()] if len(codes) == 1 else None
                    known.append(spec.official_map.get(name, name) if name else None)
            if any(o is not None for o in known):
                # one official split: the whole unit follows it; several (the source leaks a
                # group): each item keeps its own, and the split-leak rule reports it
                distinct = {o for o in known if o is not None}
                only = next(iter(distinct)) if len(distinct) == 1 else None
                for i, o in zip(unit, known, strict=True):
                    result[i] = only or o or names[0]
                    have.setdefault(result[i], Counter())[strata[i]] += 1
                    size[result[i]] += 1
            else:
                free_units.append(unit)
        order = rng_for(seed, "split").permutation(len(free_units))
        free_units = sorted((free_units[i] for i in order), key=len, reverse=True)  # stable
        for unit in free_units:
            counts = Counter(strata[i] for i in unit)

            def need(n: str, counts=counts) -> float:
                strata_need = sum(
                    c * (target[n][k] - have[n][k]) / totals[k] for k, c in counts.items()
                )
                overall = (spec.proportions[n] * n_items - size[n]) / max(n_items, 1)
                return strata_need / sum(counts.values()) + overall

            best = max(names, key=need)  # max keeps the first on ties: larger splits first
            for i in unit:
                result[i] = best
            have[best].update(counts)
            size[best] += len(unit)
        return result  # type: ignore[return-value]


_SEP = "\x1f"


class _Ragged:
    """Rows of ints of any length, packed (each item's sample positions)."""

    def __init__(self, rows: Iterable[list[int]]):
        self.values, self.starts = array("q"), array("q", [0])
        for row in rows:
            self.values.extend(row)
            self.starts.append(len(self.values))

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, i: int) -> array:
        return self.values[self.starts[i] : self.starts[i + 1]]

    def __iter__(self):
        return (self[i] for i in range(len(self)))


def _split_ids(joined: str) -> list[str]:
    return joined.split(_SEP) if joined else []


def _units_of(item_samples: _Ragged, group: np.ndarray, n_groups: int) -> list[list[int]]:
    """Items joined through shared groups (connected components), each ascending, in the
    order of their first item; an item without samples is a unit of its own."""
    sets = UnionFind(len(item_samples))
    first = np.full(n_groups, -1, np.int64)
    for i, positions in enumerate(item_samples):
        for p in positions:
            g = int(group[p])
            f = int(first[g])
            if f >= 0:
                sets.union(f, i)
            else:
                first[g] = i
    comps: dict[int, list[int]] = defaultdict(list)
    for i in range(len(item_samples)):
        comps[sets.find(i)].append(i)
    return list(comps.values())


def assign_splits_with(
    spec: SplitSpec, items: Sequence[Item], samples_by_id: dict[str, Sample], seed: int
) -> list[Item]:
    plan = SplitPlan(spec)
    for item in items:
        plan.add(item)
    splits = plan.assign(samples_by_id.values(), seed)
    return [item.replace(split=split) for item, split in zip(items, splits, strict=True)]
