"""Duplicate groups within and across sources: exact content hash, perceptual hash (Hamming
threshold) and embedding near-duplicates (cosine threshold), joined transitively; one
representative per group is kept by a documented rule (docs/curation.md)."""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..media.phash import near_pairs
from ..negatives.index import EmbeddingIndex
from ..records import Sample
from ..store.row_file import RowFile
from .facts import SampleFacts, content_key
from .spec import DedupSpec

__all__ = ["DuplicateGroup", "content_key", "duplicates_of", "find_duplicates"]


@dataclass
class DuplicateGroup:
    group_id: str
    representative: str
    members: list[str]  # every sample of the group, representative first
    edges: list[dict] = field(default_factory=list)  # {a, b, criterion, score}

    def to_dict(self) -> dict:
        return {
            "group": self.group_id,
            "representative": self.representative,
            "members": self.members,
            "edges": self.edges,
        }


class UnionFind:
    """Disjoint sets over ``0..n-1`` (8 bytes an element); a set's root is its smallest."""

    def __init__(self, n: int):
        self.parent = array("q", range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


MEMORY_MIB = 64  # the most unit vectors (float32) compared in memory; more are kept on disk
_READ_ROWS = 1024  # vectors read and normalised at a time


def _embedding_pairs(ids: Sequence[str], embeddings: dict[str, np.ndarray], min_cosine: float):
    """``(a, b, cosine)`` for every pair among each embedded sample's 32 nearest with a
    cosine of at least ``min_cosine`` (a < b, indices into ``ids``), sorted.

    The unit vectors are gathered a block at a time; more than :data:`MEMORY_MIB` of them
    go to a :class:`~medvqa_build.row_file.RowFile` on disk (the index reads them from
    there), and the self-kNN pass hands its neighbour lists over a block at a time, so
    only the pairs found are kept."""
    present = np.array([i for i, sid in enumerate(ids) if sid in embeddings], dtype=np.int64)
    n = len(present)
    if n < 2:
        return []
    dim = int(np.asarray(embeddings[ids[present[0]]]).shape[-1])
    spill = n * dim * 4 > MEMORY_MIB * 2**20
    vectors = RowFile(n, dim, np.float32) if spill else np.empty((n, dim), np.float32)
    for a in range(0, n, _READ_ROWS):
        block = np.stack(
            [np.asarray(embeddings[ids[i]], np.float32) for i in present[a : a + _READ_ROWS]]
        )
        block /= np.maximum(np.linalg.norm(block, axis=1, keepdims=True), 1e-12)
        if spill:
            vectors.write(a, block)
        else:
            vectors[a : a + len(block)] = block
    index = EmbeddingIndex(vectors)
    k = min(n, 32)
    pairs: list[tuple[int, int, float]] = []

    def keep(rows: np.ndarray, scores: np.ndarray, nn: np.ndarray) -> None:
        found = []
        for qi, row_s, row_i in zip(rows.tolist(), scores, nn, strict=True):
            for s, j in zip(row_s, row_i.tolist(), strict=True):
                if j > qi and s >= min_cosine:
                    found.append((int(present[qi]), int(present[j]), round(float(s), 4)))
        pairs.extend(found)  # one call per block: safe from the index's worker threads

    index.search_self(k, sink=keep)
    return sorted(pairs)


def find_duplicates(
    samples: Iterable[Sample],
    spec: DedupSpec,
    roots: dict[str, Path],
    embeddings: dict[str, np.ndarray] | None = None,
) -> tuple[list[DuplicateGroup], dict[str, int]]:
    """Duplicate groups (two or more members) and per-criterion counts of matched pairs."""
    return duplicates_of(SampleFacts.collect(samples, spec, roots), spec, embeddings)


def duplicates_of(
    facts: SampleFacts, spec: DedupSpec, embeddings: dict[str, np.ndarray] | None = None
) -> tuple[list[DuplicateGroup], dict[str, int]]:
    """:func:`find_duplicates` over facts gathered with this ``spec``."""
    ids = facts.ids
    edges: list[tuple[int, int, str, float]] = []
    stats = {"exact_pairs": 0, "phash_pairs": 0, "embedding_pairs": 0, "unhashable": 0}
    stats["unhashable"] = facts.unhashable
    if spec.exact:
        for members in facts.exact_groups():
            first = int(members[0])
            edges += [(first, int(j), "exact", 1.0) for j in members[1:]]
            stats["exact_pairs"] += len(members) - 1
    if spec.phash_max_hamming is not None:
        rows = facts.phash_rows
        for a, b, d in near_pairs(facts.phashes, spec.phash_max_hamming):
            edges.append((rows[a], rows[b], "phash", float(d)))
            stats["phash_pairs"] += 1
    if spec.embed_min_cosine is not None and embeddings:
        for a, b, score in _embedding_pairs(ids, embeddings, spec.embed_min_cosine):
            edges.append((a, b, "embedding", score))
            stats["embedding_pairs"] += 1
    uf = UnionFind(len(facts))
    for a, b, _, _ in edges:
        uf.union(a, b)
    # only samples on an edge share a group with another: the rest are single
    components: dict[int, list[int]] = defaultdict(list)
    for i in sorted({v for a, b, _, _ in edges for v in (a, b)}):
        components[uf.find(i)].append(i)
    edges_by_root: dict[int, list[dict]] = defaultdict(list)
    for a, b, crit, score in sorted(edges, key=lambda e: (ids[e[0]], ids[e[1]], e[2])):
        edges_by_root[uf.find(a)].append(
            {"a": ids[a], "b": ids[b], "criterion": crit, "score": score}
        )
    groups = []
    for root, members in components.items():
        if len(members) < 2:
            continue
        ordered = sorted(members, key=lambda i: facts.keep_key(i, spec))
        groups.append(
            DuplicateGroup("", ids[ordered[0]], [ids[i] for i in ordered], edges_by_root[root])
        )
    groups.sort(key=lambda g: g.representative)
    for n, g in enumerate(groups):
        g.group_id = f"dup-{n:05d}"
    return groups, stats
