"""Regenerate docs/images/prompt_levels/*.png: one synthetic endoscopy image at every prompt level.

Run from the repository root: ``python docs/scripts/render_prompt_levels.py``. Every image is
checked with the same alignment check a build runs, so the docs show only valid prompts.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np

from medvqa_build.geometry import COORD_HINTS, sample_distractor_boxes
from medvqa_build.records import MaskRef, Region
from medvqa_build.render import Mark, coord_text, prompt_levels, region_box, render
from medvqa_build.render.alignment import check_alignment
from medvqa_build.sources.synthetic_endo import write_synthetic_endo

OUT = Path(__file__).resolve().parents[1] / "images" / "prompt_levels"
STEM = "img_00000"  # the first still is a polyp with a mask (synthetic-endo cycles findings)


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = write_synthetic_endo(Path(tmp) / "synthetic-endo", n_images=1, n_videos=0, seed=0)
        bgr = cv2.imread(str(root / "images" / f"{STEM}.jpg"), cv2.IMREAD_COLOR)
        clean = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
        h, w = clean.shape[:2]
        polyp = Region("polyp", mask=MaskRef(path=f"masks/{STEM}.png"))
        target = region_box(polyp, h, w, root)
        rng = np.random.default_rng([0, 7])  # (seed, stage) as a build derives it
        field_of_view = clean.max(axis=2) > 30  # keep distractors off the black corners
        others = sample_distractor_boxes(
            target, w, h, 3, rng, max_iou=0.05, valid_mask=field_of_view
        )
        multi = [Mark(polyp, "blue", "contour")] + [
            Mark(Region("distractor", bbox=b), c)
            for b, c in zip(others, ("red", "yellow", "green"), strict=True)
        ]
        for level in prompt_levels():
            marks = multi if level == "multi" else [Mark(polyp, "green")]
            result = render(level, clean, marks, root=root)
            problems = check_alignment(clean, result.image, result.shapes, f"docs:{level}")
            if problems:
                print("\n".join(problems), file=sys.stderr)
                return 1
            out = cv2.cvtColor(result.image, cv2.COLOR_RGB2BGR)
            cv2.imwrite(str(OUT / f"{level}.png"), out, [cv2.IMWRITE_PNG_COMPRESSION, 9])
            print(f"{level:8s} {len(result.shapes)} shape(s) -> {OUT / f'{level}.png'}")
        for convention in ("abs", "norm1000", "norm1", "qwen"):
            print(f"coord {convention:8s} {coord_text(target, convention, w, h)}")
        print("hint:", COORD_HINTS["abs"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
