"""Check that a rendered prompt image differs from its clean image only where the recorded
geometry says, so the question text (written from the shapes) and the pixels cannot disagree.

Only the comparison of the two images touches every pixel (one cv2 pass). Each shape is then
checked on its own bounding crop: the pixels it may change are cleared from the changed-pixel
map, and its centre line's colour coverage is measured there. "Within distance r" of a line
(exact Euclidean) is a dilation by the disc ``dx^2 + dy^2 <= r^2`` (:func:`_disc`), which
equals thresholding a Euclidean distance transform at r; lines are rasterised with
skimage's Bresenham rule (:func:`_line_pixels`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import cv2
import numpy as np

from ..geometry import box_problem, rle_decode_box
from ..records import DrawnShape, Polygon
from ..render.base import COLORS, channel_colors

TOLERANCE_PX = 1  # slack around a stroke for rounding of sub-pixel geometry
MIN_COVERAGE = 0.5  # share of a stroke's centre line that must show its colour (overlaps hide some)


@lru_cache(maxsize=64)
def _disc(radius: float) -> np.ndarray:
    """uint8 kernel of the offsets within Euclidean distance ``radius`` (float64 sqrt, as
    scipy's distance transform computes it)."""
    r = math.floor(radius)
    d = np.arange(-r, r + 1, dtype=np.float64)
    kernel = (np.sqrt(d[:, None] ** 2 + d[None, :] ** 2) <= radius).astype(np.uint8)
    kernel.flags.writeable = False
    return kernel


def _within(pixels: np.ndarray, radius: float) -> np.ndarray:
    """uint8 map of the pixels within ``radius`` of a non-zero pixel of ``pixels`` (uint8)."""
    return cv2.dilate(pixels, _disc(radius))


def _painted(rendered: np.ndarray, color: str, channels: str = "rgb") -> np.ndarray:
    """uint8 map (255/0) of the pixels of ``rendered`` (a crop) that show exactly ``color``
    (``rendered``'s channels in ``channels`` order)."""
    rgb = channel_colors(channels)[color]
    if rendered.ndim == 3 and rendered.shape[2] == 3 and rendered.dtype == np.uint8:
        return cv2.inRange(rendered, rgb, rgb)
    return np.all(rendered == rgb, axis=-1).astype(np.uint8)


# cv2 splits a colour conversion of more pixels than this across its thread pool, whose
# workers then spin for a while: a larger map is converted in bands of rows of at most this many
_SERIAL_PIXELS = 1 << 16


def _changed(clean: np.ndarray, rendered: np.ndarray) -> np.ndarray:
    """uint8 map, non-zero where any channel differs (same-shape images)."""
    if clean.ndim == 3 and clean.shape[2] == 3 and clean.dtype == np.uint8:
        differs = cv2.compare(clean, rendered, cv2.CMP_NE)  # 255 per differing channel
        h, w = differs.shape[:2]
        if h * w <= _SERIAL_PIXELS or w > _SERIAL_PIXELS:
            return cv2.cvtColor(differs, cv2.COLOR_RGB2GRAY)  # >= 29 where any channel is 255
        out = np.empty((h, w), np.uint8)
        step = _SERIAL_PIXELS // w
        for r in range(0, h, step):
            cv2.cvtColor(differs[r : r + step], cv2.COLOR_RGB2GRAY, dst=out[r : r + step])
        return out
    changed = np.any(clean != rendered, axis=-1) if clean.ndim == 3 else clean != rendered
    return changed.astype(np.uint8)


def _next(a: np.ndarray) -> np.ndarray:
    """``np.roll(a, -1, axis=0)``: each vertex's successor on a closed polygon."""
    return np.concatenate((a[1:], a[:1]))


def _line_pixels(pts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of the closed polyline through integer ``(x, y)`` points, each segment
    rasterised as ``skimage.draw.line`` does (vectorised over all segments)."""
    c0, r0 = pts[:, 0], pts[:, 1]
    nxt = _next(pts)
    dc, dr = nxt[:, 0] - c0, nxt[:, 1] - r0
    adr, adc = np.abs(dr), np.abs(dc)
    steep = adr > adc
    major = np.maximum(adr, adc)  # points per segment: major + 1 (the last one is the end point)
    minor = np.minimum(adr, adc)
    # skimage steps by -1 along an axis unless the difference is positive (also when it is 0)
    sr = np.where(dr > 0, 1, -1)
    sc = np.where(dc > 0, 1, -1)
    counts = major + 1
    seg = np.repeat(np.arange(len(pts)), counts)
    i = np.arange(seg.size) - np.repeat(np.cumsum(counts) - counts, counts)  # major steps
    big = major[seg]
    # Bresenham's minor-axis steps after i major steps: floor((2 * minor * i + major) / 2major)
    k = (2 * minor[seg] * i + big) // np.maximum(2 * big, 1)
    st = steep[seg]
    rows = r0[seg] + sr[seg] * np.where(st, i, k)
    cols = c0[seg] + sc[seg] * np.where(st, k, i)
    return rows, cols


def _line_cover(pts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pixels of :func:`_line_pixels` as a set (rows, columns; any order, repeats allowed).

    When every segment joins neighbouring pixels (a mask outline's vertices, rounded), a
    segment's pixels are its two end points, so the set is the points themselves."""
    if len(pts) > 1:
        steps = pts[1:] - pts[:-1]
        np.abs(steps, out=steps)
        (x0, y0), (x1, y1) = pts[0].tolist(), pts[-1].tolist()
        if steps.max() <= 1 and abs(x0 - x1) <= 1 and abs(y0 - y1) <= 1:  # and closing
            return pts[:, 1], pts[:, 0]
    elif len(pts) == 1:
        return pts[:, 1], pts[:, 0]
    return _line_pixels(pts)


def _points(polygon) -> np.ndarray:
    """``np.asarray(polygon, float).reshape(-1, 2)``, flattened without numpy's per-element
    shape discovery when the polygon is a sequence of (x, y) pairs."""
    if isinstance(polygon, Polygon):
        return polygon.to_array()
    try:
        if set(map(len, polygon)) <= {2}:
            return np.fromiter(itertools.chain.from_iterable(polygon), np.float64).reshape(-1, 2)
    except (TypeError, ValueError):
        pass
    return np.asarray(polygon, float).reshape(-1, 2)


def _shape_problem(shape: DrawnShape, h: int, w: int, pts: np.ndarray | None) -> str | None:
    """Why the primitive itself is invalid (outside the image, zero area), or None;
    ``pts`` is a contour's polygon as an array."""
    if shape.color is not None and shape.color not in COLORS and shape.kind != "text":
        return f"unknown colour {shape.color!r}"
    if shape.kind in ("box", "text", "point") and shape.bbox is None:
        return "has no bbox"
    if shape.bbox is not None and (problem := box_problem(shape.bbox, w, h)):
        return problem
    if shape.kind == "contour":
        if len(pts) < 3:
            return f"polygon has {len(pts)} vertices, need at least 3"
        x, y = np.ascontiguousarray(pts.T)  # contiguous columns: fast reductions
        if min(x.min(), y.min()) < -0.5 or x.max() > w - 0.5 or y.max() > h - 0.5:
            return f"polygon leaves the {w}x{h} image"
        if abs(np.dot(x, _next(y)) - np.dot(y, _next(x))) == 0:
            return "polygon has zero area"
    if shape.kind == "point":
        if shape.point is None:
            return "has no point"
        x, y = shape.point
        if not (0 <= x < w and 0 <= y < h):
            return f"point ({x}, {y}) lies outside the {w}x{h} image"
    if shape.kind == "mask":
        if shape.mask is None or shape.mask.counts is None:
            return "has no RLE mask"
        if tuple(shape.mask.size_hw) != (h, w):
            return f"mask is {shape.mask.size_hw} (HxW), image is {(h, w)}"
    if shape.kind not in ("box", "contour", "mask", "point", "text"):
        return f"unknown kind {shape.kind!r}"
    return None


Rect = tuple[int, int, int, int]  # x0, y0, x1, y1 (exclusive), inside the image


def _prepare(
    shape: DrawnShape, pts: np.ndarray | None, h: int, w: int, decoded: Any = None
) -> tuple[Rect | None, Any]:
    """The crop holding every pixel a valid ``shape`` may change (None: it may change none),
    and what :func:`_clear_allowed` needs to clear them. ``decoded`` is a mask shape's
    ``rle_decode_box`` of its mask when the caller has it already."""
    t = max(1, shape.thickness_px or 1)
    tol = TOLERANCE_PX
    if shape.kind == "box":
        x1, y1, x2, y2 = (int(round(v)) for v in shape.bbox)
        rect = (max(0, x1 - tol), max(0, y1 - tol), min(w, x2 + tol), min(h, y2 + tol))
        return rect, (x1, y1, x2, y2)
    if shape.kind == "contour":
        # outlines of masks touching the border run half a pixel outside it: clamp onto the image
        ipts = np.round(pts).astype(int)
        np.maximum(ipts, 0, out=ipts)
        np.minimum(ipts, (w - 1, h - 1), out=ipts)
        rows, cols = _line_cover(ipts)
        pad = math.floor(t / 2 + tol + 0.5)  # the allowed band's reach, >= the coverage reach
        # a segment's pixels lie in its end points' box: the line's box is the points' box
        cols_rows = np.ascontiguousarray(ipts.T)  # row-wise reductions: ~5x faster than axis=0
        (cmin, rmin), (cmax, rmax) = cols_rows.min(axis=1).tolist(), cols_rows.max(axis=1).tolist()
        x0, y0 = max(0, cmin - pad), max(0, rmin - pad)
        rect = (x0, y0, min(w, cmax + pad + 1), min(h, rmax + pad + 1))
        return rect, (rows, cols)
    if shape.kind == "mask":
        if decoded is None:
            decoded = rle_decode_box(shape.mask.size_hw, shape.mask.counts)
        return decoded  # the crop is the mask
    if shape.kind == "point":
        x, y = shape.point
        r = t + tol
        rect = (
            max(0, math.floor(x - r)),
            max(0, math.floor(y - r)),
            min(w, math.ceil(x + r) + 1),
            min(h, math.ceil(y + r) + 1),
        )
        return rect, None
    return None, None  # text: changes nothing


def _clear_allowed(
    shape: DrawnShape,
    rect: Rect | None,
    data: Any,
    rendered: np.ndarray,
    changed: np.ndarray,
    origin: tuple[int, int],
    channels: str = "rgb",
) -> float | None:
    """Zero the pixels ``shape`` may change in ``changed`` (a map of the image's changed
    pixels whose top-left pixel is ``origin`` (x, y) of the image, covering ``rect``); return
    the share of the shape's centre line that shows its colour (None: no line to check)."""
    t = max(1, shape.thickness_px or 1)
    tol = TOLERANCE_PX
    if rect is None:
        return None
    ox, oy = origin
    x0, y0, x1, y1 = rect
    window = changed[y0 - oy : y1 - oy, x0 - ox : x1 - ox]
    if shape.kind == "box":
        bx1, by1, bx2, by2 = data
        iy1, iy2 = by1 + t + tol, max(0, by2 - t - tol)
        ix1, ix2 = bx1 + t + tol, max(0, bx2 - t - tol)
        if iy2 > iy1 and ix2 > ix1:  # the hollow inside the band (within the image) stays
            hy1, hy2, hx1, hx2 = iy1 - y0, iy2 - y0, ix1 - x0, ix2 - x0
            window[:hy1] = 0
            window[hy2:] = 0
            window[hy1:hy2, :hx1] = 0
            window[hy1:hy2, hx2:] = 0
        else:
            window[...] = 0
        # centre line: the box's outermost ring of pixels
        crop = rendered[by1:by2, bx1:bx2]
        if crop.size == 0:
            return None
        painted = _painted(crop, shape.color, channels)
        inner = painted[1:-1, 1:-1]
        shown = cv2.countNonZero(painted) - (cv2.countNonZero(inner) if inner.size else 0)
        return shown / (painted.size - inner.size)
    if shape.kind == "contour":
        rows, cols = data
        line = np.zeros(window.shape[:2], np.uint8)
        line[rows - y0, cols - x0] = 1
        _zero_where(window, _within(line, t / 2 + tol + 0.5))
        # sub-pixel contour vertices round differently in cv2 and here: allow half a stroke + 1 px
        near = _within(_painted(rendered[y0:y1, x0:x1], shape.color, channels), t / 2 + tol)
        return cv2.countNonZero(cv2.bitwise_and(near, line)) / cv2.countNonZero(line)
    if shape.kind == "mask":
        _zero_where(window, data.view(np.uint8))
        return None
    if shape.kind == "point":
        x, y = shape.point
        r = t + tol
        if x == int(x) and y == int(y):  # a pixel centre: the offsets of a disc of radius r
            cx, cy = int(x) - r, int(y) - r  # the disc's top-left pixel
            disc = _point_disc(r)[y0 - cy : y1 - cy, x0 - cx : x1 - cx]
            _zero_where(window, disc)
        else:
            yy = np.arange(y0, y1)[:, None]
            xx = np.arange(x0, x1)[None, :]
            window[(xx - x) ** 2 + (yy - y) ** 2 <= r**2] = 0
        cy, cx = int(y), int(x)
        pixel = rendered[cy : cy + 1, cx : cx + 1]
        return 1.0 if _painted(pixel, shape.color, channels)[0, 0] else 0.0
    return None


@lru_cache(maxsize=64)
def _point_disc(r: int) -> np.ndarray:
    """uint8 map of the offsets ``(dx, dy)`` in ``[-r, r]`` with ``dx^2 + dy^2 <= r^2``."""
    d = np.arange(-r, r + 1)
    disc = (d[None, :] ** 2 + d[:, None] ** 2 <= r**2).astype(np.uint8)
    disc.flags.writeable = False
    return disc


def _zero_where(window: np.ndarray, where: np.ndarray) -> None:
    """``window[where != 0] = 0`` in place (uint8 maps of one size). Array minus itself, not
    ``bitwise_and`` with a scalar 0: cv2 takes a 1x1 array for a scalar there."""
    cv2.subtract(window, window, dst=window, mask=where)


def _union(rects: list[Rect]) -> Rect | None:
    if not rects:
        return None
    x0s, y0s, x1s, y1s = zip(*rects, strict=True)
    return min(x0s), min(y0s), max(x1s), max(y1s)


def _same_outside(clean: np.ndarray, rendered: np.ndarray, rect: Rect | None) -> bool:
    """Whether the images agree everywhere outside ``rect`` (max-difference norms of up to
    four bands: no per-pixel map is built)."""
    h, w = clean.shape[:2]
    x0, y0, x1, y1 = rect if rect is not None else (0, 0, 0, 0)
    bands = ((0, 0, w, y0), (0, y1, w, h), (0, y0, x0, y1), (x1, y0, w, y1))
    for bx0, by0, bx1, by1 in bands:
        if bx1 > bx0 and by1 > by0:
            a, b = clean[by0:by1, bx0:bx1], rendered[by0:by1, bx0:bx1]
            if cv2.norm(a, b, cv2.NORM_INF) != 0:
                return False
    return True


def check_alignment(
    clean: np.ndarray,
    rendered: np.ndarray,
    shapes: Sequence[DrawnShape],
    item_id: str,
    *,
    channels: str = "rgb",
    decoded: Sequence[Any] | None = None,
) -> list[str]:
    """Problems (each naming ``item_id``) where pixels and recorded shapes disagree; [] if none.

    ``shapes`` are those drawn on this one image. Text shapes (coord level) allow no change.
    Changed pixels are mapped only inside the union of the shapes' crops; outside it the two
    images must be equal (checked without a map). Only when some changed pixel is not allowed
    is the whole image mapped, to report how many there are and where.

    ``channels`` is the images' channel order (``rgb`` or ``bgr``). ``decoded`` (one entry per
    shape, None where unknown) hands over what a renderer already computed from the recorded
    geometry, so it is not parsed again: a contour's ``polygon`` as an ``(N, 2)`` float64
    array, a mask's ``rle_decode_box`` of its RLE (:attr:`RenderResult.decoded`). Each must
    equal what the shape records; the verdicts are those without it.
    """
    if clean.shape != rendered.shape or clean.dtype != rendered.dtype:
        return [
            f"{item_id}: rendered image {rendered.shape} {rendered.dtype} does not match "
            f"the clean image {clean.shape} {clean.dtype}"
        ]
    h, w = clean.shape[:2]
    problems: list[str] = []
    plans = []
    for i, shape in enumerate(shapes):
        known = decoded[i] if decoded is not None else None
        pts = None
        if shape.kind == "contour":
            pts = known if known is not None else _points(shape.polygon)
        if problem := _shape_problem(shape, h, w, pts):
            problems.append((i, f"{_name(item_id, i, shape)} {problem}"))
            continue
        plans.append((i, shape, *_prepare(shape, pts, h, w, known)))
    union = _union([rect for _, _, rect, _ in plans if rect is not None])
    full = None  # the changed-pixel map of the whole image, built only when needed
    if clean.ndim == 3 and clean.shape[2] == 3 and clean.dtype == np.uint8:
        x0, y0, x1, y1 = union or (0, 0, 0, 0)
        # per channel (255 where it differs): clearing a pixel clears its three channels, and
        # only whether any is left matters here
        changed = None
        if union:
            changed = cv2.compare(clean[y0:y1, x0:x1], rendered[y0:y1, x0:x1], cv2.CMP_NE)
        origin = (x0, y0)
    else:
        changed = full = _changed(clean, rendered)
        origin = (0, 0)
    for i, shape, rect, data in plans:
        shown = _clear_allowed(shape, rect, data, rendered, changed, origin, channels)
        if shown is not None and shown < MIN_COVERAGE:
            problems.append(
                (
                    i,
                    f"{_name(item_id, i, shape)}: only {shown:.0%} of its outline shows "
                    f"{shape.color} (expected at least {MIN_COVERAGE:.0%}); the drawing does "
                    "not match the shape",
                )
            )
    problems.sort(key=lambda p: p[0])  # at most one problem per shape, in shape order
    out = [text for _, text in problems]
    if full is None:
        if (changed is None or not cv2.countNonZero(changed.reshape(len(changed), -1))) and (
            _same_outside(clean, rendered, union)
        ):
            return out
        full = _changed(clean, rendered)  # map the whole image to describe the stray pixels
        for _, shape, rect, data in plans:
            _clear_allowed(shape, rect, data, rendered, full, (0, 0), channels)
    if cv2.countNonZero(full):
        ys, xs = np.nonzero(full)
        out.append(
            f"{item_id}: {int(ys.size)} changed pixels lie outside the recorded prompt "
            f"geometry (in x {xs.min()}..{xs.max()}, y {ys.min()}..{ys.max()}); "
            "the overlay and the question's geometry disagree"
        )
    return out


def _name(item_id: str, i: int, shape: DrawnShape) -> str:
    return f"{item_id}: {shape.kind} shape {i} ({shape.label!r}, {shape.color})"
