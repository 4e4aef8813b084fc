"""Duplicate groups within and across sources: exact content hash, perceptual hash (Hamming
threshold) and embedding near-duplicates (cosine threshold), joined transitively; one
representative per group is kept by a documented rule (docs/curation.md)."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..media.image import ImageProblem
from ..negatives.cache import file_sha256
from ..records import Sample
from .phash import is_image_file, near_pairs, phash_file
from .spec import DedupSpec

log = logging.getLogger(__name__)


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


class _UnionFind:
    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def content_key(sample: Sample, root: Path) -> str:
    """sha256 of the file; a frame or slice of a video/volume file adds its index."""
    key = file_sha256(root / sample.image)
    if not is_image_file(sample.image):
        if sample.frame is not None:
            key += f"#frame={sample.frame}"
        if sample.slice is not None:
            key += f"#slice={sample.slice.axis}:{sample.slice.index}"
    return key


def keep_order_key(sample: Sample, spec: DedupSpec):
    """Sort key of the keep rule: the smallest key is the representative.

    ``prefer_sources`` first (in their order), then for ``largest`` the most pixels and the
    most regions, and finally the smallest ``sample_id`` (so the choice is deterministic).
    """
    prio = (
        spec.prefer_sources.index(sample.source)
        if sample.source in spec.prefer_sources
        else len(spec.prefer_sources)
    )
    if spec.keep == "largest":
        return (prio, -(sample.width * sample.height), -len(sample.regions), sample.sample_id)
    return (prio, sample.sample_id)


MEMORY_MIB = 64  # the most unit vectors (float32) compared in memory; more are kept on disk
_READ_ROWS = 1024  # vectors read and normalised at a time


def _embedding_pairs(ids: list[str], embeddings: dict[str, np.ndarray], min_cosine: float):
    """``(a, b, cosine)`` for every pair among each embedded sample's 32 nearest with a
    cosine of at least ``min_cosine`` (a < b, indices into ``ids``), sorted.

    The unit vectors are gathered a block at a time; more than :data:`MEMORY_MIB` of them
    go to a :class:`~medvqa_build.row_file.RowFile` on disk (the index reads them from
    there), and the self-kNN pass hands its neighbour lists over a block at a time, so
    only the pairs found are kept."""
    from ..negatives.index import EmbeddingIndex
    from ..row_file import RowFile

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
    samples: Sequence[Sample],
    spec: DedupSpec,
    roots: dict[str, Path],
    embeddings: dict[str, np.ndarray] | None = None,
) -> tuple[list[DuplicateGroup], dict[str, int]]:
    """Duplicate groups (two or more members) and per-criterion counts of matched pairs."""
    ids = [s.sample_id for s in samples]
    uf = _UnionFind(len(samples))
    edges: list[tuple[int, int, str, float]] = []
    stats = {"exact_pairs": 0, "phash_pairs": 0, "embedding_pairs": 0, "unhashable": 0}
    if spec.exact:
        by_key: dict[str, list[int]] = defaultdict(list)
        for i, s in enumerate(samples):
            try:
                by_key[content_key(s, roots[s.source])].append(i)
            except OSError as exc:
                log.warning("cannot hash %s: %s", s.sample_id, exc)
                stats["unhashable"] += 1
        for members in by_key.values():
            for j in members[1:]:
                edges.append((members[0], j, "exact", 1.0))
                stats["exact_pairs"] += 1
    if spec.phash_max_hamming is not None:
        hashed, hashes = [], []
        for i, s in enumerate(samples):
            if not is_image_file(s.image):
                continue
            try:
                hashes.append(phash_file(roots[s.source] / s.image))
                hashed.append(i)
            except (ImageProblem, OSError) as exc:
                log.warning("cannot pHash %s: %s", s.sample_id, exc)
                stats["unhashable"] += 1
        for a, b, d in near_pairs(hashes, spec.phash_max_hamming):
            edges.append((hashed[a], hashed[b], "phash", float(d)))
            stats["phash_pairs"] += 1
    if spec.embed_min_cosine is not None and embeddings:
        for a, b, score in _embedding_pairs(ids, embeddings, spec.embed_min_cosine):
            edges.append((a, b, "embedding", score))
            stats["embedding_pairs"] += 1
    for a, b, _, _ in edges:
        uf.union(a, b)
    components: dict[int, list[int]] = defaultdict(list)
    for i in range(len(samples)):
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
        ordered = sorted(members, key=lambda i: keep_order_key(samples[i], spec))
        groups.append(
            DuplicateGroup("", ids[ordered[0]], [ids[i] for i in ordered], edges_by_root[root])
        )
    groups.sort(key=lambda g: g.representative)
    for n, g in enumerate(groups):
        g.group_id = f"dup-{n:05d}"
    return groups, stats
