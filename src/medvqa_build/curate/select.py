"""Representative subsets: k-center greedy over image embeddings, balanced over labels.

Quotas are shared out over labels by water-filling (each label gets an equal share, labels
with fewer samples pass what they cannot use to the others), capped by ``per_label``; within
a label, k-center greedy picks the sample nearest the label's mean first and then, again and
again, the sample farthest (in cosine distance) from everything already picked, as EndoBench
did to keep representative, non-redundant images.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np

from ..records import Sample
from ..rng import rng_for
from .facts import SampleFacts, label_key  # noqa: F401  (label_key: its home before facts)
from .spec import SelectSpec


def water_fill(available: dict[str, int], total: int | None, cap: int | None) -> dict[str, int]:
    """Per-label quotas: as equal as the counts allow, summing to ``total`` (or all)."""
    limits = {k: min(n, cap) if cap is not None else n for k, n in available.items()}
    if total is None or total >= sum(limits.values()):
        return limits
    quota = dict.fromkeys(limits, 0)
    left, open_labels = total, sorted(limits)
    while left > 0 and open_labels:
        share = max(1, left // len(open_labels))
        for k in list(open_labels):
            if left == 0:
                break
            add = min(share, limits[k] - quota[k], left)
            quota[k] += add
            left -= add
            if quota[k] >= limits[k]:
                open_labels.remove(k)
    return quota


_NORM_ROWS = 1024


def kcenter_greedy(vectors: np.ndarray, k: int, *, overwrite: bool = False) -> list[int]:
    """Indices of ``k`` rows picked by k-center greedy (cosine distance), first = nearest mean.
    ``overwrite``: normalise ``vectors`` (float) in place instead of in a copy, so a label's
    vectors are held once, not twice."""
    n = len(vectors)
    if k >= n:
        return list(range(n))
    # by blocks of rows: norm squares its input into a temporary of the input's size
    norms = np.concatenate(
        [np.linalg.norm(vectors[i : i + _NORM_ROWS], axis=1) for i in range(0, n, _NORM_ROWS)]
    )
    norms = np.maximum(norms, 1e-12)[:, None]
    in_place = overwrite and vectors.flags.writeable and vectors.dtype.kind == "f"
    v = np.divide(vectors, norms, out=vectors) if in_place else vectors / norms
    mean = v.mean(axis=0)
    first = int(np.argmax(v @ mean))
    picked = [first]
    dist = 1.0 - v @ v[first]
    dist[first] = -np.inf
    while len(picked) < k:
        nxt = int(np.argmax(dist))  # argmax takes the lowest index on ties: deterministic
        picked.append(nxt)
        dist = np.minimum(dist, 1.0 - v @ v[nxt])
        dist[picked] = -np.inf
    return picked


def select_samples(
    samples: Sequence[Sample],
    spec: SelectSpec,
    embeddings: dict[str, np.ndarray] | None,
    seed: int,
) -> tuple[list[Sample], dict]:
    """The selected samples (input order kept) and a report per label."""
    samples = list(samples)
    facts = SampleFacts.collect(samples, None, {})
    chosen, report = select_rows(facts, range(len(samples)), spec, embeddings, seed)
    return [s for i, s in enumerate(samples) if i in chosen], report


def select_rows(
    facts: SampleFacts,
    rows: Iterable[int],
    spec: SelectSpec,
    embeddings: dict[str, np.ndarray] | None,
    seed: int,
) -> tuple[set[int], dict]:
    """The selected ``rows`` of ``facts`` and a report per label (one label's vectors are
    in memory at a time: k-center compares each candidate with every pick)."""
    by_label: dict[str, list[int]] = defaultdict(list)
    for i in rows:
        by_label[facts.label_names[facts.labels[i]]].append(i)
    quotas = water_fill({k: len(v) for k, v in by_label.items()}, spec.total, spec.per_label)
    chosen: set[int] = set()
    per_label = {}
    ids = facts.ids
    for label in sorted(by_label):
        group = sorted(by_label[label], key=lambda i: ids[i])
        k = quotas[label]
        if embeddings and all(ids[i] in embeddings for i in group):
            vectors = _label_vectors(embeddings, ids, group)
            picked, method = kcenter_greedy(vectors, k, overwrite=True), "kcenter"
            del vectors
        else:
            # frames and slices are not embedded: a seeded random subset stands in
            picked = sorted(rng_for(seed, "select", label).permutation(len(group))[:k].tolist())
            method = "random (no embeddings)"
        chosen.update(group[i] for i in picked)
        per_label[label] = {"available": len(group), "selected": len(picked), "method": method}
    return chosen, {"per_label": per_label, "selected": len(chosen)}


def _label_vectors(embeddings, ids, group: list[int]) -> np.ndarray:
    """The group's vectors as one float32 matrix, filled row by row: never a list of row
    arrays beside the matrix (that list alone is the matrix's size again)."""
    first = np.asarray(embeddings[ids[group[0]]])
    out = np.empty((len(group), *first.shape), np.float32)
    out[0] = first
    for row, i in enumerate(group[1:], 1):
        out[row] = embeddings[ids[i]]
    return out
