"""``contour``: the outline of each mark's mask (EndoBench's Cont level), one shape per outline.

Outlines are the borders ``cv2.findContours`` traces (outer borders and holes, through the
centres of the border pixels, corners only: ~1/3 of the border's pixels) and are drawn with
``cv2.polylines``, as OpenCV users outline masks; a polygon filled with ``cv2.fillPoly``
gives back its component. A mask with a part one pixel thin, whose pixel-centre outline
would have no area, is outlined on the boundary between its pixels and the background
instead (:func:`geometry.crop_contours`, half-pixel vertices).
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
    (x0, y0, _, _), crop = load_region_crop(mark.region, h, w, root)
    outlines = _pixel_outlines(crop, x0, y0)
    if outlines is None:
        return _draw_crack_outlines(image, crop, x0, y0, mark, t, color)
    cv2.polylines(image, outlines, True, color, t, cv2.LINE_8)
    out = []
    for outline in outlines:
        x, y, bw, bh = cv2.boundingRect(outline)
        polygon = outline.reshape(-1, 2).astype(np.float64)
        shape = DrawnShape(
            image_index=0,
            kind="contour",
            label=mark.region.label,
            color=mark.color,
            bbox=(float(x), float(y), float(x + bw), float(y + bh)),  # the pixels' tight box
            polygon=Polygon(polygon),
            thickness_px=t,
        )
        out.append((shape, polygon))
    return out


def _pixel_outlines(crop: np.ndarray, x0: int, y0: int) -> tuple[np.ndarray, ...] | None:
    """The outer and hole borders of the mask's components as closed polygons through the
    centres of their border pixels (``cv2.findContours``, corners only), in image
    coordinates; None when a border has no area (a component one pixel thin or a single
    pixel: such an outline would be a line, not a polygon)."""
    outlines = cv2.findContours(
        crop.view(np.uint8), cv2.RETR_CCOMP, cv2.CHAIN_APPROX_SIMPLE, offset=(x0, y0)
    )[0]
    if any(len(o) < 3 or cv2.contourArea(o) == 0 for o in outlines):
        return None
    return outlines


def _draw_crack_outlines(
    image: np.ndarray, crop: np.ndarray, x0: int, y0: int, mark: Mark, t: int, color
) -> list[tuple[DrawnShape, np.ndarray]]:
    """Outlines on the boundary between mask and background pixels (half-pixel vertices:
    :func:`geometry.crop_contours`), for masks whose pixel-centre outlines have no area."""
    out = []
    for contour in crop_contours(crop, x0, y0):
        # vertices are multiples of 0.5: scaled by 1 << _SHIFT they are exact integers
        fixed = (contour * (1 << _SHIFT)).astype(np.int32).reshape(-1, 1, 2)
        cv2.polylines(image, [fixed], True, color, t, cv2.LINE_8, _SHIFT)
        # numpy's ceil keeps the sign of -0.0 (a mask touching the left or top border)
        bx, by, bw, bh = (v / (1 << _SHIFT) for v in cv2.boundingRect(fixed))
        step = 1 / (1 << _SHIFT)  # boundingRect's width counts the last point: max = x + w - 1
        x1, y1 = float(np.ceil(bx)), float(np.ceil(by))
        x2, y2 = float(np.floor(bx + bw - step)) + 1, float(np.floor(by + bh - step)) + 1
        shape = DrawnShape(
            image_index=0,
            kind="contour",
            label=mark.region.label,
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
