"""Nearest-neighbour search over L2-normalised embeddings (inner product = cosine) with FAISS.

Exact ``IndexFlatIP`` up to ``ivf_threshold`` vectors; above it an IVF index whose recall is
checked against exact search on a sample of the data, raising ``nprobe`` until it reaches
``min_recall`` and falling back to exact search (with a warning) if it never does.
"""

from __future__ import annotations

import logging
import os

import numpy as np

log = logging.getLogger(__name__)


def set_faiss_threads(threads: int | None = None) -> int:
    import faiss

    n = int(threads or os.cpu_count() or 1)
    faiss.omp_set_num_threads(n)
    return n


def recall_at_k(approx_ids: np.ndarray, exact_ids: np.ndarray) -> float:
    """Mean fraction of each row's exact top-k ids that the approximate top-k found."""
    k = exact_ids.shape[1]
    hits = [len(set(a) & set(e)) / k for a, e in zip(approx_ids, exact_ids, strict=True)]
    return float(np.mean(hits)) if hits else 1.0


class EmbeddingIndex:
    """Batched top-k inner-product search; ``kind`` is ``auto``, ``flat`` or ``ivf``."""

    def __init__(
        self,
        vectors: np.ndarray,
        *,
        kind: str = "auto",
        ivf_threshold: int = 200_000,
        nlist: int | None = None,
        nprobe: int = 8,
        min_recall: float = 0.95,
        recall_sample: int = 256,
        recall_k: int = 10,
        threads: int | None = None,
        seed: int = 0,
    ):
        import faiss

        if kind not in ("auto", "flat", "ivf"):
            raise ValueError(f"unknown index kind {kind!r}: use auto, flat or ivf")
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if self.vectors.ndim != 2:
            raise ValueError(f"vectors must be 2-D, got shape {self.vectors.shape}")
        self.n, self.dim = self.vectors.shape
        self.threads = set_faiss_threads(threads)
        self.recall: float | None = None
        self.nprobe: int | None = None
        use_ivf = kind == "ivf" or (kind == "auto" and self.n > ivf_threshold)
        self._flat = faiss.IndexFlatIP(self.dim)
        self._flat.add(self.vectors)
        self.kind = "flat"
        self._index = self._flat
        if use_ivf and self.n >= 1000:
            self._build_ivf(nlist, nprobe, min_recall, recall_sample, recall_k, seed)

    def _build_ivf(self, nlist, nprobe, min_recall, recall_sample, recall_k, seed) -> None:
        import faiss

        nlist = int(nlist or max(16, min(65536, int(4 * np.sqrt(self.n)))))
        nlist = min(nlist, self.n // 39)
        rng = np.random.default_rng(seed)
        train_n = min(self.n, 64 * nlist)
        train = self.vectors[np.sort(rng.choice(self.n, size=train_n, replace=False))]
        quantizer = faiss.IndexFlatIP(self.dim)
        ivf = faiss.IndexIVFFlat(quantizer, self.dim, nlist, faiss.METRIC_INNER_PRODUCT)
        ivf.cp.seed = seed
        ivf.train(train)
        ivf.add(self.vectors)
        queries = self.vectors[rng.choice(self.n, size=min(recall_sample, self.n), replace=False)]
        k = min(recall_k, self.n)
        _, exact = self._flat.search(queries, k)
        probe = max(1, int(nprobe))
        while True:
            ivf.nprobe = probe
            _, approx = ivf.search(queries, k)
            recall = recall_at_k(approx, exact)
            if recall >= min_recall or probe >= nlist:
                break
            probe = min(nlist, probe * 2)
        self.recall, self.nprobe = recall, probe
        if recall >= min_recall:
            self.kind, self._index = "ivf", ivf
            self._flat = None  # type: ignore[assignment]  (free memory; search uses IVF)
            log.info("IVF%d index: nprobe %d, recall@%d %.3f", nlist, probe, k, recall)
        else:
            log.warning(
                "IVF%d recall@%d %.3f < %.2f even at nprobe %d; using exact search",
                nlist,
                k,
                recall,
                min_recall,
                probe,
            )

    def search(
        self, queries: np.ndarray, k: int, batch_size: int = 8192
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(scores, ids)`` of shape ``(len(queries), k)``, best first; ids -1 past the end."""
        queries = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        k = int(k)
        scores = np.empty((len(queries), k), dtype=np.float32)
        ids = np.empty((len(queries), k), dtype=np.int64)
        for s in range(0, len(queries), batch_size):
            scores[s : s + batch_size], ids[s : s + batch_size] = self._index.search(
                queries[s : s + batch_size], k
            )
        return scores, ids
