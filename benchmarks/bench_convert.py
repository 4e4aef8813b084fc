"""Convert throughput as a ratio to a bare directory walk + stat over the same tree.

    python benchmarks/bench_convert.py [--images 2000] [--source synthetic-endo --root DIR]

Prints files/s for (a) os.walk + stat of every file (the floor any converter pays), (b) convert
with header checks, (c) convert with full decode; and the ratios b/a and c/a. No assertions:
the machines are shared and noisy, so only same-run ratios mean anything.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from medvqa_build.convert import scan_source


def walk(root: Path) -> int:
    n = 0
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            os.stat(os.path.join(dirpath, name))
            n += 1
    return n


def best_of(fn, repeat: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="synthetic-endo")
    parser.add_argument("--root", help="dataset root (default: generate synthetic-endo)")
    parser.add_argument("--images", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.root) if args.root else None
        if root is None:
            from medvqa_build.sources.synthetic_endo import write_synthetic_endo

            root = write_synthetic_endo(
                Path(tmp) / "syn", n_images=args.images, n_videos=4, frames_per_video=50
            )
        t_walk, n_files = best_of(lambda: walk(root))
        t_head, res = best_of(lambda: scan_source(args.source, root, progress=False))
        t_dec, _ = best_of(
            lambda: scan_source(args.source, root, verify="decode", progress=False), 1
        )
        found = res.found
        print(f"tree: {n_files} files, {found} candidate images ({args.source})")
        print(f"walk+stat       {n_files / t_walk:10.0f} files/s")
        print(
            f"convert header  {found / t_head:10.0f} images/s   ratio to walk {t_walk / t_head:.3f}"
        )
        print(
            f"convert decode  {found / t_dec:10.0f} images/s   ratio to walk {t_walk / t_dec:.3f}"
        )


if __name__ == "__main__":
    main()
