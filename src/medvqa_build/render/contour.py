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
from .base import (
    RENDERERS,
    Mark,
    PlannedRenderer,
    Stroke,
    Style,
    buffer_stroke,
    channel_colors,
)
from .masks import load_region_crop

_SHIFT = 2  # fractional bits: cv2 draws the half-pixel contour vertices without rounding bias
_ALL_LEVELS = 2**31 - 1  # drawContours' maxLevel: every contour given


def plan_contour_mark(
    mark: Mark, style: Style, h: int, w: int, root: Path | None = None, channels: str = "rgb"
) -> Stroke:
    """The outlines of the mark's mask, one shape each; ``decoded`` holds each polygon as
    traced: an int32 ``(N, 1, 2)`` array (pixel-centre vertices) or, for a crack outline, a
    float64 ``(N, 2)`` array. The reach is the outlines' box grown by the stroke's width.

    Pixel-centre outlines are drawn into the stroke's own buffer, the size of the reach
    (:func:`base.buffer_stroke`), which the render stage checks against the mask before it
    is composited; crack outlines (rare) paint on the image and are checked there."""
    t = style.thickness_for(h, w)
    color = channel_colors(channels)[mark.color]
    box, crop = load_region_crop(mark.region, h, w, root)
    x0, y0 = box[0], box[1]
    outlines = _pixel_outlines(crop, x0, y0)
    if outlines is None:
        return _crack_stroke(crop, x0, y0, mark, t, color, h, w)
    shapes = []
    for outline in outlines:
        x, y, bw, bh = cv2.boundingRect(outline)
        shape = DrawnShape(
            image_index=0,
            kind="contour",
            label=mark.region.label,
            color=mark.color,
            bbox=(float(x), float(y), float(x + bw), float(y + bh)),  # the pixels' tight box
            polygon=Polygon(outline.reshape(-1, 2)),
            thickness_px=t,
        )
        shapes.append(shape)

    # the outer outlines' boxes make up the mask's box: the reach is that box grown by t
    x1, y1 = box[2], box[3]
    reach = rx0, ry0, rx1, ry1 = max(0, x0 - t), max(0, y0 - t), min(w, x1 + t), min(h, y1 + t)
    pixels = np.zeros((ry1 - ry0, rx1 - rx0), np.uint8)
    cv2.drawContours(pixels, outlines, -1, 1, t, cv2.LINE_8, None, _ALL_LEVELS, (-rx0, -ry0))
    return buffer_stroke(tuple(shapes), tuple(outlines), reach, pixels, color, (box, crop))


def _reach(rects: list[tuple[int, int, int, int]], t: int, h: int, w: int):
    """The ``(x, y, w, h)`` rectangles' union grown by ``t`` (a stroke of width ``t`` reaches
    at most ``t / 2`` rounded up past its centre line), within the image."""
    x0 = min(r[0] for r in rects)
    y0 = min(r[1] for r in rects)
    x1 = max(r[0] + r[2] for r in rects)
    y1 = max(r[1] + r[3] for r in rects)
    return max(0, x0 - t), max(0, y0 - t), min(w, x1 + t), min(h, y1 + t)


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


def _crack_stroke(
    crop: np.ndarray, x0: int, y0: int, mark: Mark, t: int, color, h: int, w: int
) -> Stroke:
    """Outlines on the boundary between mask and background pixels (half-pixel vertices:
    :func:`geometry.crop_contours`), for masks whose pixel-centre outlines have no area."""
    shapes, polygons, fixed_all, rects = [], [], [], []
    one = 1 << _SHIFT
    for contour in crop_contours(crop, x0, y0):
        # vertices are multiples of 0.5: scaled by 1 << _SHIFT they are exact integers
        fixed = (contour * one).astype(np.int32).reshape(-1, 1, 2)
        # numpy's ceil keeps the sign of -0.0 (a mask touching the left or top border)
        bx, by, bw, bh = (v / one for v in cv2.boundingRect(fixed))
        step = 1 / one  # boundingRect's width counts the last point: max = x + w - 1
        x1, y1 = float(np.ceil(bx)), float(np.ceil(by))
        x2, y2 = float(np.floor(bx + bw - step)) + 1, float(np.floor(by + bh - step)) + 1
        rects.append((int(x1), int(y1), int(x2 - x1), int(y2 - y1)))
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
        shapes.append(shape)
        polygons.append(contour)
        fixed_all.append(fixed)

    def paint(view: np.ndarray, ox: int, oy: int) -> None:
        offset = np.array((ox * one, oy * one), np.int32)
        for fixed in fixed_all:
            pts = fixed - offset if ox or oy else fixed
            cv2.polylines(view, [pts], True, color, t, cv2.LINE_8, _SHIFT)

    return Stroke(tuple(shapes), tuple(polygons), _reach(rects, t + 1, h, w), paint)


class ContourRenderer(PlannedRenderer):
    name = "contour"
    shape_kind = "contour"
    plan_mark = staticmethod(plan_contour_mark)


RENDERERS.add("contour", ContourRenderer())
