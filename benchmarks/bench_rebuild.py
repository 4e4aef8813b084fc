"""Warm rebuild vs cold build of the demo recipe scaled up, side by side in one run.

    python benchmarks/bench_rebuild.py [--images 2000] [--unique 500]

Cold: an empty build folder and an empty embedding cache. Warm: the same recipe into the same
folder again, every stage reused (what a user pays to re-run after an interruption, or to
re-export). The source tree is written beforehand (see ``scaled_demo.py``) so neither side
pays for generating pixels. Prints the ratio warm / cold (goal <= 0.05); asserts nothing.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

from scaled_demo import DEMO_RECIPE, scaled_overrides, stage_timer, write_scaled_endo


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=2000, help="still images (plus 2 videos)")
    ap.add_argument("--unique", type=int, default=500, help="distinct stills rendered")
    ap.add_argument("--warm-runs", type=int, default=3, help="warm rebuilds; the best is kept")
    args = ap.parse_args()
    logging.disable(logging.WARNING)

    from medvqa_build.api import build, load_recipe

    with tempfile.TemporaryDirectory(prefix="bench-rebuild-") as tmp:
        tmp_path = Path(tmp)
        root = write_scaled_endo(tmp_path / "root", args.images, unique=args.unique, n_videos=2)
        recipe = load_recipe(DEMO_RECIPE, scaled_overrides(root, args.images, tmp_path / "cache"))
        out = tmp_path / "build"
        with stage_timer() as cold_stages:
            t = time.perf_counter()
            result = build(recipe, out, progress=False)
            cold = time.perf_counter() - t
        warm, warm_stages = float("inf"), []
        for _ in range(args.warm_runs):
            with stage_timer() as log:
                t = time.perf_counter()
                again = build(recipe, out, progress=False)
                elapsed = time.perf_counter() - t
            if elapsed < warm:
                warm, warm_stages = elapsed, log
        reused = again.reused_all

    n = args.images + 48
    print(
        f"demo recipe scaled to {n} samples ({args.images} stills + 48 video frames), "
        f"{len(result.items)} items"
    )
    print(f"{'stage':24s} {'cold s':>8s} {'warm s':>8s}")
    for (name, c, *_), (_, w, *_) in zip(cold_stages, warm_stages, strict=True):
        print(f"{name:24s} {c:8.2f} {w:8.3f}")
    print(f"cold build   {cold:8.2f} s")
    print(f"warm rebuild {warm:8.3f} s   every stage reused: {reused}")
    print(f"RATIO warm rebuild / cold build = {warm / cold:.4f}  (goal <= 0.05)")


if __name__ == "__main__":
    main()
