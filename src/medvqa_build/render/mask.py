"""``mask``: a translucent fill of each mark's mask (``alpha`` of the named colour over it)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import cv2
import numpy as np

from ..geometry import rle_encode
from ..records import DrawnShape, MaskRef
from .base import RENDERERS, Mark, PlannedRenderer, Stroke, Style, channel_colors
from .masks import load_region_crop


def plan_mask_mark(
    mark: Mark, style: Style, h: int, w: int, root: Path | None = None, channels: str = "rgb"
) -> Stroke:
    """The fill of the mask's pixels; ``decoded`` is the mask's ``rle_decode_box`` (the tight
    box and the crop), which is also the reach."""
    box, inside = load_region_crop(mark.region, h, w, root)
    x0, y0, x1, y1 = box
    lut = _blend_lut(mark.color, float(style.alpha), channels)

    def paint(view: np.ndarray, ox: int, oy: int) -> None:
        crop = view[y0 - oy : y1 - oy, x0 - ox : x1 - ox]
        blended = cv2.LUT(crop, lut)
        cv2.copyTo(blended, inside.view(np.uint8), crop)  # blended where inside, in place

    ref = mark.region.mask
    if ref is not None and ref.counts is not None and _canonical(ref.counts):
        # the mask was decoded from these runs, and canonical runs are what rle_encode gives
        size_hw, counts = (h, w), ref.counts
    else:
        mask = np.zeros((h, w), bool)
        mask[y0:y1, x0:x1] = inside
        size_hw, counts = rle_encode(mask)
    shape = DrawnShape(
        image_index=0,
        kind="mask",
        label=mark.region.label,
        color=mark.color,
        bbox=(float(x0), float(y0), float(x1), float(y1)),
        mask=MaskRef(size_hw=size_hw, counts=counts),
    )
    return Stroke((shape,), ((box, inside),), box, paint)


@lru_cache(maxsize=64)
def _blend_lut(color: str, alpha: float, channels: str = "rgb") -> np.ndarray:
    """Per-channel table of ``floor((1 - alpha) * v + alpha * colour + 0.5)``, computed with
    the float32 arithmetic of the per-pixel blend, so a lookup gives the same bytes."""
    rgb = np.asarray(channel_colors(channels)[color], np.float32)
    values = np.arange(256, dtype=np.float32)[:, None]
    blended = (1.0 - alpha) * values + alpha * rgb
    lut = np.clip(np.floor(blended + 0.5), 0, 255).astype(np.uint8).reshape(256, 1, 3)
    lut.flags.writeable = False
    return lut


def _canonical(counts) -> bool:
    """Whether RLE runs are as :func:`rle_encode` writes them (no empty run after the first)."""
    return len(counts) > 0 and (len(counts) == 1 or min(counts[1:]) > 0)


class MaskRenderer(PlannedRenderer):
    name = "mask"
    shape_kind = "mask"
    plan_mark = staticmethod(plan_mask_mark)


RENDERERS.add("mask", MaskRenderer())
