"""Check that a rendered prompt image differs from its clean image only where the recorded
geometry says, so the question text (written from the shapes) and the pixels cannot disagree.

Only the comparison of the two images touches every pixel (one cv2 pass). Each shape is then
checked on its own bounding crop: the pixels it may change are cleared from the changed-pixel
map, and its centre line's colour coverage is measured there. "Within distance r" of a line
(exact Euclidean) is a dilation by the disc ``dx^2 + dy^2 <= r^2`` (:func:`_disc`), which
equals thresholding a Euclidean distance transform at r; a contour's centre line is
rasterised by cv2 (8-connected, one pixel wide: each pixel within half a pixel of the exact
segment, which the band's one-pixel tolerance absorbs).

The render stage draws on a view of the image cut to the marks' reach and hands over only
that window's clean pixels (``origin``): no pixel outside the window can have changed, so
the window is all that is compared.

A contour is drawn into its own stroke buffer (:func:`render.base.buffer_stroke`): then
:func:`check_strokes` checks the buffer against the mask it outlines and the composited
image against the buffer, and no image crop is mapped, cleared or dilated.
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
from .base import COLORS, Stroke, channel_colors, composite

_ALL_LEVELS = 2**31 - 1  # drawContours' maxLevel: draw every contour given
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
        if pts.dtype == np.int32:  # traced vertices in cv2's (N, 1, 2) layout: exact int tests
            x, y, bw, bh = cv2.boundingRect(pts)
            if x < 0 or y < 0 or x + bw > w or y + bh > h:
                return f"polygon leaves the {w}x{h} image"
            if cv2.contourArea(pts) == 0:
                return "polygon has zero area"
            return None
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
        if pts.dtype == np.int32:  # traced vertices: inside the image (see _shape_problem)
            ipts = pts
        else:
            # outlines of masks touching the border run half a pixel outside it: clamp onto
            # the image
            ipts = np.round(pts).astype(np.int32)
            np.maximum(ipts, 0, out=ipts)
            np.minimum(ipts, (w - 1, h - 1), out=ipts)
        bx, by, bw, bh = cv2.boundingRect(ipts)
        pad = math.floor(t / 2 + tol + 0.5)  # the allowed band's reach, >= the coverage reach
        rect = (max(0, bx - pad), max(0, by - pad), min(w, bx + bw + pad), min(h, by + bh + pad))
        return rect, ipts
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
    occluders: Sequence[str] = (),
) -> float | None:
    """Zero the pixels ``shape`` may change in ``changed`` (a map of the image's changed
    pixels whose top-left pixel is ``origin`` (x, y) of the image, covering ``rect``); return
    the share of the shape's centre line that shows its colour (None: no line to check).
    A box's ring pixel painted in one of ``occluders`` (the colours of the shapes drawn after
    it) counts as shown: overlapping option boxes are drawn in order and cover each other."""
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
        for color in occluders:
            painted = cv2.bitwise_or(painted, _painted(crop, color, channels))
        inner = painted[1:-1, 1:-1]
        shown = cv2.countNonZero(painted) - (cv2.countNonZero(inner) if inner.size else 0)
        return shown / (painted.size - inner.size)
    if shape.kind == "contour":
        line = np.zeros(window.shape[:2], np.uint8)
        cv2.drawContours(line, [data], -1, 255, 1, cv2.LINE_8, None, _ALL_LEVELS, (-x0, -y0))
        _zero_where(window, _within(line, t / 2 + tol + 0.5))
        painted = _painted(rendered[y0:y1, x0:x1], shape.color, channels)
        n_line = cv2.countNonZero(line)
        exact = cv2.countNonZero(cv2.bitwise_and(painted, line)) / n_line
        if exact >= MIN_COVERAGE:
            return exact  # the share near the colour is at least this: the verdict is made
        # sub-pixel contour vertices round differently in cv2 and here: allow half a stroke + 1 px
        near = _within(painted, t / 2 + tol)
        return cv2.countNonZero(cv2.bitwise_and(near, line)) / n_line
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
    origin: tuple[int, int] | None = None,
) -> list[str]:
    """Problems (each naming ``item_id``) where pixels and recorded shapes disagree; [] if none.

    ``shapes`` are those drawn on this one image. Text shapes (coord level) allow no change.
    Changed pixels are mapped only inside the union of the shapes' crops; outside it the two
    images must be equal (checked without a map). Only when some changed pixel is not allowed
    is the whole image mapped, to report how many there are and where.

    ``origin`` (x, y): ``clean`` holds only a window of the clean image, whose top-left pixel
    is ``origin`` of ``rendered``, and the caller guarantees that ``rendered`` equals the clean
    image outside it (it drew on a view cut to the window: :func:`render.render_in_place`).
    Then only the window is compared.

    ``channels`` is the images' channel order (``rgb`` or ``bgr``). ``decoded`` (one entry per
    shape, None where unknown) hands over what a renderer already computed from the recorded
    geometry, so it is not parsed again: a contour's polygon as traced (an int32 ``(N, 1, 2)``
    array) or as an ``(N, 2)`` float64 array, a mask's ``rle_decode_box`` of its RLE
    (:attr:`RenderResult.decoded`). Each must equal what the shape records; the verdicts are
    those without it.
    """
    if origin is None:
        if clean.shape != rendered.shape or clean.dtype != rendered.dtype:
            return [
                f"{item_id}: rendered image {rendered.shape} {rendered.dtype} does not match "
                f"the clean image {clean.shape} {clean.dtype}"
            ]
    elif problem := _window_problem(clean, rendered, origin):
        return [f"{item_id}: {problem}"]
    h, w = rendered.shape[:2]
    problems, plans = _plan_shapes(shapes, decoded, item_id, h, w)
    rects = [rect for _, _, rect, _ in plans if rect is not None]
    if origin is not None:
        changed, at = _window_changes(clean, rendered, origin, rects)
        union = full = None
    else:
        changed, at, union, full = _image_changes(clean, rendered, rects)
    for i, shape, rect, data in plans:
        later = {s.color for s in shapes[i + 1 :] if s.color and s.color != shape.color}
        shown = _clear_allowed(
            shape, rect, data, rendered, changed, at, channels, tuple(sorted(later))
        )
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
    if origin is not None:
        if changed is not None and cv2.countNonZero(changed.reshape(len(changed), -1)):
            left = changed.reshape(changed.shape[0], changed.shape[1], -1).max(axis=2)
            out.append(_stray(item_id, left, at))
        return out
    return out + _stray_in_image(clean, rendered, plans, changed, union, full, item_id, channels)


def _plan_shapes(shapes, decoded, item_id: str, h: int, w: int) -> tuple[list, list]:
    """``(problems, plans)``: a shape that cannot be on the image is a problem (with its
    index); the others are planned for the check (their crop and decoded geometry)."""
    problems: list = []
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
    return problems, plans


def _image_changes(clean: np.ndarray, rendered: np.ndarray, rects: list):
    """``(changed, at, union, full)``: the changed-pixel map over the union of the shapes'
    crops and its top-left pixel; ``full`` is the whole image's map where it had to be made
    (not an RGB uint8 image), else None."""
    union = _union(rects)
    if clean.ndim == 3 and clean.shape[2] == 3 and clean.dtype == np.uint8:
        x0, y0, x1, y1 = union or (0, 0, 0, 0)
        # per channel (255 where it differs): clearing a pixel clears its three channels,
        # and only whether any is left matters here
        changed = None
        if union:
            changed = cv2.compare(clean[y0:y1, x0:x1], rendered[y0:y1, x0:x1], cv2.CMP_NE)
        return changed, (x0, y0), union, None
    full = _changed(clean, rendered)
    return full, (0, 0), union, full


def _stray_in_image(clean, rendered, plans, changed, union, full, item_id, channels) -> list:
    """The changed pixels no shape allows, anywhere in the image (mapped whole only when
    some are left)."""
    if full is None:
        if (changed is None or not cv2.countNonZero(changed.reshape(len(changed), -1))) and (
            _same_outside(clean, rendered, union)
        ):
            return []
        full = _changed(clean, rendered)  # map the whole image to describe the stray pixels
        for _, shape, rect, data in plans:
            _clear_allowed(shape, rect, data, rendered, full, (0, 0), channels)
    return [_stray(item_id, full, (0, 0))] if cv2.countNonZero(full) else []


def _window_problem(clean: np.ndarray, rendered: np.ndarray, origin: tuple[int, int]) -> str:
    """Why ``clean`` cannot be the window of ``rendered`` at ``origin`` ('' if it can)."""
    ox, oy = origin
    ch, cw = clean.shape[:2]
    h, w = rendered.shape[:2]
    if (
        clean.shape[2:] != rendered.shape[2:]
        or clean.dtype != rendered.dtype
        or ox < 0
        or oy < 0
        or ox + cw > w
        or oy + ch > h
    ):
        return (
            f"clean window {clean.shape} {clean.dtype} at {origin} does not fit the rendered "
            f"image {rendered.shape} {rendered.dtype}"
        )
    return ""


def _window_changes(
    clean: np.ndarray, rendered: np.ndarray, origin: tuple[int, int], rects: list[Rect]
) -> tuple[np.ndarray | None, tuple[int, int]]:
    """The changed-pixel map over the window and the shapes' crops (zero outside the window,
    where nothing can have changed), and its top-left pixel; None when both are empty."""
    ox, oy = origin
    ch, cw = clean.shape[:2]
    window = (ox, oy, ox + cw, oy + ch)
    union = _union(rects + [window] if ch and cw else rects)
    if union is None:
        return None, (0, 0)
    x0, y0, x1, y1 = union
    seen = rendered[oy : oy + ch, ox : ox + cw]
    if clean.ndim == 3 and clean.shape[2] == 3 and clean.dtype == np.uint8:
        differs = cv2.compare(clean, seen, cv2.CMP_NE)  # 255 per differing channel
    else:
        differs = _changed(clean, seen)
    if union == window:
        return differs, (x0, y0)
    # a crop reaches past the window: map their union (pixels outside the window are equal)
    changed = np.zeros((y1 - y0, x1 - x0, *differs.shape[2:]), np.uint8)
    changed[oy - y0 : oy - y0 + ch, ox - x0 : ox - x0 + cw] = differs
    return changed, (x0, y0)


def _stray(item_id: str, left: np.ndarray, at: tuple[int, int]) -> str:
    """The problem naming how many changed pixels ``left`` (a map whose top-left pixel is
    ``at`` of the image) still holds and where."""
    ys, xs = np.nonzero(left)
    xs, ys = xs + at[0], ys + at[1]
    return (
        f"{item_id}: {int(ys.size)} changed pixels lie outside the recorded prompt "
        f"geometry (in x {xs.min()}..{xs.max()}, y {ys.min()}..{ys.max()}); "
        "the overlay and the question's geometry disagree"
    )


def _name(item_id: str, i: int, shape: DrawnShape) -> str:
    return f"{item_id}: {shape.kind} shape {i} ({shape.label!r}, {shape.color})"


# a mask pixel with a background pixel among its 4 neighbours is on the mask's edge
_CROSS = cv2.getStructuringElement(cv2.MORPH_CROSS, (3, 3))


def check_strokes(
    clean: np.ndarray,
    rendered: np.ndarray,
    strokes: Sequence[Stroke],
    item_id: str,
    *,
    origin: tuple[int, int],
    channels: str = "rgb",
) -> list[str]:
    """:func:`check_alignment` for marks drawn into their own stroke buffers
    (:attr:`render.base.InPlace.strokes`, every one with ``pixels``): the same rule, checked
    at the cost of the strokes rather than the image's window. Problems read as
    :func:`check_alignment`'s, each naming ``item_id``: those of
    :func:`check_stroke_buffers`, then those of :func:`check_composite`."""
    return check_stroke_buffers(strokes, item_id, channels=channels) + check_composite(
        clean, rendered, strokes, item_id, origin=origin
    )


def check_stroke_buffers(
    strokes: Sequence[Stroke], item_id: str, *, channels: str = "rgb"
) -> list[str]:
    """Each stroke buffer against its geometry, before it is composited (no image needed):
    its pixels lie within the stroke's width of the edge of the mask it outlines, none
    elsewhere, and cover that edge; the shapes it records span the mask's box, in the colour
    it paints (in ``channels`` order)."""
    out: list[str] = []
    first = 0
    for stroke in strokes:
        out += _stroke_problems(stroke, item_id, first, channels)
        first += len(stroke.shapes)
    return out


def check_composite(
    clean: np.ndarray,
    rendered: np.ndarray,
    strokes: Sequence[Stroke],
    item_id: str,
    *,
    origin: tuple[int, int],
) -> list[str]:
    """The composited image against the stroke buffers: ``clean`` is the window of
    ``rendered`` at ``origin`` before compositing (:attr:`render.base.InPlace.before`);
    every changed pixel lies under a buffer, and every buffer pixel shows its stroke's
    colour (where a later stroke covers it, that stroke's)."""
    if problem := _window_problem(clean, rendered, origin):
        return [f"{item_id}: {problem}"]
    return _composite_problems(clean, rendered, strokes, item_id, origin)


def _stroke_problems(stroke: Stroke, item_id: str, first: int, channels: str) -> list[str]:
    """Why the stroke buffer of a contour does not outline its mask ([] if it does);
    ``first`` is the index of its first shape among the item's.

    The mask's edge is its pixels with a background 4-neighbour: the pixels the traced
    outlines run through (Suzuki-Abe border following, which ``cv2.findContours`` runs:
    with 8-connected components a border pixel is one with a background 4-neighbour), so it
    is the centre line :func:`check_alignment` draws from the polygon, found from the mask
    instead. A stroke of width ``t`` paints the whole edge and nothing outside the band of
    :func:`check_alignment` around it (``t / 2 + TOLERANCE_PX + 0.5``)."""
    pixels, (rx0, ry0, rx1, ry1) = stroke.pixels, stroke.reach
    shapes = stroke.shapes
    shape = shapes[0]
    if stroke.outlined is None or shape.kind != "contour":
        return [f"{_name(item_id, first, shape)}: a stroke buffer with no mask to check it by"]
    box, crop = stroke.outlined
    x0, y0, x1, y1 = box
    ch, cw = crop.shape
    if (
        pixels.shape != (ry1 - ry0, rx1 - rx0)
        or (y1 - y0, x1 - x0) != (ch, cw)
        or not (rx0 <= x0 and ry0 <= y0 and x1 <= rx1 and y1 <= ry1)
    ):
        return [f"{_name(item_id, first, shape)}: its stroke buffer does not hold its mask"]
    out = []
    if len(shapes) == 1:
        span = tuple(shape.bbox)
    else:
        bx0, by0, bx1, by1 = zip(*(s.bbox for s in shapes), strict=True)
        span = (min(bx0), min(by0), max(bx1), max(by1))
    if span != box:  # the outer outlines run through the mask's outermost pixels
        out.append(f"{_name(item_id, first, shape)}: its outlines span {span}, its mask {box}")
    if stroke.color_px != channel_colors(channels).get(shape.color) or any(
        s.color != shape.color for s in shapes
    ):
        out.append(f"{_name(item_id, first, shape)}: its stroke paints {stroke.color_px}")
    # the mask in the buffer's pixels; outside the buffer (the image) is background
    mask = np.zeros(pixels.shape, np.uint8)
    mask[y0 - ry0 : y1 - ry0, x0 - rx0 : x1 - rx0] = crop.view(np.uint8)
    inner = cv2.erode(mask, _CROSS, borderType=cv2.BORDER_CONSTANT, borderValue=0)
    edge = cv2.subtract(mask, inner)
    t = max(1, shape.thickness_px or 1)
    stray = cv2.subtract(pixels, _within(edge, t / 2 + TOLERANCE_PX + 0.5))
    if cv2.countNonZero(stray):
        out.append(_stray(item_id, stray, (rx0, ry0)))
    n_edge = cv2.countNonZero(edge)
    shown = 1 - cv2.countNonZero(cv2.subtract(edge, pixels)) / n_edge
    if shown < MIN_COVERAGE:
        out.append(
            f"{_name(item_id, first, shape)}: its stroke covers only {shown:.0%} of the mask's "
            f"edge (expected at least {MIN_COVERAGE:.0%}); the drawing does not match the shape"
        )
    return out


def _composite_problems(
    clean: np.ndarray,
    rendered: np.ndarray,
    strokes: Sequence[Stroke],
    item_id: str,
    origin: tuple[int, int],
) -> list[str]:
    """Whether the window of ``rendered`` at ``origin`` is ``clean`` with the strokes
    composited in order: every changed pixel lies under a buffer, and every buffer pixel
    shows its stroke's colour (where a later stroke covers it, that stroke's). The window
    expected is built from ``clean`` and the buffers and compared in one pass; only when
    they differ are the pixels mapped to say where."""
    ox, oy = origin
    wh, ww = clean.shape[:2]
    seen = rendered[oy : oy + wh, ox : ox + ww]
    expected = clean.copy()
    for stroke in strokes:
        x0, y0, x1, y1 = stroke.reach
        if not (ox <= x0 and oy <= y0 and x1 <= ox + ww and y1 <= oy + wh):
            return [f"{item_id}: a stroke's reach {stroke.reach} leaves the checked window"]
        composite(expected, stroke.pixels, stroke.color_px, x0 - ox, y0 - oy)
    if cv2.norm(expected, seen, cv2.NORM_INF) == 0:
        return []
    under = np.zeros((wh, ww), np.uint8)
    for stroke in strokes:
        x0, y0, x1, y1 = stroke.reach
        part = under[y0 - oy : y1 - oy, x0 - ox : x1 - ox]
        cv2.bitwise_or(part, stroke.pixels, dst=part)
    out = []
    stray = _changed(clean, seen)
    _zero_where(stray, under)
    if cv2.countNonZero(stray):
        out.append(_stray(item_id, stray, origin))
    wrong = _changed(expected, seen)  # under a stroke (the rest is the stray pixels above)
    first = 0
    for k, stroke in enumerate(strokes):
        x0, y0, x1, y1 = stroke.reach
        part = wrong[y0 - oy : y1 - oy, x0 - ox : x1 - ox]
        missing = cv2.bitwise_and(part, part, mask=stroke.pixels)
        for later in strokes[k + 1 :]:  # what a later stroke covers is that stroke's
            lx0, ly0, lx1, ly1 = later.reach
            ix0, iy0, ix1, iy1 = max(x0, lx0), max(y0, ly0), min(x1, lx1), min(y1, ly1)
            if ix1 > ix0 and iy1 > iy0:
                _zero_where(
                    missing[iy0 - y0 : iy1 - y0, ix0 - x0 : ix1 - x0],
                    later.pixels[iy0 - ly0 : iy1 - ly0, ix0 - lx0 : ix1 - lx0],
                )
        if n := cv2.countNonZero(missing):
            shape = stroke.shapes[0]
            out.append(
                f"{_name(item_id, first, shape)}: {n} pixels under its stroke do not show "
                f"{shape.color}; the overlay and the question's geometry disagree"
            )
        first += len(stroke.shapes)
    return out or [f"{item_id}: the image does not show its stroke buffers composited"]
