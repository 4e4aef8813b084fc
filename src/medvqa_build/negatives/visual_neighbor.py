"""``visual_neighbor``: the labels of the query's nearest images that carry another label,
scored by the similarity of the nearest image of each label."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..records import Negatives, Sample
from .base import SAMPLERS, OptionRequest
from .index import EmbeddingIndex
from .visual_base import EmbeddingTable, allowed_classes, choose_top


@SAMPLERS.register("visual_neighbor")
class VisualNeighborSampler:
    """Walk the query's ``k`` nearest fitted images (more when too few labels turn up),
    skipping itself and, with ``exclude_same_group``, images of its own patient/video."""

    name = "visual_neighbor"
    needs_embeddings = True

    def __init__(
        self,
        k: int = 64,
        same_source: bool = False,
        same_modality: bool = False,
        exclude_same_group: bool = True,
        index: Mapping[str, Any] | None = None,
    ):
        self.k = int(k)
        self.same_source, self.same_modality = same_source, same_modality
        self.exclude_same_group = exclude_same_group
        self.index_params = dict(index or {})
        self._table: EmbeddingTable | None = None

    def fit(
        self,
        samples: Sequence[Sample],
        embeddings: np.ndarray,
        labels: Sequence[str | None],
        rng: np.random.Generator | None = None,
    ) -> VisualNeighborSampler:
        """Index the samples and run one batched search for all of them."""
        self._table = EmbeddingTable.build(samples, embeddings, labels)
        self._index = EmbeddingIndex(self._table.embeddings, **self.index_params)
        labels = np.array(self._table.labels, dtype=object)
        self._rows_of_label = {lab: np.flatnonzero(labels == lab) for lab in set(labels)}
        k = min(self.k + 1, len(self._table.sample_ids))
        self._pre_scores, self._pre_ids = self._index.search(self._table.embeddings, k)
        return self

    def _fitted(self) -> EmbeddingTable:
        if self._table is None:
            raise RuntimeError("visual_neighbor: call fit(samples, embeddings, labels) first")
        return self._table

    def _neighbours(self, q: np.ndarray, row: int | None, k: int):
        if row is not None and k <= self._pre_ids.shape[1]:
            return self._pre_scores[row], self._pre_ids[row]
        s, i = self._index.search(q[None, :], k)
        return s[0], i[0]

    def class_scores(self, request: OptionRequest, need: int) -> dict[str, float]:
        """Best similarity per label among the nearest images, widening the search until
        ``need`` allowed labels are found or every image has been seen."""
        t = self._fitted()
        q, row = t.query(request)
        mask = t.row_mask(request, self.same_source, self.same_modality)
        group = request.sample.group_id if request.sample is not None else ""
        allowed = set(allowed_classes(request, sorted(set(t.labels))))
        n, k = len(t.sample_ids), min(self.k + 1, len(t.sample_ids))
        while True:
            scores: dict[str, float] = {}
            sims, ids = self._neighbours(q, row, k)
            for s, i in zip(sims, ids, strict=True):
                if i < 0 or i == row or (mask is not None and not mask[i]):
                    continue
                if self.exclude_same_group and group and t.groups[i] == group:
                    continue
                lab = t.labels[i]
                if lab not in scores:
                    scores[lab] = float(s)
            if sum(lab in allowed for lab in scores) >= need or k >= n:
                return scores
            k = min(n, k * 4)

    def sample(self, request: OptionRequest, rng: np.random.Generator) -> Negatives:
        scores = self.class_scores(request, request.distractors_needed())
        table = self._fitted()
        q, row = table.query(request)
        for m in request.mandatory_distractors():
            rows = self._rows_of_label.get(m, np.empty(0, dtype=np.int64))
            rows = rows[rows != row]
            if m not in scores and len(rows):  # score a mandatory option by its nearest image
                scores[m] = float((table.embeddings[rows] @ q).max())
        return choose_top(self.name, request, scores, "labels among the nearest images")
