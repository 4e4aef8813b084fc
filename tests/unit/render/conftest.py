"""Shared fixtures for renderer tests: a textured clean image and a disc-shaped region."""

from __future__ import annotations

import numpy as np
import pytest

from medvqa_build.geometry import rle_encode
from medvqa_build.records import MaskRef, Region


def textured_image(h: int = 96, w: int = 128, seed: int = 0) -> np.ndarray:
    """Mid-grey noise that never equals a pure named colour, so every stroke changes pixels."""
    rng = np.random.default_rng(seed)
    return rng.integers(60, 200, size=(h, w, 3), dtype=np.uint8)


def disc_mask(h: int, w: int, cx: float, cy: float, r: float) -> np.ndarray:
    yy, xx = np.ogrid[:h, :w]
    return (xx - cx) ** 2 + (yy - cy) ** 2 <= r**2


def rle_region(mask: np.ndarray, label: str = "polyp") -> Region:
    size_hw, counts = rle_encode(mask)
    return Region(label=label, mask=MaskRef(size_hw=size_hw, counts=counts))


@pytest.fixture
def clean() -> np.ndarray:
    return textured_image()


@pytest.fixture
def disc() -> np.ndarray:
    return disc_mask(96, 128, 60, 40, 15)


@pytest.fixture
def to_region():
    """Region with an RLE mask, built from a bool mask."""
    return rle_region


@pytest.fixture
def make_disc():
    return disc_mask


@pytest.fixture
def make_image():
    return textured_image
