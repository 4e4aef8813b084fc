"""``contour``: the outline of each mark's mask (EndoBench's Cont level), one shape per outline.

Outlines are those of :func:`geometry.mask_to_contours` (pixel-centre coordinates, holes
included; computed on the mask's crop) and are drawn with ``cv2.polylines`` centred on the mask
boundary.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from ..geometry import crop_contours
from ..records import DrawnShape, Polygon
from .base import RENDERERS, Mark, RenderResult, Style, channel_colors
from .masks import load_region_crop

_SHIFT = 2  # fractional bits: cv2 draws the half-pixel contour vertices without rounding bias


def draw_contour_mark(
    image: np.ndarray, mark: Mark, style: Style, root: Path | None = None, channels: str = "rgb"
) -> list[DrawnShape]:
    return [shape for shape, _ in _draw_contours(image, mark, style, root, channels)]


def _draw_contours(
    image: np.ndarray, mark: Mark, style: Style, root: Path | None, channels: str
) -> list[tuple[DrawnShape, np.ndarray]]:
    """Each outline drawn, as its shape and its polygon as an ``(N, 2)`` float64 array."""
    h, w = image.shape[:2]
    t = style.thickness_for(h, w)
    color = channel_colors(channels)[mark.color]
    label = mark.region.label
    (x0, y0, _, _), crop = load_region_crop(mark.region, h, w, root)
    out = []
    for contour in crop_contours(crop, x0, y0):
        # vertices are multiples of 0.5: scaled by 1 << _SHIFT they are exact integers
        fixed = (contour * (1 << _SHIFT)).astype(np.int32).reshape(-1, 1, 2)
        cv2.polylines(image, [fixed], True, color, t, cv2.LINE_8, _SHIFT)
        # the vertices' box from the fixed-point copy (cv2: one pass; numpy's reductions down
        # a column of an (N, 2) array are ~10x slower); numpy's ceil keeps the sign of -0.0
        # (a mask touching the left or top border), as the bbox always had
        bx, by, bw, bh = (v / (1 << _SHIFT) for v in cv2.boundingRect(fixed))
        step = 1 / (1 << _SHIFT)  # boundingRect's width counts the last point: max = x + w - 1
        x1, y1 = float(np.ceil(bx)), float(np.ceil(by))
        x2, y2 = float(np.floor(bx + bw - step)) + 1, float(np.floor(by + bh - step)) + 1
        shape = DrawnShape(
            image_index=0,
            kind="contour",
            label=label,
            color=mark.color,
            # vertices sit on or half a pixel outside the mask: the tight box of the pixels
            bbox=(x1, y1, x2, y2),
            polygon=Polygon(contour),
            thickness_px=t,
        )
        out.append((shape, contour))
    return out


class ContourRenderer:
    name = "contour"
    channels_aware = True

    def draw(
        self,
        image: np.ndarray,
        marks: list[Mark],
        style: Style,
        root: Path | None = None,
        channels: str = "rgb",
    ) -> RenderResult:
        drawn = [d for mark in marks for d in _draw_contours(image, mark, style, root, channels)]
        shapes = tuple(shape for shape, _ in drawn)
        return RenderResult(image, shapes, tuple(polygon for _, polygon in drawn))


RENDERERS.add("contour", ContourRenderer())
