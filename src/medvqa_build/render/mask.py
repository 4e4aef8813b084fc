"""``mask``: a translucent fill of each mark's mask (``alpha`` of the named colour over it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..geometry import mask_to_xyxy, rle_encode
from ..records import DrawnShape, MaskRef
from .base import COLORS, RENDERERS, Mark, RenderResult, Style
from .masks import load_region_mask


def draw_mask_mark(
    image: np.ndarray, mark: Mark, style: Style, root: Path | None = None
) -> DrawnShape:
    h, w = image.shape[:2]
    mask = load_region_mask(mark.region, h, w, root)
    rgb = np.asarray(COLORS[mark.color], np.float32)
    inside = image[mask].astype(np.float32)
    blended = (1.0 - style.alpha) * inside + style.alpha * rgb
    image[mask] = np.clip(np.floor(blended + 0.5), 0, 255).astype(np.uint8)
    size_hw, counts = rle_encode(mask)
    return DrawnShape(
        image_index=0,
        kind="mask",
        label=mark.region.label,
        color=mark.color,
        bbox=mask_to_xyxy(mask),
        mask=MaskRef(size_hw=size_hw, counts=counts),
    )


class MaskRenderer:
    name = "mask"

    def draw(
        self, image: np.ndarray, marks: list[Mark], style: Style, root: Path | None = None
    ) -> RenderResult:
        shapes = tuple(draw_mask_mark(image, mark, style, root) for mark in marks)
        return RenderResult(image, shapes)


RENDERERS.add("mask", MaskRenderer())
