"""Group-aware, stratified splits of items.

Items that share a group (``group_id`` of any of their samples: patient, video, case) form
one unit that goes to one split as a whole, so no patient is on both sides. Units are placed
largest first (seeded order among equal sizes) into the split whose stratum counts (task,
label, ...) are furthest below their targets, so each stratum follows the proportions as far
as the group sizes allow. A source's official split is kept when ``use_official`` is set.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from ..records import Item, Sample
from ..rng import rng_for
from .spec import SplitSpec


def _stratum(item: Item, keys: Sequence[str]) -> tuple:
    values = {"task": item.task, "label": item.gt, "source": item.source, "scene": item.scene or ""}
    return tuple(values[k] for k in keys)


def item_groups(item: Item, samples_by_id: dict[str, Sample], by: str = "group_id") -> list[str]:
    """The groups an item belongs to; a sample without ``group_id`` is its own group."""
    out = []
    for sid in item.sample_ids:
        sample = samples_by_id.get(sid)
        group = sample.group_id if (sample is not None and by == "group_id") else ""
        out.append(f"{sample.source}:{group}" if group and sample is not None else f"sample:{sid}")
    return out or [f"item:{item.item_id}"]


def _units(items: Sequence[Item], samples_by_id, by: str) -> list[list[int]]:
    """Indices of items joined through shared groups (connected components)."""
    parent = list(range(len(items)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}
    for i, item in enumerate(items):
        for g in item_groups(item, samples_by_id, by):
            if g in first:
                a, b = find(first[g]), find(i)
                parent[max(a, b)] = min(a, b)
            else:
                first[g] = i
    comps: dict[int, list[int]] = defaultdict(list)
    for i in range(len(items)):
        comps[find(i)].append(i)
    return list(comps.values())


def _official(item: Item, samples_by_id, mapping: dict[str, str]) -> str | None:
    splits = {samples_by_id[s].split for s in item.sample_ids if s in samples_by_id}
    splits.discard(None)
    if len(splits) != 1:
        return None
    name = splits.pop()
    return mapping.get(name, name)


def assign_splits_with(
    spec: SplitSpec, items: Sequence[Item], samples_by_id: dict[str, Sample], seed: int
) -> list[Item]:
    names = sorted(spec.proportions, key=lambda n: (-spec.proportions[n], n))
    totals = Counter(_stratum(i, spec.stratify) for i in items)
    target = {n: {k: spec.proportions[n] * c for k, c in totals.items()} for n in names}
    have = {n: Counter() for n in names}
    size = Counter()
    result: dict[int, str] = {}
    units = _units(items, samples_by_id, spec.by)
    free_units = []
    for unit in units:
        official = (
            [_official(items[i], samples_by_id, spec.official_map) for i in unit]
            if spec.use_official
            else []
        )
        known = {o for o in official if o is not None}
        if known:
            # one official split: the whole unit follows it; several (the source leaks a group):
            # each item keeps its own, and the split-leak rule reports it
            only = next(iter(known)) if len(known) == 1 else None
            for i, o in zip(unit, official, strict=True):
                result[i] = only or o or names[0]
                have.setdefault(result[i], Counter())[_stratum(items[i], spec.stratify)] += 1
                size[result[i]] += 1
        else:
            free_units.append(unit)
    order = rng_for(seed, "split").permutation(len(free_units))
    free_units = sorted((free_units[i] for i in order), key=len, reverse=True)  # stable sort
    n_items = len(items)
    for unit in free_units:
        counts = Counter(_stratum(items[i], spec.stratify) for i in unit)

        def need(n: str, counts=counts) -> float:
            strata = sum(c * (target[n][k] - have[n][k]) / totals[k] for k, c in counts.items())
            overall = (spec.proportions[n] * n_items - size[n]) / max(n_items, 1)
            return strata / sum(counts.values()) + overall

        best = max(names, key=need)  # max keeps the first on ties: larger splits first
        for i in unit:
            result[i] = best
        have[best].update(counts)
        size[best] += len(unit)
    return [item.replace(split=result[i]) for i, item in enumerate(items)]
