"""Fixture of the worked source example (``bowel-prep-example.yaml`` beside this file): a tiny
replica of what its archive unpacks to, ``frames/<score>/<video>/<frame>.jpg``, with synthetic
pixels. A real source keeps this as ``tests/fixtures/sources/<id_with_underscores>.py``."""

from pathlib import Path

import numpy as np
from PIL import Image

# score folder -> the videos scored so, each with its frame count
VIDEOS = {"0": {"v01": 3}, "1": {"v02": 2, "v03": 2}, "2": {"v04": 2}, "3": {"v05": 3}}


def write(root: Path) -> Path:
    seed = 0
    for score, videos in VIDEOS.items():
        for video, frames in videos.items():
            folder = root / "frames" / score / video
            folder.mkdir(parents=True, exist_ok=True)
            for k in range(frames):
                rng = np.random.default_rng(seed := seed + 1)
                pixels = rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(folder / f"{video}_{k:05d}.jpg", quality=90)
    return root
