"""Tiny replicas of each source's native layout (synthetic pixels, real structure).

Every registered source must have a writer here: the contract tests fail for one that has not.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

KVASIR_CLASSES = ("dyed-lifted-polyps", "dyed-resection-margins", "esophagitis", "normal-cecum",
                  "normal-pylorus", "normal-z-line", "polyps", "ulcerative-colitis")


def _jpeg(path: Path, seed: int, size_wh=(64, 48)) -> None:
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 255, (size_wh[1], size_wh[0], 3), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(cv2.imencode(".jpg", img)[1].tobytes())


def write_kvasir(root: Path, per_class: int = 2) -> Path:
    """kvasir-dataset-v2/<class>/<uuid-like>.jpg, as in kvasir-dataset-v2.zip."""
    for c, name in enumerate(KVASIR_CLASSES):
        for k in range(per_class):
            _jpeg(root / "kvasir-dataset-v2" / name / f"{c:02d}{k:02d}a1b2-c3d4.jpg", c * 100 + k)
    return root


def write_synthetic_endo(root: Path) -> Path:
    from medvqa_build.sources.synthetic_endo import write_synthetic_endo as write

    return write(root, n_images=10, n_videos=1, frames_per_video=4)


FIXTURES = {"kvasir": write_kvasir, "synthetic-endo": write_synthetic_endo}
