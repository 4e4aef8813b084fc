"""``visual_class``: SpineBench's hard negatives, the classes whose image library looks most
like the query image (SpineBench appendix B: 200 random images per disease, cosine similarity
of the query to every library image, the top different classes)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..records import Negatives, Sample
from .base import SAMPLERS, OptionRequest
from .visual_base import EmbeddingTable, choose_top

AGGREGATES = ("max", "mean", "topk")


@SAMPLERS.register("visual_class")
class VisualClassSampler:
    """Score each class by ``aggregate`` (max / mean / mean of the ``topk`` best) of the
    query's cosine similarity to that class's library of up to ``library_size`` images; the
    query itself is never in its own comparison. ``same_source`` / ``same_modality`` restrict
    the library to images of the query's source / modality."""

    name = "visual_class"
    needs_embeddings = True

    def __init__(
        self,
        library_size: int = 200,
        aggregate: str = "max",
        topk: int = 5,
        same_source: bool = False,
        same_modality: bool = False,
        seed: int = 0,
    ):
        if aggregate not in AGGREGATES:
            raise ValueError(f"unknown aggregate {aggregate!r}: use one of {', '.join(AGGREGATES)}")
        self.library_size, self.aggregate, self.topk = int(library_size), aggregate, int(topk)
        self.same_source, self.same_modality, self.seed = same_source, same_modality, seed
        self._table: EmbeddingTable | None = None

    def fit(
        self,
        samples: Sequence[Sample],
        embeddings: np.ndarray,
        labels: Sequence[str | None],
        rng: np.random.Generator | None = None,
    ) -> VisualClassSampler:
        """Index the samples (queries are looked up here) and draw each class's library."""
        rng = rng if rng is not None else np.random.default_rng(self.seed)
        table = EmbeddingTable.build(samples, embeddings, labels)
        rows_by_class: dict[str, list[int]] = {}
        for r, lab in enumerate(table.labels):
            rows_by_class.setdefault(lab, []).append(r)
        lib_rows: list[int] = []
        self._classes: list[str] = []
        self._bounds: list[tuple[int, int]] = []
        for lab in sorted(rows_by_class):
            rows = np.array(rows_by_class[lab])
            if len(rows) > self.library_size:
                rows = np.sort(rng.choice(rows, size=self.library_size, replace=False))
            self._classes.append(lab)
            self._bounds.append((len(lib_rows), len(lib_rows) + len(rows)))
            lib_rows.extend(int(r) for r in rows)
        self._lib_rows = np.array(lib_rows, dtype=np.int64)
        self._lib = table.embeddings[self._lib_rows] if lib_rows else table.embeddings[:0]
        self._table = table
        return self

    def class_scores(self, request: OptionRequest) -> dict[str, float]:
        """Aggregated similarity of the query to every class with library images left."""
        if self._table is None:
            raise RuntimeError("visual_class: call fit(samples, embeddings, labels) first")
        q, row = self._table.query(request)
        sims = self._lib @ q
        valid = np.ones(len(sims), dtype=bool)
        if row is not None:
            valid &= self._lib_rows != row
        mask = self._table.row_mask(request, self.same_source, self.same_modality)
        if mask is not None:
            valid &= mask[self._lib_rows]
        scores: dict[str, float] = {}
        for lab, (a, b) in zip(self._classes, self._bounds, strict=True):
            s = sims[a:b][valid[a:b]]
            if len(s) == 0:
                continue
            if self.aggregate == "max":
                scores[lab] = float(s.max())
            elif self.aggregate == "mean":
                scores[lab] = float(s.mean())
            else:
                k = min(self.topk, len(s))
                scores[lab] = float(np.partition(s, len(s) - k)[len(s) - k :].mean())
        return scores

    def sample(self, request: OptionRequest, rng: np.random.Generator) -> Negatives:
        return choose_top(self.name, request, self.class_scores(request), "visually ranked classes")
