"""``mask``: a translucent fill of each mark's mask (``alpha`` of the named colour over it)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import cv2
import numpy as np

from ..geometry import rle_encode
from ..records import DrawnShape, MaskRef
from .base import COLORS, RENDERERS, Mark, RenderResult, Style
from .masks import load_region_crop


def draw_mask_mark(
    image: np.ndarray, mark: Mark, style: Style, root: Path | None = None
) -> DrawnShape:
    h, w = image.shape[:2]
    (x0, y0, x1, y1), inside = load_region_crop(mark.region, h, w, root)
    crop = image[y0:y1, x0:x1]
    blended = cv2.LUT(crop, _blend_lut(mark.color, float(style.alpha)))
    crop[...] = cv2.copyTo(blended, inside.view(np.uint8), crop.copy())  # blended where inside
    ref = mark.region.mask
    if ref is not None and ref.counts is not None and _canonical(ref.counts):
        # the mask was decoded from these runs, and canonical runs are what rle_encode gives
        size_hw, counts = (h, w), ref.counts
    else:
        mask = np.zeros((h, w), bool)
        mask[y0:y1, x0:x1] = inside
        size_hw, counts = rle_encode(mask)
    bbox = (float(x0), float(y0), float(x1), float(y1))
    return DrawnShape(
        image_index=0,
        kind="mask",
        label=mark.region.label,
        color=mark.color,
        bbox=bbox,
        mask=MaskRef(size_hw=size_hw, counts=counts),
    )


@lru_cache(maxsize=64)
def _blend_lut(color: str, alpha: float) -> np.ndarray:
    """Per-channel table of ``floor((1 - alpha) * v + alpha * colour + 0.5)``, computed with
    the float32 arithmetic of the per-pixel blend, so a lookup gives the same bytes."""
    rgb = np.asarray(COLORS[color], np.float32)
    values = np.arange(256, dtype=np.float32)[:, None]
    blended = (1.0 - alpha) * values + alpha * rgb
    lut = np.clip(np.floor(blended + 0.5), 0, 255).astype(np.uint8).reshape(256, 1, 3)
    lut.flags.writeable = False
    return lut


def _canonical(counts) -> bool:
    """Whether RLE runs are as :func:`rle_encode` writes them (no empty run after the first)."""
    runs = np.asarray(counts)
    return runs.size > 0 and bool((runs[1:] > 0).all())


class MaskRenderer:
    name = "mask"

    def draw(
        self, image: np.ndarray, marks: list[Mark], style: Style, root: Path | None = None
    ) -> RenderResult:
        shapes = tuple(draw_mask_mark(image, mark, style, root) for mark in marks)
        return RenderResult(image, shapes)


RENDERERS.add("mask", MaskRenderer())
