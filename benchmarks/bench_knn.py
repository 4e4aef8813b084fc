"""The full self-kNN pass (every vector queried against all, index build included) with
``EmbeddingIndex`` against scikit-learn's brute-force ``NearestNeighbors`` on the same data;
prints times, the speed-up and recall@k against the exact result. Goal: >= 10x at recall
>= 0.99 for 100k x 512.

    python benchmarks/bench_knn.py                       # 100k x 512, k=10, both data sets
    python benchmarks/bench_knn.py --n 20000 --data embeddings --repeats 1

Data: ``clustered`` (unit vectors around 2000 random centres) and ``embeddings`` (unit
vectors shaped like image embeddings: a shared mean direction, topics and sub-topics in a
64-d latent space with a decaying spectrum, a little full-rank noise).

scikit-learn on all n queries would take minutes, and brute force is exactly linear in the
number of queries, so it runs on ``--sk-queries`` of them (the same vectors as queries, as in
the self pass) and its time is scaled to n (printed as such). Recall is measured on those
queries against scikit-learn's exact neighbours. Each repeat times both, interleaved; the
medians are printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np


def clustered(n: int, dim: int, seed: int = 0, centres: int = 2000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(centres, dim)).astype(np.float32)
    x = c[rng.integers(0, centres, n)] + 0.5 * rng.normal(size=(n, dim)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def embeddings_like(n: int, dim: int, seed: int = 0, latent: int = 64) -> np.ndarray:
    rng = np.random.default_rng(seed)
    topics, per_topic = 50, 40
    topic = rng.normal(size=(topics, latent))
    sub = rng.normal(size=(topics * per_topic, latent))
    t = rng.integers(0, topics * per_topic, n)
    z = topic[t // per_topic] + 0.6 * sub[t] + 0.45 * rng.normal(size=(n, latent))
    basis = np.linalg.qr(rng.normal(size=(dim, latent)))[0] / np.sqrt(np.arange(1, latent + 1))
    mean = rng.normal(size=dim)
    x = z @ basis.T + 0.2 * mean / np.linalg.norm(mean) * np.sqrt(latent)
    x += 0.01 * rng.normal(size=(n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


DATA = {"clustered": clustered, "embeddings": embeddings_like}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--data", choices=[*DATA, "both"], default="both")
    ap.add_argument("--sk-queries", type=int, default=4000, help="scikit-learn query subset")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--min-recall", type=float, default=0.99)
    args = ap.parse_args()

    from sklearn.neighbors import NearestNeighbors

    from medvqa_build.negatives import EmbeddingIndex
    from medvqa_build.negatives.index import exact_knn, recall_at_k

    n, k = args.n, args.k
    m = min(args.sk_queries, n)
    sub = np.sort(np.random.default_rng(1).choice(n, m, replace=False))
    print(
        f"self-kNN {n} x {args.dim}, k={k}, {args.threads} threads; scikit-learn brute on "
        f"{m} of the {n} queries, time scaled x{n / m:.1f} (linear in queries)"
    )
    for name in DATA if args.data == "both" else [args.data]:
        x = DATA[name](n, args.dim)
        sk_full, ours, build, flat_full, ratios, recalls = [], [], [], [], [], []
        for _ in range(args.repeats):
            t = time.perf_counter()
            nn = NearestNeighbors(n_neighbors=k, algorithm="brute", n_jobs=-1).fit(x)
            _, sk_ids = nn.kneighbors(x[sub])
            sk_full.append((time.perf_counter() - t) * n / m)

            t = time.perf_counter()
            index = EmbeddingIndex(x, min_recall=args.min_recall, threads=args.threads)
            build.append(time.perf_counter() - t)
            _, ids = index.search_self(k)
            ours.append(time.perf_counter() - t)
            ratios.append(sk_full[-1] / ours[-1])
            recalls.append(recall_at_k(ids[sub], sk_ids))

            t = time.perf_counter()
            _, flat_ids = exact_knn(x[sub], x, k)
            flat_full.append((time.perf_counter() - t) * n / m)
        med = statistics.median
        print(
            f"[{name}] mean cosine {float((x[sub[:500]] @ x[:5000].T).mean()):.2f}, "
            f"k-th neighbour cosine {float(np.mean(exact_knn(x[sub[:500]], x, k)[0][:, -1])):.2f}"
        )
        print(f"  sklearn brute (scaled)  {med(sk_full):8.1f} s")
        print(
            f"  exact GEMM+heap (scaled){med(flat_full):8.1f} s  "
            f"x{med(sk_full) / med(flat_full):.1f}  recall {recall_at_k(flat_ids, sk_ids):.4f}"
        )
        print(
            f"  index {index.kind} nlist {index.nlist} self-nprobe {index.self_nprobe} "
            f"(nprobe {index.nprobe} for outside queries): build {med(build):.1f} s, "
            f"build + self-kNN {med(ours):.1f} s"
        )
        print(
            f"  speed-up x{med(ratios):.1f} (median of {args.repeats}: "
            f"{', '.join(f'{r:.1f}' for r in ratios)})  recall@{k} vs sklearn "
            f"{min(recalls):.4f} (worst repeat; build-time estimate "
            f"{'exact' if index.self_recall is None else format(index.self_recall, '.4f')})"
        )
        print(
            f"RATIO self-kNN {n} x {x.shape[1]} ({name}, build incl.) vs sklearn brute, recall "
            f"{min(recalls):.4f} = {med(ratios):.2f}  (goal >= 10)"
        )


if __name__ == "__main__":
    main()
