"""Peak memory and time of the ``visual_neighbor`` sampler at 10x pool size, with the pool
kept in memory against the default (a pool over ``memory_mib`` kept on disk).

    python benchmarks/bench_neighbor_memory.py [--sizes 10000,100000] [--dim 512] [--queries 2000]

Each measurement runs in a fresh interpreter: the pool's vectors (clustered, random) are
written to a file first and read row by row on demand, as generate hands the embed stage's
rows to a sampler, so the input itself is not in memory. The sampler is fitted (index build
and the batched self-kNN pass) and then answers ``--queries`` requests. Printed: peak RSS
above the interpreter + imports baseline, seconds, and the growth of the peak for 10x data
(goal <= 1.3x). Not a test: nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time

import numpy as np
from scaled_demo import peak_rss_mib

CLASSES = 40


def _rss_mib() -> float:
    # this process's own high-water mark (ru_maxrss would also count the parent it forked from)
    return peak_rss_mib()


class _Sample:
    __slots__ = ("sample_id", "source", "modality", "group_id")

    def __init__(self, i: int):
        self.sample_id, self.source, self.modality = f"img-{i:07d}", "src", "endoscopy"
        self.group_id = f"patient-{i // 8:06d}"


class _Samples:
    """Sample-like rows made when read (the pool's bookkeeping is the sampler's to keep)."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> _Sample:
        return _Sample(i)


class _Labels:
    """The pool's labels, made when read (not a list held by the benchmark)."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> str:
        if not 0 <= i < self.n:
            raise IndexError(i)
        return f"class-{(i * 7919) % CLASSES}"


class _FileRows:
    """Rows of a raw float32 file, read with ``pread`` when asked for (as generate reads the
    embed stage's file): indexed by a row number or an array of them."""

    def __init__(self, path: str, n: int, dim: int):
        import os

        self.n, self.dim, self._fd = n, dim, os.open(path, os.O_RDONLY)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, rows) -> np.ndarray:
        import os

        if np.ndim(rows) == 0:
            return self[np.array([rows])][0]
        rows = np.asarray(rows).tolist()
        out = np.empty((len(rows), self.dim), np.float32)
        size = self.dim * 4
        for k, r in enumerate(rows):
            out[k] = np.frombuffer(os.pread(self._fd, size, r * size), np.float32)
        return out


def write_pool(path: str, n: int, dim: int) -> None:
    """Clustered random vectors, written a block at a time."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(CLASSES * 4, dim)).astype(np.float32)
    with open(path, "wb") as fh:
        for a in range(0, n, 4096):
            b = min(n, a + 4096)
            cl = rng.integers(0, len(centres), b - a)
            noise = rng.standard_normal(size=(b - a, dim), dtype=np.float32)
            fh.write((centres[cl] + 0.8 * noise).tobytes())


def child(path: str, n: int, dim: int, queries: int, memory_mib: float, threads: int) -> dict:
    from medvqa_build.negatives import OptionRequest
    from medvqa_build.negatives.visual_neighbor import VisualNeighborSampler
    from medvqa_build.ontology import Ontology

    rows, labels, samples = _FileRows(path, n, dim), _Labels(n), _Samples(n)
    ontology = Ontology.from_mapping({})
    baseline = _rss_mib()
    start = time.perf_counter()
    sampler = VisualNeighborSampler(memory_mib=memory_mib, index={"threads": threads})
    sampler.fit(samples, rows, labels)
    fitted = time.perf_counter()
    picked = np.random.default_rng(1).choice(n, size=min(queries, n), replace=False)
    answered = 0
    for i in picked.tolist():
        request = OptionRequest(
            truth=labels[i], pool=(), n_options=4, sample=samples[i], ontology=ontology
        )
        answered += len(sampler.sample(request, np.random.default_rng(i)).candidates) == 3
    end = time.perf_counter()
    return {
        "n": n,
        "spilled": bool(sampler.spilled),
        "kind": sampler._index.kind,
        "baseline_mib": baseline,
        "peak_mib": _rss_mib(),
        "fit_s": fitted - start,
        "query_ms": (end - fitted) / max(1, len(picked)) * 1e3,
        "answered": answered,
    }


def _run_child(tmp: str, *args) -> dict:
    cmd = [sys.executable, __file__, "--child", *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=_env(tmp))
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _env(tmp: str) -> dict:
    import os

    env = dict(os.environ)
    env["TMPDIR"] = tmp  # the spill files: removed with the folder
    return env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--memory-mib", type=float, help="the default mode's memory_mib (the sampler's default)"
    )
    ap.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        path, n, dim, queries, mib, threads = args.child
        result = child(path, int(n), int(dim), int(queries), float(mib), int(threads))
        print(json.dumps(result))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    modes = {"in memory": 1e9, "default": None}
    from medvqa_build.negatives.visual_neighbor import VisualNeighborSampler

    default_mib = (
        args.memory_mib if args.memory_mib is not None else VisualNeighborSampler().memory_mib
    )
    print(
        f"visual_neighbor, {args.dim}-d pool vectors, {args.queries} queries, default "
        f"memory_mib {default_mib:g}"
    )
    peaks: dict[str, list[float]] = {}
    tmp_dir = tempfile.TemporaryDirectory()
    tmp = tmp_dir.name
    for n in sizes:
        write_pool(f"{tmp}/pool-{n}.f32", n, args.dim)
    for mode, mib in modes.items():
        for n in sizes:
            limit = default_mib if mib is None else mib
            path = f"{tmp}/pool-{n}.f32"
            r = _run_child(tmp, path, n, args.dim, args.queries, limit, args.threads)
            above = r["peak_mib"] - r["baseline_mib"]
            peaks.setdefault(mode, []).append(r["peak_mib"])
            print(
                f"  {mode:10s} {n:>8d}: peak {r['peak_mib']:7.0f} MiB ({above:6.0f} above the "
                f"{r['baseline_mib']:.0f} MiB baseline), {r['kind']:4s}"
                f"{' on disk' if r['spilled'] else ''}, fit {r['fit_s']:6.1f} s, "
                f"{r['query_ms']:.2f} ms/query, {r['answered']} answered",
                flush=True,
            )
    tmp_dir.cleanup()
    for mode, values in peaks.items():
        if len(values) > 1:
            print(
                f"RATIO visual_neighbor peak memory {sizes[-1]} / {sizes[0]} pool, {mode} = "
                f"{values[-1] / values[0]:.3f}  (goal <= 1.3)"
            )


if __name__ == "__main__":
    main()
