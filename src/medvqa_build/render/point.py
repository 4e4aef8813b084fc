"""``point``: a filled disc marking each region (given point, else mask centroid, else box centre).

A centroid that falls outside its mask (crescent shapes) moves to the nearest mask pixel, so
the marker always sits on the region. The shape's ``thickness_px`` records the disc radius.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from ..geometry import box_problem
from ..records import DrawnShape, PointXY
from .base import RENDERERS, Mark, PlannedRenderer, Stroke, Style, channel_colors
from .masks import _check_rle_size, load_region_crop


def mark_point(mark: Mark, height: int, width: int, root: Path | None = None) -> PointXY:
    """Where the marker goes, in pixel-centre coordinates (integers)."""
    region = mark.region
    if mark.point is not None:
        x, y = mark.point
    elif region.points:
        x, y = region.points[0]
    elif (found := _rle_centroid(region, height, width)) is not None:
        x, y = found
    elif region.mask is not None or len(region.polygon) >= 3:
        (x0, y0, x1, y1), inside = load_region_crop(region, height, width, root)
        crop = inside.view(np.uint8)
        # the centroid from exact integer sums of the column and row counts: the same float
        # as the mean of the pixel coordinates
        per_col = cv2.reduce(crop, 0, cv2.REDUCE_SUM, dtype=cv2.CV_32S).ravel()
        per_row = cv2.reduce(crop, 1, cv2.REDUCE_SUM, dtype=cv2.CV_32S).ravel()
        n = int(per_col.sum())
        sum_x = int(per_col @ np.arange(x0, x1, dtype=np.int64))
        sum_y = int(per_row @ np.arange(y0, y1, dtype=np.int64))
        x, y = float(np.round(sum_x / n)), float(np.round(sum_y / n))
        if not inside[int(y) - y0, int(x) - x0]:  # the centroid lies inside the box
            ys, xs = np.nonzero(crop)  # the crop keeps the row-major order of the pixels
            xs += x0
            ys += y0
            nearest = np.argmin((xs - x) ** 2 + (ys - y) ** 2)
            x, y = float(xs[nearest]), float(ys[nearest])
    elif region.bbox is not None:
        problem = box_problem(region.bbox, width, height)
        if problem:
            raise ValueError(f"region {region.label!r}: {problem}")
        x1, y1, x2, y2 = region.bbox
        # the centre pixel of an exclusive-edge box
        x, y = np.floor((x1 + x2 - 1) / 2), np.floor((y1 + y2 - 1) / 2)
    else:
        raise ValueError(f"region {region.label!r} has no point, mask, polygon or box")
    x, y = int(round(float(x))), int(round(float(y)))
    if not (0 <= x < width and 0 <= y < height):
        raise ValueError(f"region {region.label!r}: point ({x}, {y}) lies outside the image")
    return (float(x), float(y))


def _rle_centroid(region, height: int, width: int) -> PointXY | None:
    """:func:`mark_point`'s centroid of an RLE mask, from its runs (no pixel array): the exact
    integer sums of the pixels' columns and rows over each run of ones. None (the caller
    decodes the mask) when the mask is not RLE, or empty or malformed (the decode reports
    it), or when the centroid falls off the mask (the nearest pixel is searched for)."""
    ref = region.mask
    if ref is None or ref.counts is None:
        return None
    _check_rle_size(region, height, width)
    h = height
    runs = np.asarray(ref.counts, dtype=np.int64).reshape(-1)
    if runs.size < 2:
        return None
    ends = np.cumsum(runs)
    if ends[-1] != h * width or runs.min() < 0:
        return None
    k = ends[: runs.size // 2 * 2]  # each run of ones is [k[2i], k[2i + 1])
    q, r = np.divmod(k, h)
    # sum over the pixel indices i < k (column-major) of i // h (column) and of i % h (row)
    below = np.empty((2, k.size), np.int64)
    below[0] = (h * q * (q - 1)) // 2 + r * q
    below[1] = q * (h * (h - 1) // 2) + (r * (r - 1)) // 2
    n = int(k[1::2].sum() - k[0::2].sum())
    if n == 0:
        return None
    sum_x, sum_y = (below[:, 1::2].sum(axis=1) - below[:, 0::2].sum(axis=1)).tolist()
    x, y = float(np.round(sum_x / n)), float(np.round(sum_y / n))
    # the pixel's run (column-major index int(x) * h + int(y)) is a run of ones: odd index
    if np.searchsorted(ends, int(x) * h + int(y), side="right") % 2 == 0:
        return None
    return x, y


def plan_point_mark(
    mark: Mark, style: Style, h: int, w: int, root: Path | None = None, channels: str = "rgb"
) -> Stroke:
    """A disc of radius ``r`` on the mark's point; the reach is the disc's box."""
    r = style.radius_for(h, w)
    x, y = mark_point(mark, h, w, root)
    cx, cy = int(x), int(y)
    color = channel_colors(channels)[mark.color]

    def paint(view: np.ndarray, ox: int, oy: int) -> None:
        cv2.circle(view, (cx - ox, cy - oy), r, color, -1, cv2.LINE_8)

    box = (max(0.0, x - r), max(0.0, y - r), min(float(w), x + r + 1), min(float(h), y + r + 1))
    shape = DrawnShape(
        image_index=0,
        kind="point",
        label=mark.region.label,
        color=mark.color,
        bbox=box,
        point=(x, y),
        thickness_px=r,
    )
    reach = (max(0, cx - r - 1), max(0, cy - r - 1), min(w, cx + r + 2), min(h, cy + r + 2))
    return Stroke((shape,), (), reach, paint)


class PointRenderer(PlannedRenderer):
    name = "point"
    shape_kind = "point"
    plan_mark = staticmethod(plan_point_mark)


RENDERERS.add("point", PointRenderer())
