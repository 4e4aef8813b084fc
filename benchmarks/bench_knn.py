"""kNN over clustered unit vectors: EmbeddingIndex (FAISS flat, and auto IVF) against
scikit-learn's brute-force NearestNeighbors; prints speed ratios and recall@k.

    python benchmarks/bench_knn.py --n 100000 --dim 512 --queries 10000 --k 10
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def clustered(n: int, dim: int, centres: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(centres, dim)).astype(np.float32)
    x = c[rng.integers(0, centres, n)] + 0.5 * rng.normal(size=(n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--centres", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()

    from sklearn.neighbors import NearestNeighbors

    from medvqa_build.negatives import EmbeddingIndex
    from medvqa_build.negatives.index import recall_at_k

    base = clustered(args.n, args.dim, args.centres, 0)
    queries = base[np.random.default_rng(1).choice(args.n, args.queries, replace=False)]
    queries = queries + 0.05 * np.random.default_rng(2).normal(size=queries.shape)
    queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)

    t = time.perf_counter()
    nn = NearestNeighbors(n_neighbors=args.k, algorithm="brute", metric="euclidean", n_jobs=-1)
    nn.fit(base)
    _, sk_ids = nn.kneighbors(queries)
    sk_s = time.perf_counter() - t

    t = time.perf_counter()
    flat = EmbeddingIndex(base, kind="flat", threads=args.threads)
    _, flat_ids = flat.search(queries, args.k)
    flat_s = time.perf_counter() - t

    t = time.perf_counter()
    ivf = EmbeddingIndex(base, kind="auto", ivf_threshold=50_000, threads=args.threads)
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    _, ivf_ids = ivf.search(queries, args.k)
    ivf_search_s = time.perf_counter() - t

    print(
        f"{args.n} x {args.dim} clustered ({args.centres} centres), {args.queries} queries, "
        f"k={args.k}, {args.threads} threads"
    )
    print(f"sklearn brute         {sk_s:7.2f} s  {args.queries / sk_s:9.0f} q/s")
    print(
        f"faiss flat (build+q)  {flat_s:7.2f} s  {args.queries / flat_s:9.0f} q/s  "
        f"speed-up x{sk_s / flat_s:.1f}  recall@{args.k} vs sklearn "
        f"{recall_at_k(flat_ids, sk_ids):.4f}"
    )
    print(
        f"auto -> {ivf.kind:4s} nprobe {ivf.nprobe}  build {build_s:.2f} s  search "
        f"{ivf_search_s:.2f} s  {args.queries / ivf_search_s:9.0f} q/s  speed-up "
        f"x{sk_s / (build_s + ivf_search_s):.1f} (incl. build), x{sk_s / ivf_search_s:.1f} "
        f"(search)  recall@{args.k} {recall_at_k(ivf_ids, sk_ids):.4f} "
        f"(sampled check {'exact' if ivf.recall is None else format(ivf.recall, '.3f')})"
    )


if __name__ == "__main__":
    main()
