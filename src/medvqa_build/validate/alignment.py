"""Check that a rendered prompt image differs from its clean image only where the recorded
geometry says, so the question text (written from the shapes) and the pixels cannot disagree."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import ndimage
from skimage import draw

from ..geometry import box_problem, rle_decode
from ..records import DrawnShape
from ..render.base import COLORS

TOLERANCE_PX = 1  # slack around a stroke for rounding of sub-pixel geometry
MIN_COVERAGE = 0.5  # share of a stroke's centre line that must show its colour (overlaps hide some)


def _box_allowed(shape: DrawnShape, h: int, w: int) -> np.ndarray:
    t, tol = max(1, shape.thickness_px or 1), TOLERANCE_PX
    x1, y1, x2, y2 = (int(round(v)) for v in shape.bbox)
    allowed = np.zeros((h, w), bool)
    allowed[max(0, y1 - tol) : y2 + tol, max(0, x1 - tol) : x2 + tol] = True
    iy1, iy2 = y1 + t + tol, max(0, y2 - t - tol)
    ix1, ix2 = x1 + t + tol, max(0, x2 - t - tol)
    if iy2 > iy1 and ix2 > ix1:
        allowed[iy1:iy2, ix1:ix2] = False
    return allowed


def _box_line(shape: DrawnShape, h: int, w: int) -> np.ndarray:
    x1, y1, x2, y2 = (int(round(v)) for v in shape.bbox)
    line = np.zeros((h, w), bool)
    line[y1:y2, x1:x2] = True
    line[y1 + 1 : y2 - 1, x1 + 1 : x2 - 1] = False
    return line


def _polyline(points: Sequence[Sequence[float]], h: int, w: int) -> np.ndarray:
    # outlines of masks touching the border run half a pixel outside it: clamp onto the image
    pts = np.round(np.asarray(points, float)).astype(int)
    pts = np.clip(pts, 0, [w - 1, h - 1])
    line = np.zeros((h, w), bool)
    for (xa, ya), (xb, yb) in zip(pts, np.roll(pts, -1, axis=0), strict=True):
        rr, cc = draw.line(ya, xa, yb, xb)
        line[rr, cc] = True
    return line


def _near(line: np.ndarray, radius: float) -> np.ndarray:
    return ndimage.distance_transform_edt(~line) <= radius


def _coverage(rendered: np.ndarray, line: np.ndarray, shape: DrawnShape) -> float:
    """Share of the centre line with a pixel of the shape's colour within the stroke's reach."""
    painted = np.all(rendered == COLORS[shape.color], axis=-1)
    if shape.kind != "contour":
        return float(painted[line].mean())
    # sub-pixel contour vertices round differently in cv2 and here: allow half a stroke + 1 px
    reach = max(1, shape.thickness_px or 1) / 2 + TOLERANCE_PX
    return float((ndimage.distance_transform_edt(~painted)[line] <= reach).mean())


def _shape_problem(shape: DrawnShape, h: int, w: int) -> str | None:
    """Why the primitive itself is invalid (outside the image, zero area), or None."""
    if shape.color is not None and shape.color not in COLORS and shape.kind != "text":
        return f"unknown colour {shape.color!r}"
    if shape.kind in ("box", "text", "point") and shape.bbox is None:
        return "has no bbox"
    if shape.bbox is not None and (problem := box_problem(shape.bbox, w, h)):
        return problem
    if shape.kind == "contour":
        pts = np.asarray(shape.polygon, float).reshape(-1, 2)
        if len(pts) < 3:
            return f"polygon has {len(pts)} vertices, need at least 3"
        if pts.min() < -0.5 or (pts[:, 0] > w - 0.5).any() or (pts[:, 1] > h - 0.5).any():
            return f"polygon leaves the {w}x{h} image"
        x, y = pts[:, 0], pts[:, 1]
        if abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) == 0:
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


def _allowed_and_line(shape: DrawnShape, h: int, w: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Pixels the shape may change, and the centre line that must show its colour (or None)."""
    t = max(1, shape.thickness_px or 1)
    if shape.kind == "box":
        return _box_allowed(shape, h, w), _box_line(shape, h, w)
    if shape.kind == "contour":
        line = _polyline(shape.polygon, h, w)
        return _near(line, t / 2 + TOLERANCE_PX + 0.5), line
    if shape.kind == "mask":
        return rle_decode(shape.mask.size_hw, shape.mask.counts), None
    if shape.kind == "point":
        x, y = shape.point
        yy, xx = np.ogrid[:h, :w]
        allowed = (xx - x) ** 2 + (yy - y) ** 2 <= (t + TOLERANCE_PX) ** 2
        centre = np.zeros((h, w), bool)
        centre[int(y), int(x)] = True
        return allowed, centre
    return np.zeros((h, w), bool), None


def check_alignment(
    clean: np.ndarray, rendered: np.ndarray, shapes: Sequence[DrawnShape], item_id: str
) -> list[str]:
    """Problems (each naming ``item_id``) where pixels and recorded shapes disagree; [] if none.

    ``shapes`` are those drawn on this one image. Text shapes (coord level) allow no change.
    """
    if clean.shape != rendered.shape or clean.dtype != rendered.dtype:
        return [
            f"{item_id}: rendered image {rendered.shape} {rendered.dtype} does not match "
            f"the clean image {clean.shape} {clean.dtype}"
        ]
    h, w = clean.shape[:2]
    problems: list[str] = []
    allowed = np.zeros((h, w), bool)
    for i, shape in enumerate(shapes):
        name = f"{item_id}: {shape.kind} shape {i} ({shape.label!r}, {shape.color})"
        if problem := _shape_problem(shape, h, w):
            problems.append(f"{name} {problem}")
            continue
        shape_allowed, line = _allowed_and_line(shape, h, w)
        allowed |= shape_allowed
        if line is not None and line.any():
            shown = _coverage(rendered, line, shape)
            if shown < MIN_COVERAGE:
                problems.append(
                    f"{name}: only {shown:.0%} of its outline shows {shape.color} "
                    f"(expected at least {MIN_COVERAGE:.0%}); the drawing does not match the shape"
                )
    changed = np.any(clean != rendered, axis=-1) if clean.ndim == 3 else clean != rendered
    stray = changed & ~allowed
    if stray.any():
        ys, xs = np.nonzero(stray)
        problems.append(
            f"{item_id}: {int(stray.sum())} changed pixels lie outside the recorded prompt "
            f"geometry (in x {xs.min()}..{xs.max()}, y {ys.min()}..{ys.max()}); "
            "the overlay and the question's geometry disagree"
        )
    return problems
