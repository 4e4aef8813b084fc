"""Nearest-neighbour search over L2-normalised embeddings (inner product = cosine).

Both kinds compare queries with vectors in large matrix products (numpy BLAS) and keep the
best ``k`` per query in FAISS's k-best heaps (C++, OpenMP), which is several times faster on
CPUs than ``IndexFlatIP``/``IndexIVFFlat`` scans.

- ``flat``: exact, every query against every vector.
- ``ivf``: spherical k-means cells trained on a subsample (``faiss.Kmeans``); every vector
  lives in its nearest cell. Queries are grouped by their nearest cell and each group is
  compared, in one product, with the vectors of the union of its members' ``nprobe`` nearest
  cells: a superset of what per-query probing scans, so recall can only be higher.
  ``nprobe`` is chosen at build time from recall measured against exact search on a sample of
  the vectors (no trial searches: a neighbour is found exactly when its cell is probed), once
  for outside queries (``nprobe``: each query's own probes, the query itself left out) and
  once for the self-kNN pass (``self_nprobe``: the whole group's probes). If no ``nprobe`` up to
  ``max_nprobe`` reaches ``min_recall``, search stays exact (with a warning).

``search_self(k)`` (or ``search`` with the indexed array itself) is the all-vectors self-kNN;
with a ``sink`` its results are handed over a block of rows at a time instead of being
returned as two ``(n, k)`` arrays.

The vectors may be a :class:`~medvqa_build.row_file.RowFile` instead of an array: then they
are read from disk a block at a time and an IVF index rewrites them in cell order, so a
probed cell is one contiguous read. Results are those of the same vectors in memory, bit for
bit (the same rows meet in the same matrix products).
Defaults: IVF above 20k vectors, ``nlist`` = 2·√n cells, k-means on 32 points per cell for 8
iterations, ``min_recall`` 0.99 on 512 sampled vectors. Blocks run in ``threads`` worker
threads, each with single-threaded BLAS (via threadpoolctl when installed) and heaps.
Results do not depend on the thread count (tested bit for bit).
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..store.row_file import RowFile

log = logging.getLogger(__name__)

_BLOCK_Q = 512  # query rows per matrix product
_BLOCK_X = 8192  # indexed rows per matrix product (flat): 512 x 8192 float32 = 16 MiB


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


class _TopK:
    """The ``k`` largest scores per row, fed block by block (a FAISS min-heap array).

    Single-threaded when called from the pool's workers (their OpenMP thread count is 1)."""

    def __init__(self, nq: int, k: int):
        import faiss

        # All entries at the heap's neutral value form a valid heap: no heapify call needed.
        self.scores = np.full((nq, k), np.finfo(np.float32).min, dtype=np.float32)
        self.ids = np.full((nq, k), -1, dtype=np.int64)
        self._heap = h = faiss.float_minheap_array_t()
        h.nh, h.k = nq, k
        h.val, h.ids = faiss.swig_ptr(self.scores), faiss.swig_ptr(self.ids)

    def add(self, sims: np.ndarray, row0: int, ids: np.ndarray | int) -> None:
        """Rows ``row0 ..`` get the columns of ``sims``; column j has id ``ids[j]`` (an array)
        or ``ids + j`` (an int)."""
        import faiss

        sims = np.ascontiguousarray(sims, dtype=np.float32)
        nq, nj = sims.shape
        if isinstance(ids, np.ndarray):
            ids = np.ascontiguousarray(ids, dtype=np.int64)
            self._heap.addn_with_ids(nj, faiss.swig_ptr(sims), faiss.swig_ptr(ids), 0, row0, nq)
        else:
            self._heap.addn(nj, faiss.swig_ptr(sims), int(ids), row0, nq)

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        self._heap.reorder()  # best first
        return self.scores, self.ids


def _worker_init() -> None:
    import faiss

    faiss.omp_set_num_threads(1)  # per calling thread: the heaps run serially in each worker


_BLAS: list = []  # a threadpoolctl controller, found once


def _run(fn, items, threads: int) -> None:
    """``fn(item)`` for every item; with several items and threads, in worker threads with
    single-threaded BLAS and heaps, so each block is one thread's work and there is no
    fork/join barrier per small product (which costs much on a loaded machine). Without
    threadpoolctl, BLAS keeps its own threads and the blocks run in the calling thread."""
    items = list(items)
    if threads > 1 and len(items) > 1 and not _BLAS:
        try:
            from threadpoolctl import ThreadpoolController

            _BLAS.append(ThreadpoolController())
        except ImportError:
            _BLAS.append(None)
    if threads <= 1 or len(items) <= 1 or _BLAS[0] is None:
        for item in items:
            fn(item)
        return
    with (
        _BLAS[0].limit(limits=1, user_api="blas"),
        ThreadPoolExecutor(min(threads, len(items)), initializer=_worker_init) as ex,
    ):
        for _ in ex.map(fn, items):
            pass


Sink = "Callable[[np.ndarray, np.ndarray, np.ndarray], None]"  # (rows, scores, ids) per block


def exact_knn(
    queries: np.ndarray | RowFile,
    vectors: np.ndarray | RowFile,
    k: int,
    threads: int | None = None,
    sink: Sink | None = None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """Exact top-``k`` inner products, ``(scores, ids)`` best first, ids -1 past the end;
    with ``sink``, each block of query rows goes to ``sink(rows, scores, ids)`` (from worker
    threads, rows never overlapping) and nothing is returned."""
    if sink is None:
        scores = np.empty((len(queries), k), dtype=np.float32)
        ids = np.empty((len(queries), k), dtype=np.int64)

    threads = int(threads or os.cpu_count() or 1)
    rows = max(1, min(_BLOCK_Q, -(-len(queries) // threads)))  # every thread gets a block

    def block(s: int) -> None:
        q = queries[s : s + rows]
        top = _TopK(len(q), k)
        for j in range(0, len(vectors), _BLOCK_X):
            top.add(q @ vectors[j : j + _BLOCK_X].T, 0, j)
        if sink is None:
            scores[s : s + len(q)], ids[s : s + len(q)] = top.result()
        else:
            sink(np.arange(s, s + len(q)), *top.result())

    _run(block, range(0, len(queries), rows), threads)
    return None if sink is not None else (scores, ids)


class EmbeddingIndex:
    """Batched top-k inner-product search; ``kind`` is ``auto``, ``flat`` or ``ivf``
    (``auto``: IVF above ``ivf_threshold`` vectors)."""

    def __init__(
        self,
        vectors: np.ndarray | RowFile,
        *,
        kind: str = "auto",
        ivf_threshold: int = 20_000,
        nlist: int | None = None,
        nprobe: int = 1,
        max_nprobe: int = 64,
        min_recall: float = 0.99,
        recall_sample: int = 512,
        recall_k: int = 10,
        train_per_centroid: int = 32,
        kmeans_iters: int = 8,
        threads: int | None = None,
        seed: int = 0,
    ):
        if kind not in ("auto", "flat", "ivf"):
            raise ValueError(f"unknown index kind {kind!r}: use auto, flat or ivf")
        if isinstance(vectors, RowFile):
            if vectors.dtype != np.float32:
                raise ValueError(f"a RowFile of vectors must be float32, got {vectors.dtype}")
            self.vectors: np.ndarray | RowFile = vectors
        else:
            self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self._cell_ordered = False  # a RowFile rewritten in cell order (ivf)
        self._position: np.ndarray | None = None  # row -> place in that file, made when needed
        if self.vectors.ndim != 2:
            raise ValueError(f"vectors must be 2-D, got shape {self.vectors.shape}")
        self.n, self.dim = self.vectors.shape
        self.threads = set_faiss_threads(threads)
        self.kind = "flat"
        self.recall: float | None = None  # sampled recall@k of outside queries (ivf)
        self.self_recall: float | None = None  # sampled recall@k of the self-kNN pass (ivf)
        self.nprobe: int | None = None
        self.self_nprobe: int | None = None
        self.nlist: int | None = None
        self.build_seconds: dict[str, float] = {}  # ivf: train, assign, recall check
        use_ivf = kind == "ivf" or (kind == "auto" and self.n > ivf_threshold)
        if use_ivf and self.n >= 1000:
            self._build_ivf(
                nlist=nlist,
                nprobe=nprobe,
                max_nprobe=max_nprobe,
                min_recall=min_recall,
                recall_sample=recall_sample,
                recall_k=recall_k,
                train_per_centroid=train_per_centroid,
                kmeans_iters=kmeans_iters,
                seed=seed,
            )

    # -- build ----------------------------------------------------------------------------------

    def _build_ivf(
        self,
        *,
        nlist,
        nprobe,
        max_nprobe,
        min_recall,
        recall_sample,
        recall_k,
        train_per_centroid,
        kmeans_iters,
        seed,
    ) -> None:
        rng = np.random.default_rng(seed)
        nlist = self._train_ivf(nlist, train_per_centroid, kmeans_iters, seed, rng)
        k = min(int(recall_k), self.n - 1)
        cap = min(nlist, max(int(max_nprobe), int(nprobe), 1))
        first = max(1, min(int(nprobe), cap))
        probe = self._smallest_nprobe(rng, recall_sample, k, first, cap, min_recall)
        if probe.p_out is None or probe.p_self is None:
            log.warning(
                "IVF%d recall@%d %.3f (self-kNN %.3f) < %.2f even at nprobe %d; using exact search",
                nlist,
                k,
                probe.r_out,
                probe.r_self,
                min_recall,
                cap,
            )
            self.recall, self.self_recall, self.nprobe = probe.r_out, probe.r_self, cap
            return
        self.kind = "ivf"
        self.nprobe, self.self_nprobe = probe.p_out, probe.p_self
        self.recall = probe.outside_recall(probe.p_out)
        self.self_recall = probe.self_recall(probe.p_self)
        self._members = probe.members
        self._self_assign = np.ascontiguousarray(probe.assign[:, : probe.p_self], dtype=np.int32)
        if isinstance(self.vectors, RowFile):
            members = probe.members
            self._to_cell_order(np.concatenate(members) if members else np.zeros(0, np.int64))
        log.info(
            "IVF%d index: nprobe %d (recall@%d %.3f), self-kNN nprobe %d (recall %.3f)",
            nlist,
            probe.p_out,
            k,
            self.recall,
            probe.p_self,
            self.self_recall,
        )

    def _train_ivf(self, nlist, train_per_centroid, kmeans_iters, seed, rng) -> int:
        """Spherical k-means centroids on a subsample; returns the number of cells."""
        import faiss

        nlist = int(nlist or max(16, min(65536, round(2 * np.sqrt(self.n)))))
        nlist = max(2, min(nlist, self.n // 39))
        t0 = time.perf_counter()
        train_n = min(self.n, max(39, int(train_per_centroid)) * nlist)
        train = self.vectors[np.sort(rng.choice(self.n, size=train_n, replace=False))]
        km = faiss.Kmeans(
            self.dim,
            nlist,
            niter=int(kmeans_iters),
            seed=int(seed),
            spherical=True,
            max_points_per_centroid=train_n,  # the subsample above is the training set
            verbose=False,
        )
        km.train(train)
        self.build_seconds["train"] = time.perf_counter() - t0
        self._centroids = np.ascontiguousarray(km.centroids, dtype=np.float32)
        self.nlist = nlist
        return nlist

    def _smallest_nprobe(self, rng, recall_sample, k, first, cap, min_recall) -> _Probe:
        """The fewest cells to probe for ``min_recall``, outside queries and self-kNN.

        Recall is checked on a sample against exact search. Within the probed cells the
        search is exact, so a neighbour is found iff its cell is probed: recall for every
        nprobe comes from cell ids alone, without trial searches."""
        secs = self.build_seconds
        t0 = time.perf_counter()
        sample = np.sort(rng.choice(self.n, size=min(int(recall_sample), self.n), replace=False))
        _, exact = exact_knn(self.vectors[sample], self.vectors, k + 1, self.threads)
        secs["recall"] = time.perf_counter() - t0
        # Outside queries: the query itself left out; self-kNN: it is its own first neighbour.
        others = np.array([row[row != q][:k] for row, q in zip(exact, sample, strict=True)])
        probe = _Probe()
        for top_p in sorted({min(cap, max(first, 8)), cap}):  # few cells kept per vector first
            t1 = time.perf_counter()
            probe.assign = self._assign(self.vectors, top_p)  # (n, top_p) nearest cells
            secs["assign"] = secs.get("assign", 0.0) + time.perf_counter() - t1
            probe.use(self.nlist, sample, exact, others, k)
            for p in range(first, top_p + 1):
                if probe.p_out is None:
                    probe.r_out = probe.outside_recall(p)
                    probe.p_out = p if probe.r_out >= min_recall else None
                if probe.p_self is None:
                    probe.r_self = probe.self_recall(p)
                    probe.p_self = p if probe.r_self >= min_recall else None
            if probe.p_out is not None and probe.p_self is not None:
                break
        return probe

    def _to_cell_order(self, order: np.ndarray) -> None:
        """Rewrite the vector file with each cell's members together (cell by cell, in row
        order within a cell): a probed cell is then one contiguous read."""
        old = self.vectors
        cells = RowFile(self.n, self.dim, np.float32, dir=old.dir)
        for a in range(0, self.n, _BLOCK_X):
            cells.write(a, old.take(order[a : a + _BLOCK_X]))
        old.close()
        self.vectors = cells
        self._cell_start = np.cumsum([0] + [len(m) for m in self._members])
        self._cell_ordered = True

    def vectors_of(self, rows) -> np.ndarray:
        """The indexed vectors of ``rows`` (numbers as given at build time, in that order),
        wherever they are stored; one vector for an int."""
        if isinstance(rows, int | np.integer):
            return self.vectors_of(np.array([rows]))[0]
        rows = np.asarray(rows, dtype=np.int64)
        if not self._cell_ordered:
            return self.vectors[rows]
        if self._position is None:  # row -> its place in the cell-ordered file
            order = np.concatenate(self._members)
            self._position = np.empty(len(order), np.int64)
            self._position[order] = np.arange(len(order))
        return self.vectors.take(self._position[rows])

    def _cell_vectors(self, cells: np.ndarray) -> np.ndarray:
        """The vectors of the members of ``cells`` (in that order), one matrix."""
        if not self._cell_ordered:
            return self.vectors[np.concatenate([self._members[u] for u in cells])]
        start = self._cell_start
        return self.vectors.take(np.concatenate([np.arange(start[u], start[u + 1]) for u in cells]))

    def _assign(self, x: np.ndarray, p: int) -> np.ndarray:
        """The ``p`` nearest cells of each row of ``x``, best first."""
        return exact_knn(x, self._centroids, p, self.threads)[1]

    # -- search ---------------------------------------------------------------------------------

    def _is_self(self, queries) -> bool:
        if isinstance(queries, RowFile) or isinstance(self.vectors, RowFile):
            return queries is self.vectors
        q, v = queries.__array_interface__, self.vectors.__array_interface__
        return q["data"][0] == v["data"][0] and queries.shape == self.vectors.shape

    def search(
        self, queries: np.ndarray, k: int, batch_size: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(scores, ids)`` of shape ``(len(queries), k)``, best first; ids -1 past the end.
        Passing the indexed array itself runs the self-kNN pass (``search_self``).
        ``batch_size`` is accepted for compatibility; blocks are sized internally."""
        k = int(k)
        if self._is_self(queries):
            return self.search_self(k)
        queries = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        if self._is_self(queries):
            return self.search_self(k)
        if self.kind == "flat":
            return exact_knn(queries, self.vectors, k, self.threads)
        return self._search_cells(queries, self._assign(queries, self.nprobe), k)

    def search_self(self, k: int, sink: Sink | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """Every indexed vector's top-``k`` among all of them (itself included), best first;
        with ``sink`` handed over a block of rows at a time (see :func:`exact_knn`)."""
        k = int(k)
        if self.kind == "flat":
            return exact_knn(self.vectors, self.vectors, k, self.threads, sink)
        return self._search_cells(None, self._self_assign, k, sink)

    def _search_cells(
        self, queries: np.ndarray | None, assign: np.ndarray, k: int, sink: Sink | None = None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Queries grouped by nearest cell; each group against the union of its probed cells.
        ``queries`` None: the indexed vectors themselves (a group is then a run of one cell's
        members, one read when the vectors are on disk)."""
        n = len(assign)
        if sink is None:
            scores = np.full((n, k), np.finfo(np.float32).min, dtype=np.float32)
            ids = np.full((n, k), -1, dtype=np.int64)
        primary = assign[:, 0]
        order = np.argsort(primary, kind="stable")
        bounds = np.searchsorted(primary[order], np.arange(self.nlist + 1))
        groups = [
            (bounds[c] + s, min(bounds[c + 1], bounds[c] + s + _BLOCK_Q))
            for c in np.flatnonzero(np.diff(bounds))
            for s in range(0, bounds[c + 1] - bounds[c], _BLOCK_Q)
        ]

        def group(span: tuple[int, int]) -> None:
            rows = order[span[0] : span[1]]
            if queries is not None:
                q = queries[rows]
            elif self._cell_ordered:  # self-kNN: ``order`` is the file's cell order
                q = self.vectors.read(*span)
            else:
                q = self.vectors[rows]
            cells = np.unique(assign[rows])
            cand = np.concatenate([self._members[u] for u in cells])
            if not len(cand):
                top_scores = np.full((len(rows), k), np.finfo(np.float32).min, np.float32)
                top_ids = np.full((len(rows), k), -1, np.int64)
            else:
                top = _TopK(len(rows), k)
                top.add(q @ self._cell_vectors(cells).T, 0, cand)
                top_scores, top_ids = top.result()
            if sink is None:
                scores[rows], ids[rows] = top_scores, top_ids
            else:
                sink(rows, top_scores, top_ids)

        _run(group, groups, self.threads)
        return None if sink is not None else (scores, ids)


class _Probe:
    """What the nprobe search found: the cells of every vector (best first), each cell's
    members, and the recall at each nprobe of the sample's outside and self-kNN queries."""

    p_out: int | None = None
    p_self: int | None = None
    r_out: float = 0.0
    r_self: float = 0.0

    def use(self, nlist: int, sample, exact, others, k: int) -> None:
        primary = self.assign[:, 0]
        order = np.argsort(primary, kind="stable")
        bounds = np.searchsorted(primary[order], np.arange(nlist + 1))
        self.members = [order[bounds[c] : bounds[c + 1]] for c in range(nlist)]
        self._groups = [self.assign[self.members[c]] for c in primary[sample]]
        self._primary, self._sample, self._exact, self._others, self._k = (
            primary,
            sample,
            exact,
            others,
            k,
        )

    def outside_recall(self, p: int) -> float:
        own = self.assign[self._sample, None, :p]
        return float((self._primary[self._others][:, :, None] == own).any(-1).mean())

    def self_recall(self, p: int) -> float:
        cells = self._primary[self._exact[:, : self._k]]
        return float(
            np.mean(
                [np.isin(c, np.unique(g[:, :p])) for c, g in zip(cells, self._groups, strict=True)]
            )
        )
