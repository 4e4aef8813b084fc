"""Render throughput per prompt level as a ratio to cv2 decode + encode alone, in the same run.

Run: ``python benchmarks/bench_render.py [--images 60] [--repeat 3]``. Prints images/s and the
ratio (1.0 = rendering costs nothing beyond I/O). Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

from medvqa_build.records import MaskRef, Region
from medvqa_build.render import PROMPT_LEVELS, Mark, render
from medvqa_build.sources.synthetic_endo import write_synthetic_endo

ENCODE = [cv2.IMWRITE_JPEG_QUALITY, 92]


def _load(root: Path, n: int) -> list[tuple[bytes, Region]]:
    items = []
    for path in sorted((root / "masks").glob("*.png"))[:n]:
        data = (root / "images" / f"{path.stem}.jpg").read_bytes()
        items.append((data, Region("lesion", mask=MaskRef(path=f"masks/{path.name}"))))
    return items


def _decode(data: bytes) -> np.ndarray:
    bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def _baseline(items) -> None:
    for data, _ in items:
        cv2.imencode(".jpg", cv2.cvtColor(_decode(data), cv2.COLOR_RGB2BGR), ENCODE)


def _with_render(items, level: str, root: Path) -> None:
    for data, region in items:
        rgb = _decode(data)
        marks = [Mark(region, "green")]
        if level == "multi":
            marks.append(Mark(Region("other", bbox=(5, 5, 60, 60)), "red"))
        out = render(level, rgb, marks, root=root).image
        cv2.imencode(".jpg", cv2.cvtColor(out, cv2.COLOR_RGB2BGR), ENCODE)


def _rate(fn, n: int, repeat: int) -> float:
    best = min(_timed(fn) for _ in range(repeat))
    return n / best


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = write_synthetic_endo(Path(tmp), n_images=args.images * 5 // 4 + 5, n_videos=0)
        items = _load(root, args.images)
        n = len(items)
        base = _rate(lambda: _baseline(items), n, args.repeat)
        print(f"{n} synthetic-endo images; cv2 decode+encode (JPEG q92): {base:8.1f} img/s")
        print(f"{'level':10s} {'img/s':>8s} {'ratio':>6s}")
        for level in PROMPT_LEVELS:
            rate = _rate(lambda lv=level: _with_render(items, lv, root), n, args.repeat)
            print(f"{level:10s} {rate:8.1f} {rate / base:6.2f}")


if __name__ == "__main__":
    main()
