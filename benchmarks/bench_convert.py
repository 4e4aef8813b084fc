"""Convert throughput as a ratio to a bare directory walk with header reads over the same tree.

    python benchmarks/bench_convert.py [--images 2000] [--source synthetic-endo --root DIR]

Prints files/s for (a) os.walk + ``PIL.Image.open(path).size`` of every image file (the floor
any converter that checks sizes pays; the issue's baseline), (b) convert with header checks,
(c) convert with full decode; the ratios b/a and c/a (goal for b/a >= 0.5), and for reference
os.walk + stat alone. No assertions: the machines are shared and noisy, so only same-run
ratios mean anything.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from PIL import Image

from medvqa_build.convert import scan_source

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".gif", ".webp"}


def walk(root: Path) -> int:
    n = 0
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            os.stat(os.path.join(dirpath, name))
            n += 1
    return n


def walk_headers(root: Path) -> int:
    """The baseline: every image file in the tree opened once for its size (header only)."""
    n = 0
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            if os.path.splitext(name)[1].lower() in IMAGE_SUFFIXES:
                with Image.open(os.path.join(dirpath, name)) as img:
                    img.size  # noqa: B018  (the header read is the point)
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
        t_stat, n_files = best_of(lambda: walk(root))
        t_walk, n_img = best_of(lambda: walk_headers(root))
        t_head, res = best_of(lambda: scan_source(args.source, root, progress=False))
        t_dec, _ = best_of(
            lambda: scan_source(args.source, root, verify="decode", progress=False), 1
        )
        found = res.found
        print(
            f"tree: {n_files} files, {n_img} image files, {found} candidate samples ({args.source})"
        )
        print(f"walk+stat          {n_files / t_stat:10.0f} files/s")
        print(f"walk+header reads  {n_img / t_walk:10.0f} images/s   (baseline)")
        print(f"convert header     {found / t_head:10.0f} samples/s  ratio {t_walk / t_head:.3f}")
        print(f"convert decode     {found / t_dec:10.0f} samples/s  ratio {t_walk / t_dec:.3f}")
        print(f"RATIO convert (header) / walk+header reads = {t_walk / t_head:.3f}  (goal >= 0.5)")
        print(f"RATIO convert (decode) / walk+header reads = {t_walk / t_dec:.3f}  (no goal)")


if __name__ == "__main__":
    main()
