"""Resize policy: keep native resolution by default, optionally cap the longer side, and map
boxes, points, polygons and masks by the same scale so geometry stays aligned with pixels.

Boxes are pixel *edges* (x2/y2 exclusive) and scale as ``x * s``; points and polygon vertices
are pixel *centres* and scale as ``(x + 0.5) * s - 0.5`` (the mapping cv2.resize uses).
Resize the clean image first, then render on the resized image, so drawn strokes stay crisp.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import cv2
import numpy as np

from ..geometry import BoxXYXY, rle_encode
from ..records import MaskRef, PointXY, Region
from .masks import load_region_mask


@dataclass(frozen=True)
class Resize:
    """A scale from clean-image pixels (``src_hw``) to the pixels the model sees (``dst_hw``)."""

    src_hw: tuple[int, int]
    dst_hw: tuple[int, int]

    @property
    def is_identity(self) -> bool:
        return self.src_hw == self.dst_hw

    @property
    def scale_xy(self) -> tuple[float, float]:
        return self.dst_hw[1] / self.src_hw[1], self.dst_hw[0] / self.src_hw[0]

    def image(self, image: np.ndarray) -> np.ndarray:
        if image.shape[:2] != self.src_hw:
            raise ValueError(f"image is {image.shape[:2]} (HxW), this resize expects {self.src_hw}")
        if self.is_identity:
            return image
        h, w = self.dst_hw
        shrinking = h * w < self.src_hw[0] * self.src_hw[1]
        interp = cv2.INTER_AREA if shrinking else cv2.INTER_LINEAR
        return cv2.resize(image, (w, h), interpolation=interp)

    def box(self, box_xyxy: Sequence[float]) -> BoxXYXY:
        sx, sy = self.scale_xy
        x1, y1, x2, y2 = (float(v) for v in box_xyxy)
        return (x1 * sx, y1 * sy, x2 * sx, y2 * sy)

    def points(self, points: Sequence[Sequence[float]]) -> tuple[PointXY, ...]:
        sx, sy = self.scale_xy
        return tuple(((x + 0.5) * sx - 0.5, (y + 0.5) * sy - 0.5) for x, y in points)

    def mask(self, mask: np.ndarray) -> np.ndarray:
        if self.is_identity:
            return mask
        h, w = self.dst_hw
        return cv2.resize(mask.astype(np.uint8), (w, h), interpolation=cv2.INTER_NEAREST) > 0

    def region(self, region: Region, root: str | Path | None = None) -> Region:
        """The region in resized pixels; a mask is loaded, resized (nearest) and stored as RLE."""
        if self.is_identity:
            return region
        mask = region.mask
        if mask is not None:
            loaded = load_region_mask(region, self.src_hw[0], self.src_hw[1], root)
            size_hw, counts = rle_encode(self.mask(loaded))
            mask = MaskRef(size_hw=size_hw, counts=counts)
        return replace(
            region,
            bbox=None if region.bbox is None else self.box(region.bbox),
            mask=mask,
            polygon=self.points(region.polygon),
            points=self.points(region.points),
        )


def fit_max_side(height: int, width: int, max_side: int | None = None) -> Resize:
    """Keep native size unless the longer side exceeds ``max_side``; then scale it down to fit."""
    if max_side is not None and max_side < 1:
        raise ValueError(f"max_side must be a positive number of pixels, got {max_side}")
    if max_side is None or max(height, width) <= max_side:
        return Resize((height, width), (height, width))
    scale = max_side / max(height, width)
    dst = (max(1, round(height * scale)), max(1, round(width * scale)))
    return Resize((height, width), dst)
