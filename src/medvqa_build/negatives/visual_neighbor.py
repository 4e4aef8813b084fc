"""``visual_neighbor``: the labels of the query's nearest images that carry another label,
scored by the similarity of the nearest image of each label.

Fitting indexes every labelled pool vector and runs one batched self-kNN pass. A pool whose
unit vectors take more than ``memory_mib`` is kept on disk instead (:class:`RowFile`: the
vectors, in the index's cell order, and each image's precomputed neighbour list), read a
block at a time while fitting and a row at a time per query, so a 10^6-image pool does not
hold ~3 GiB. Scores are the same either way, bit for bit.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..records import Negatives, Sample
from ..store.row_file import RowFile
from .base import SAMPLERS, OptionRequest
from .embedder import l2_normalise
from .index import EmbeddingIndex
from .visual_base import (
    Balance,
    PoolTable,
    allowed_classes,
    choose_top,
    draw_per_class,
    normalise_rows,
    per_class_cap,
    unfitted_query,
)

_READ_ROWS = 1024  # pool rows read, normalised and written at a time (2 MiB at 512-d)


@SAMPLERS.register("visual_neighbor")
class VisualNeighborSampler:
    """Walk the query's ``k`` nearest fitted images (more when too few labels turn up),
    skipping itself and, with ``exclude_same_group``, images of its own patient/video.

    ``memory_mib``: the largest pool (its unit vectors, float32) kept in memory; a larger one
    is kept on disk in ``spill_dir`` (default: the system's temporary folder, ``TMPDIR``).

    ``balance_frequency`` (true), ``breadth`` (2.0), ``hardness`` (1.0): with the task's
    ledger, the distractors come from the ``breadth x need`` nearest labels, those owed
    showings first (:class:`~medvqa_build.negatives.visual_base.Balance`).

    ``pool_per_class``: the images of each label a build embeds into the pool (a seeded draw,
    besides the task's candidates), 1000 by default; ``"all"`` embeds every labelled image.
    """

    name = "visual_neighbor"
    needs_embeddings = True
    reads_rows = True  # fit reads the pool's rows a block at a time
    pool_cap_param = "pool_per_class"  # the per-class cap the build report states

    def __init__(
        self,
        *,
        k: int = 64,
        same_source: bool = False,
        same_modality: bool = False,
        exclude_same_group: bool = True,
        index: Mapping[str, Any] | None = None,
        memory_mib: float = 64,
        spill_dir: str | os.PathLike | None = None,
        balance_frequency: bool = True,
        breadth: float = 2.0,
        hardness: float = 1.0,
        pool_per_class: int | str = 1000,
        embed_candidates: int | str | None = None,
    ):
        # how many of the task's candidates a build embeds (stages/embed_demand.py)
        self.embed_candidates = (
            None
            if embed_candidates is None
            else (per_class_cap(embed_candidates, "embed_candidates") or "all")
        )
        self.k = int(k)
        self.pool_per_class = per_class_cap(pool_per_class, "pool_per_class")
        self.same_source, self.same_modality = same_source, same_modality
        self.exclude_same_group = exclude_same_group
        self.index_params = dict(index or {})
        self.memory_mib, self.spill_dir = float(memory_mib), spill_dir
        self.balance = Balance.of(balance_frequency, breadth, hardness)
        self._table: PoolTable | None = None

    def fit(
        self,
        samples: Sequence[Sample],
        embeddings: np.ndarray,
        labels: Sequence[str | None],
        rng: np.random.Generator | None = None,
    ) -> VisualNeighborSampler:
        """Index the labelled samples and run one batched search for all of them.

        ``embeddings`` is an array or anything indexed like one by an array of row numbers
        (generate passes rows read from the embed stage's file on demand)."""
        if not (len(samples) == len(embeddings) == len(labels)):
            raise ValueError(
                f"fit needs aligned inputs: {len(samples)} samples, {len(embeddings)} "
                f"embeddings, {len(labels)} labels"
            )
        table = PoolTable.build(samples, labels)
        n, width = len(table), _width(embeddings)
        self.spilled = n * width * 4 > self.memory_mib * 2**20
        vectors = _unit_rows(embeddings, table.keep, width, self.spilled, self.spill_dir)
        self._index = EmbeddingIndex(vectors, **self.index_params)
        self._rows_of_label: dict[int, np.ndarray] = {}
        k = min(self.k + 1, n)
        if self.spilled:
            self._pre_scores = RowFile(n, k, np.float32, dir=self.spill_dir)
            self._pre_ids = RowFile(n, k, np.int64, dir=self.spill_dir)

            def keep(rows, scores, ids):
                self._pre_scores.write_rows(rows, scores)
                self._pre_ids.write_rows(rows, ids)

            self._index.search_self(k, sink=keep)
        else:
            self._pre_scores, self._pre_ids = self._index.search_self(k)
        self._table = table
        return self

    def embed_demand(self, labels: Sequence[str | None], rng: np.random.Generator) -> np.ndarray:
        """The pool indices a build embeds for the pool: ``pool_per_class`` of each label,
        drawn with ``rng`` (the fit then indexes what was embedded)."""
        keep = [i for i, lab in enumerate(labels) if lab]
        drawn = draw_per_class(labels, keep, self.pool_per_class, rng)
        return np.array([keep[r] for _, rows in drawn for r in rows], dtype=np.int64)

    def _fitted(self) -> PoolTable:
        if self._table is None:
            raise RuntimeError("visual_neighbor: call fit(samples, embeddings, labels) first")
        return self._table

    def _query(self, request: OptionRequest) -> tuple[np.ndarray, int | None]:
        """The unit query vector and the query's table row (``None`` when not fitted on it)."""
        t = self._fitted()
        row = t.row(request.sample.sample_id) if request.sample is not None else None
        if request.embedding is not None:
            return l2_normalise(np.asarray(request.embedding, dtype=np.float32)), row
        if row is None:
            raise unfitted_query(request)
        return self._index.vectors_of(row), row

    def _neighbours(self, q: np.ndarray, row: int | None, k: int):
        if row is not None and k <= self._pre_ids.shape[1]:
            return self._pre_scores[row], self._pre_ids[row]
        s, i = self._index.search(q[None, :], k)
        return s[0], i[0]

    def class_scores(self, request: OptionRequest, need: int) -> dict[str, float]:
        """Best similarity per label among the nearest images, widening the search until
        ``need`` allowed labels are found or every image has been seen."""
        t = self._fitted()
        q, row = self._query(request)
        checks = []  # (codes per table row, the query's code, must equal)
        if request.sample is not None and self.same_source:
            checks.append((t.sources, t.name_code(request.sample.source), True))
        if request.sample is not None and self.same_modality:
            checks.append((t.modalities, t.name_code(request.sample.modality), True))
        group = request.sample.group_id if request.sample is not None else ""
        if self.exclude_same_group and group:
            checks.append((t.groups, t.group_code(group), False))
        allowed = set(allowed_classes(request, t.label_names))
        n, k = len(t), min(self.k + 1, len(t))
        while True:
            sims, ids = self._neighbours(q, row, k)
            ok = ids >= 0
            if row is not None:
                ok &= ids != row
            at = np.where(ok, ids, 0)
            for codes, code, equal in checks:
                ok &= (codes[at] == code) == equal
            labs, sims = t.labels[ids[ok]], sims[ok]
            first = np.sort(np.unique(labs, return_index=True)[1])  # each label's nearest
            scores = {t.label_names[labs[j]]: float(sims[j]) for j in first.tolist()}
            if sum(lab in allowed for lab in scores) >= need or k >= n:
                return scores
            k = min(n, k * 4)

    def sample(self, request: OptionRequest, rng: np.random.Generator) -> Negatives:
        need = request.distractors_needed()
        want = self.balance.window(need) if self.balance and request.ledger else need
        scores = self.class_scores(request, want)
        t = self._fitted()
        q, row = self._query(request)
        for m in request.mandatory_distractors():
            if m in scores or (code := t.label_code(m)) < 0:
                continue
            rows = self._rows_of_label.get(code)
            if rows is None:
                rows = self._rows_of_label[code] = np.flatnonzero(t.labels == code)
            rows = rows[rows != row]
            if len(rows):  # score a mandatory option by its nearest image
                scores[m] = self._best_similarity(rows, q)
        return choose_top(
            self.name, request, scores, "labels among the nearest images", self.balance
        )

    def _best_similarity(self, rows: np.ndarray, q: np.ndarray) -> float:
        step = _READ_ROWS if self.spilled else max(1, len(rows))  # in memory: one product
        return max(
            float((self._index.vectors_of(rows[a : a + step]) @ q).max())
            for a in range(0, len(rows), step)
        )


def _width(embeddings) -> int:
    shape = getattr(embeddings, "shape", None)
    if shape is not None and len(shape) == 2:
        return int(shape[1])
    return int(np.asarray(embeddings[0]).shape[-1]) if len(embeddings) else 0


def _unit_rows(embeddings, keep: np.ndarray, width: int, spill: bool, spill_dir):
    """The unit vectors of rows ``keep`` of ``embeddings``: an array, or with ``spill`` a
    :class:`RowFile`, filled a block of rows at a time (each row normalised on its own, so
    the values do not depend on the blocks)."""
    n = len(keep)
    if not spill and isinstance(embeddings, np.ndarray):
        rows = embeddings if n == len(embeddings) else embeddings[keep]  # no copy if all
        return normalise_rows(np.asarray(rows, dtype=np.float32))
    out = (
        RowFile(n, width, np.float32, dir=spill_dir) if spill else np.empty((n, width), np.float32)
    )
    for a in range(0, n, _READ_ROWS):
        block = normalise_rows(np.asarray(embeddings[keep[a : a + _READ_ROWS]], dtype=np.float32))
        if spill:
            out.write(a, block)
        else:
            out[a : a + len(block)] = block
    return out
