"""Pure geometry on masks and boxes in clean-image pixels.

Boxes are ``[x1, y1, x2, y2]`` with x2/y2 exclusive (pixel-edge coordinates, as COCO).
Masks are boolean ``(H, W)`` arrays; RLE is COCO's uncompressed form (column-major runs
starting with a run of zeros), so it interoperates with pycocotools.
"""

from __future__ import annotations

import itertools
import math
import re
from array import array
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import cv2
import numpy as np
from skimage import measure

from .vocab import COORD_FORMATS

BoxXYXY = tuple[float, float, float, float]


def mask_to_xyxy(mask: np.ndarray) -> BoxXYXY | None:
    """Tight box around the non-zero pixels (x2/y2 exclusive); ``None`` for an empty mask."""
    rect = _nonzero_rect(mask)
    if rect is not None:
        x, y, w, h = rect
        return None if w == 0 else (float(x), float(y), float(x + w), float(y + h))
    ys, xs = np.nonzero(mask)
    if xs.size == 0:
        return None
    return (float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1))


def _nonzero_rect(mask) -> tuple[int, int, int, int] | None:
    """``(x, y, w, h)`` of the non-zero pixels of a 2-D bool/uint8 array with C-ordered rows,
    by cv2 (one pass, no index arrays; ``w == 0`` when empty); ``None`` for other arrays."""
    if not isinstance(mask, np.ndarray) or mask.ndim != 2 or mask.dtype not in _U8_LIKE:
        return None
    if mask.size == 0 or mask.strides[1] != 1 or mask.strides[0] < mask.shape[1]:
        return None
    return cv2.boundingRect(mask.view(np.uint8))


_U8_LIKE = (np.dtype(bool), np.dtype(np.uint8))


def mask_components(mask: np.ndarray, min_area_px: int = 1) -> list[np.ndarray]:
    """Connected components (8-connectivity) of a binary mask, largest first, ties by position."""
    return [component for component, _ in components_with_boxes(mask, min_area_px)]


def components_with_boxes(
    mask: np.ndarray, min_area_px: int = 1
) -> list[tuple[np.ndarray, BoxXYXY]]:
    """Each connected component (8-connectivity, largest first) with its xyxy box (x2/y2
    exclusive), the box taken from skimage's regionprops rather than a second scan."""
    labelled = measure.label(mask > 0, connectivity=2)
    props = [p for p in measure.regionprops(labelled) if p.area >= min_area_px]
    props.sort(key=lambda p: (-p.area, p.bbox))
    out = []
    for p in props:
        r0, c0, r1, c1 = p.bbox  # rows/cols, max exclusive
        out.append((labelled == p.label, (float(c0), float(r0), float(c1), float(r1))))
    return out


def mask_to_contours(mask: np.ndarray) -> list[np.ndarray]:
    """Outlines of a mask as (N, 2) arrays of (x, y) pixel centres, closed (last = first).

    Exactly ``skimage.measure.find_contours`` at level 0.5 on the zero-padded mask (same
    vertices, order, start points and contour order; foreground 4-connected, holes included),
    computed by :func:`_marching_squares` on the mask's bounding crop only.
    """
    binary = np.asarray(mask)
    if binary.dtype != bool:
        binary = binary > 0
    if binary.ndim != 2:
        padded = np.pad(binary, 1).astype(np.uint8)
        contours = measure.find_contours(padded, 0.5)
        return [np.stack([c[:, 1] - 1, c[:, 0] - 1], axis=1) for c in contours]
    rect = _nonzero_rect(binary)
    if rect is None:  # rows not laid out for cv2 (transposed, reversed): copy them
        binary = np.array(binary, order="C")
        rect = _nonzero_rect(binary)
    if rect is None or rect[2] == 0:
        return []
    x, y, w, h = rect
    return crop_contours(binary[y : y + h, x : x + w], x, y)


def crop_contours(crop: np.ndarray, x0: int, y0: int) -> list[np.ndarray]:
    """:func:`mask_to_contours` of a mask that is False outside ``crop`` (bool), whose
    top-left pixel sits at ``(x0, y0)``."""
    h, w = crop.shape
    padded = np.zeros((h + 2, w + 2), bool)
    padded[1:-1, 1:-1] = crop
    return _marching_squares(padded, x0 - 1, y0 - 1)


# Marching-squares segments (from, to) per square case, as skimage's _get_contour_segments
# emits them at level 0.5 with vertex_connect_high=False (case bits: 1 ul, 2 ur, 4 ll, 8 lr).
# Vertices: T(op), B(ottom) = horizontal edge midpoints, L(eft), R(ight) = vertical ones.
_SEGMENTS = {
    1: [("T", "L")],
    2: [("R", "T")],
    3: [("R", "L")],
    4: [("L", "B")],
    5: [("T", "B")],
    6: [("R", "T"), ("L", "B")],
    7: [("R", "B")],
    8: [("B", "R")],
    9: [("T", "L"), ("B", "R")],
    10: [("B", "T")],
    11: [("B", "L")],
    12: [("L", "R")],
    13: [("T", "R")],
    14: [("L", "T")],
}


@lru_cache(maxsize=256)
def _segment_tables(width: int) -> tuple[np.ndarray, ...]:
    """Vertex-id offsets from a square's base id ``2 * (r * width + c)`` for its first and
    second segment: even ids are horizontal edge midpoints ``(r, c + 0.5)``, odd ids vertical
    edge midpoints ``(r + 0.5, c)``."""
    offset = {"T": 0, "L": 1, "R": 3, "B": 2 * width}
    tables = np.zeros((4, 16), np.int64)
    for case, segments in _SEGMENTS.items():
        for k, (a, b) in enumerate(segments):
            tables[2 * k, case], tables[2 * k + 1, case] = offset[a], offset[b]
    tables.flags.writeable = False
    return tuple(tables)


def _marching_squares(padded: np.ndarray, x_off: int = 0, y_off: int = 0) -> list[np.ndarray]:
    """``find_contours(padded, 0.5)`` of a bool array whose border is all False, as closed
    ``(col + x_off, row + y_off)`` outlines.

    skimage joins the segments in scan order, so a closed outline lists its segments in chain
    order starting at the end point of its last segment in scan order, and outlines come in
    scan order of their first segment; both are reproduced here (the chains are followed in
    Python: one list step per outline vertex).
    """
    rows, width = padded.shape
    flat = np.ascontiguousarray(padded).view(np.uint8).reshape(-1)
    # the case of the square whose top-left pixel is flat[k] (bits: 1 ul, 2 ur, 4 ll, 8 lr);
    # a square that wraps past the end of a row sees only border pixels: case 0, like those
    # outside. k is then the square's scan-order index, and the base of its vertex ids is 2k.
    if flat.size > 2 * width:
        pairs = _scale_add(flat[width:], 4, flat[:-width])  # ul + 4 ll, per pixel of a row
        case = _scale_add(pairs[1:], 2, pairs[:-1])
    else:
        case = np.zeros(0, np.uint8)
    base = np.flatnonzero((case - 1) < 14)  # cases 1..14 (uint8: 0 wraps to 255)
    if base.size == 0:
        return []
    cases = case[base]
    base <<= 1
    f1, t1, f2, t2 = _segment_tables(width)
    frm, to = base + f1.take(cases), base + t1.take(cases)
    two = np.flatnonzero(f2.take(cases))  # saddles (cases 6 and 9): a second segment each
    if two.size:
        at = np.arange(base.size + two.size)
        first = np.delete(at, two + np.arange(1, two.size + 1))  # each square's first segment
        second = first[two] + 1
        frm, to = np.empty_like(at), np.empty_like(at)
        frm[first], to[first] = base + f1[cases], base + t1[cases]
        frm[second], to[second] = base[two] + f2[cases[two]], base[two] + t2[cases[two]]
    n = frm.size
    where = np.empty(2 * rows * width, np.int32 if n < 2**31 else np.int64)
    where[frm] = np.arange(n, dtype=where.dtype)
    nxt = where.take(to).tolist()  # the segment starting where each one ends
    orders = []
    seen = None
    start = covered = 0
    while True:  # in scan order: outlines come out ordered by their first segment
        chain = [start]
        add = chain.append
        s = nxt[start]
        while s != start:
            add(s)
            s = nxt[s]
        j = chain.index(max(chain)) + 1  # the last segment in scan order closes the outline
        order = chain[j:] + chain[:j]
        order.append(order[0])
        orders.append(order)
        covered += len(chain)
        if covered == n:
            break
        if seen is None:
            seen = bytearray(n)
            for s in itertools.chain.from_iterable(orders):
                seen[s] = 1
        else:
            for s in chain:
                seen[s] = 1
        start = seen.find(0, start + 1)  # the first segment of the next outline
    ids = frm.take(orders[0] if len(orders) == 1 else list(itertools.chain(*orders)))
    # id = 2 * (row * width + col) + odd: odd ids are vertical edges (row + 0.5, col), even
    # ones horizontal edges (row, col + 0.5)
    row, rest = np.divmod(ids, 2 * width)
    points = _vertex_offsets(width).take(rest, axis=0)
    points[:, 1] += row
    points += (x_off, y_off)
    if len(orders) == 1:
        return [points]
    return np.split(points, np.cumsum([len(o) for o in orders])[:-1])


def _scale_add(a: np.ndarray, factor: int, b: np.ndarray) -> np.ndarray:
    """``a * factor + b`` of flat uint8 arrays whose results stay below 256 (cv2: one pass)."""
    return cv2.scaleAdd(a, float(factor), b).reshape(-1)


@lru_cache(maxsize=256)
def _vertex_offsets(width: int) -> np.ndarray:
    """``(x, y)`` of vertex ``id`` relative to its row, for ``id % (2 * width)``."""
    rest = np.arange(2 * width)
    odd = rest & 1
    table = np.stack([(rest >> 1) + 0.5 * (1 - odd), 0.5 * odd], axis=1)
    table.flags.writeable = False
    return table


def rle_encode(mask: np.ndarray) -> tuple[tuple[int, int], tuple[int, ...]]:
    """COCO uncompressed RLE of a binary mask: ``(size_hw, counts)``.

    Runs are counted over the column-major (Fortran) order, starting with a run of zeros
    (possibly empty), exactly as pycocotools does. Only the columns between the first and
    last non-zero pixel are scanned (the rest are whole zero runs).
    """
    h, w = (int(v) for v in mask.shape[:2])
    rect = _nonzero_rect(mask)
    if rect is not None and rect[2] == 0:
        return (h, w), (h * w,)
    x0, x1 = (rect[0], rect[0] + rect[2]) if rect is not None else (0, w)
    block = np.asarray(mask)[:, x0:x1]
    if rect is not None:
        flat = cv2.transpose(block.view(np.uint8)).reshape(-1)
        flat = flat != 0
    else:
        flat = np.ascontiguousarray(block.T).reshape(-1) != 0
    if flat.size == 0:
        return (h, w), ()
    flat = flat.view(np.uint8)
    change = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    counts = np.diff(np.concatenate(([0], change, [flat.size])))
    if flat[0]:
        counts = np.concatenate(([0], counts))
    counts = counts.tolist()
    if x0:
        counts[0] += x0 * h
    if x1 < w:
        if len(counts) % 2:  # ends on a run of zeros
            counts[-1] += (w - x1) * h
        else:
            counts.append((w - x1) * h)
    return (h, w), tuple(counts)


def rle_decode(size_hw: Sequence[int], counts: Sequence[int]) -> np.ndarray:
    """Inverse of :func:`rle_encode`: a C-ordered bool ``(h, w)`` array."""
    h, w = int(size_hw[0]), int(size_hw[1])
    box, crop = rle_decode_box(size_hw, counts)
    mask = np.zeros((h, w), bool)
    if box is not None:
        x0, y0, x1, y1 = box
        mask[y0:y1, x0:x1] = crop
    return mask


def rle_decode_box(
    size_hw: Sequence[int], counts: Sequence[int]
) -> tuple[tuple[int, int, int, int] | None, np.ndarray]:
    """The tight box ``(x0, y0, x1, y1)`` (x1/y1 exclusive) of an RLE mask's pixels and the
    mask cropped to it (C-ordered bool), without building the whole mask; ``(None, empty)``
    for an empty mask. Raises ValueError as :func:`rle_decode` does."""
    h, w = int(size_hw[0]), int(size_hw[1])
    if isinstance(counts, array) and counts.itemsize == 4 and counts.typecode in "il":
        runs = np.frombuffer(counts, np.int32)  # packed runs (records.RLECounts): no copy
    elif isinstance(counts, (array, list, tuple)) and len(counts) <= _FEW_RUNS:
        try:
            return _decode_box_few(h, w, array("q", counts))
        except TypeError:  # not all ints: numpy converts them, or says why not
            runs = np.asarray(counts, dtype=np.int64).reshape(-1)
    else:
        runs = np.asarray(counts, dtype=np.int64).reshape(-1)
    ends = np.cumsum(runs, dtype=np.int64)  # each run's end (exclusive) in column-major order
    total = int(ends[-1]) if ends.size else 0
    if total != h * w:
        raise ValueError(f"RLE counts sum to {total}, expected {h * w} for size {h}x{w}")
    if runs.size and runs.min() < 0:
        np.repeat(np.zeros(runs.size, np.uint8), runs)  # raises numpy's own ValueError
    ones = np.flatnonzero(runs[1::2])  # the non-empty runs of ones, as k of runs[2k + 1]
    if ones.size == 0:
        return None, np.zeros((0, 0), bool)
    i0, i1 = 2 * int(ones[0]), 2 * int(ones[-1]) + 1  # zero run before the first, last ones run
    start, end = int(ends[i0]), int(ends[i1])
    c0, c1 = start // h, (end - 1) // h + 1
    # expand only columns c0..c1-1: runs i0..i1, the outer zero runs cut at those columns
    sub = np.empty(i1 - i0 + 2, np.int64)
    sub[0] = start - c0 * h
    sub[1:-1] = runs[i0 + 1 : i1 + 1]
    sub[-1] = c1 * h - end
    return _crop_columns(sub, h, c0, c1)


def _crop_columns(sub, h: int, c0: int, c1: int) -> tuple[tuple[int, int, int, int], np.ndarray]:
    """Expand the runs ``sub`` (columns ``c0..c1-1``, each ``h`` tall, starting with zeros)
    and cut the block to its selected rows: the box and the C-ordered bool crop."""
    n = len(sub)
    values = _ALTERNATING[:n] if n <= _ALTERNATING.size else _alternating(n)
    columns = np.repeat(values, sub).reshape(c1 - c0, h)
    r0, _, rows, _ = cv2.boundingRect(columns)  # the selected rows: x of the column-major block
    crop = cv2.transpose(columns[:, r0 : r0 + rows]).view(bool)
    return (c0, r0, c1, r0 + rows), crop


# An outline's mask has a few hundred runs: Python sums over them beat numpy's fixed cost per
# call (several microseconds each) ten times over
_FEW_RUNS = 2048


def _decode_box_few(h: int, w: int, runs: array) -> tuple[tuple[int, int, int, int] | None, Any]:
    """:func:`rle_decode_box` for a short list of runs, the bookkeeping in Python ints."""
    total = sum(runs)
    if total != h * w:
        raise ValueError(f"RLE counts sum to {total}, expected {h * w} for size {h}x{w}")
    if runs and min(runs) < 0:
        np.repeat(np.zeros(len(runs), np.uint8), runs)  # raises numpy's own ValueError
    n = len(runs)
    first = next((i for i in range(1, n, 2) if runs[i]), 0)
    if not first:
        return None, np.zeros((0, 0), bool)
    last = next(i for i in range(n - 1 if n % 2 == 0 else n - 2, 0, -2) if runs[i])
    start = sum(runs[:first])  # the end of the zero run before the first run of ones
    end = start + sum(runs[first : last + 1])  # the end of the last run of ones
    c0, c1 = start // h, (end - 1) // h + 1
    # expand only columns c0..c1-1: the runs from the first to the last run of ones, with the
    # zero runs around them cut at those columns
    sub = array("q", (start - c0 * h,))
    sub += runs[first : last + 1]
    sub.append(c1 * h - end)
    return _crop_columns(np.frombuffer(sub, np.int64), h, c0, c1)


def _alternating(n: int) -> np.ndarray:
    """``[0, 1, 0, 1, ...]`` (uint8), the values of RLE runs."""
    values = np.zeros(n, np.uint8)
    values[1::2] = 1
    return values


_ALTERNATING = _alternating(4096)
_ALTERNATING.flags.writeable = False


def box_area(box: BoxXYXY) -> float:
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def iou(a: BoxXYXY, b: BoxXYXY) -> float:
    """Intersection over union of two xyxy boxes (0 when both are empty)."""
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = box_area(a) + box_area(b) - inter
    return inter / union if union > 0 else 0.0


def box_problem(box: Sequence[float], width: int, height: int) -> str | None:
    """Why a box is unusable on a ``width`` x ``height`` image, or ``None`` if it is fine."""
    x1, y1, x2, y2 = (float(v) for v in box)
    if not all(map(math.isfinite, (x1, y1, x2, y2))):
        return f"box {list(box)} has a non-finite coordinate"
    if x2 <= x1 or y2 <= y1:
        return f"box {list(box)} has x2 <= x1 or y2 <= y1 (expected [x1, y1, x2, y2])"
    if x1 < 0 or y1 < 0 or x2 > width or y2 > height:
        return f"box {list(box)} lies outside the {width}x{height} image"
    return None


# --- box coordinate conventions ----------------------------------------------------------
# Models read boxes in different conventions (see reference/spine_medsg.md B.4): EndoBench and
# Qwen2.5-VL use absolute pixels, Qwen2-VL / InternVL integers in [0, 1000], Mantis floats in
# [0, 1]. All functions below take and return xyxy boxes with x2/y2 exclusive pixel edges.

_QWEN_BOX = re.compile(
    r"<\|box_start\|>\s*\(\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\)\s*,\s*"
    r"\(\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\)\s*<\|box_end\|>"
)
_LIST_BOX = re.compile(r"\[\s*" + r"\s*,\s*".join([r"(-?\d+(?:\.\d+)?)"] * 4) + r"\s*\]")


def _round_half_up(value: float) -> int:
    # Python's round() rounds halves to even; half-up keeps text stable and monotone.
    return int(math.floor(value + 0.5))


def _unknown_convention(convention: str) -> ValueError:
    return ValueError(f"unknown box convention {convention!r}; use one of {list(COORD_FORMATS)}")


def _checked(box: Sequence[float], width: int, height: int) -> BoxXYXY:
    if len(box) != 4:
        raise ValueError(f"a box needs 4 numbers [x1, y1, x2, y2], got {list(box)!r}")
    problem = box_problem(box, width, height)
    if problem:
        raise ValueError(problem)
    return (float(box[0]), float(box[1]), float(box[2]), float(box[3]))


def xyxy_to_abs(box: Sequence[float], width: int, height: int) -> tuple[int, int, int, int]:
    """Integer pixel box (x2/y2 exclusive), rounded half up: EndoBench's ``[x1, y1, x2, y2]``."""
    return tuple(_round_half_up(v) for v in _checked(box, width, height))  # type: ignore[return-value]


def xyxy_to_norm1000(box: Sequence[float], width: int, height: int) -> tuple[int, int, int, int]:
    """Integers in [0, 1000] (Qwen2-VL / InternVL); round trip within 1 px up to 2000 px sides."""
    x1, y1, x2, y2 = _checked(box, width, height)
    return (
        _round_half_up(x1 / width * 1000),
        _round_half_up(y1 / height * 1000),
        _round_half_up(x2 / width * 1000),
        _round_half_up(y2 / height * 1000),
    )


def norm1000_to_xyxy(box: Sequence[float], width: int, height: int) -> BoxXYXY:
    """Inverse of :func:`xyxy_to_norm1000` (float pixel edges)."""
    x1, y1, x2, y2 = (float(v) for v in box)
    return (x1 * width / 1000, y1 * height / 1000, x2 * width / 1000, y2 * height / 1000)


def xyxy_to_norm1(box: Sequence[float], width: int, height: int, ndigits: int = 4) -> BoxXYXY:
    """Floats in [0, 1] rounded to ``ndigits`` decimals (Mantis-style)."""
    x1, y1, x2, y2 = _checked(box, width, height)
    return (
        round(x1 / width, ndigits),
        round(y1 / height, ndigits),
        round(x2 / width, ndigits),
        round(y2 / height, ndigits),
    )


def norm1_to_xyxy(box: Sequence[float], width: int, height: int) -> BoxXYXY:
    """Inverse of :func:`xyxy_to_norm1` (float pixel edges)."""
    x1, y1, x2, y2 = (float(v) for v in box)
    return (x1 * width, y1 * height, x2 * width, y2 * height)


def format_qwen_box(box: Sequence[float]) -> str:
    """``<|box_start|>(x1,y1),(x2,y2)<|box_end|>`` with the numbers as given, rounded half up."""
    x1, y1, x2, y2 = (_round_half_up(float(v)) for v in box)
    return f"<|box_start|>({x1},{y1}),({x2},{y2})<|box_end|>"


def parse_qwen_box(text: str) -> BoxXYXY:
    """The first Qwen box in ``text``; ValueError naming the text when there is none."""
    found = _QWEN_BOX.search(text)
    if found is None:
        raise ValueError(f"no <|box_start|>(x1,y1),(x2,y2)<|box_end|> box in {text[:80]!r}")
    return tuple(float(v) for v in found.groups())  # type: ignore[return-value]


# The sentence EndoBench appends after an absolute box (reference/endobench.md 1.4).
COORD_HINTS: dict[str, str] = {
    "abs": "The bounding box is defined by the format [x1, y1, x2, y2].",
    "norm1000": "The bounding box is defined by the format [x1, y1, x2, y2], "
    "with coordinates scaled to 0-1000.",
    "norm1": "The bounding box is defined by the format [x1, y1, x2, y2], "
    "with coordinates as fractions of the image width and height.",
    "qwen": "The bounding box is given as <|box_start|>(x1,y1),(x2,y2)<|box_end|>.",
}


def format_box(box: Sequence[float], convention: str, width: int, height: int) -> str:
    """Box text in one convention: ``abs`` / ``norm1000`` / ``norm1`` lists, or ``qwen`` tags.

    ``qwen`` uses absolute pixels (Qwen2.5-VL, MedSG-Bench); for Qwen2-VL, which expects
    0-1000, format with ``norm1000`` numbers via ``format_qwen_box(xyxy_to_norm1000(...))``.
    """
    if convention == "abs":
        return "[{}, {}, {}, {}]".format(*xyxy_to_abs(box, width, height))
    if convention == "norm1000":
        return "[{}, {}, {}, {}]".format(*xyxy_to_norm1000(box, width, height))
    if convention == "norm1":
        return "[{:.4f}, {:.4f}, {:.4f}, {:.4f}]".format(*xyxy_to_norm1(box, width, height))
    if convention == "qwen":
        return format_qwen_box(xyxy_to_abs(box, width, height))
    raise _unknown_convention(convention)


def parse_box(text: str, convention: str, width: int, height: int) -> BoxXYXY:
    """Inverse of :func:`format_box`: the first box in ``text`` as xyxy pixel edges."""
    if convention == "qwen":
        return parse_qwen_box(text)
    if convention not in COORD_FORMATS:
        raise _unknown_convention(convention)
    found = _LIST_BOX.search(text)
    if found is None:
        raise ValueError(f"no [x1, y1, x2, y2] box in {text[:80]!r}")
    values = tuple(float(v) for v in found.groups())
    if convention == "norm1000":
        return norm1000_to_xyxy(values, width, height)
    if convention == "norm1":
        return norm1_to_xyxy(values, width, height)
    return values  # type: ignore[return-value]


# Distractor boxes for region selection and grounding: similar size, elsewhere, low overlap.
# EndoBench's distractors have "similar dimensions but overlap below a defined threshold"
# (reference/endobench.md 1.4). Generators plan them; renderers draw them.


def sample_distractor_boxes(
    target_xyxy: Sequence[float],
    width: int,
    height: int,
    n: int,
    rng: np.random.Generator,
    *,
    max_iou: float = 0.1,
    avoid: Sequence[Sequence[float]] = (),
    size_jitter: float = 0.2,
    max_tries: int = 2000,
    valid_mask: np.ndarray | None = None,
) -> list[BoxXYXY]:
    """``n`` boxes inside the image, each ``size_jitter``-close in width and height to the target,
    with IoU below ``max_iou`` to the target, to every ``avoid`` box and to each other.

    ``valid_mask`` (bool, H x W), when given, must be True at each box's centre pixel: e.g. the
    endoscope's circular field of view, so no distractor sits in the black corners.

    Raises ValueError when ``max_tries`` draws do not find them (the caller quarantines the item).
    """
    problem = box_problem(target_xyxy, width, height)
    if problem:
        raise ValueError(f"target {problem}")
    if n < 0 or not 0.0 <= size_jitter < 1.0:
        raise ValueError(f"need n >= 0 and 0 <= size_jitter < 1, got n={n}, {size_jitter=}")
    if valid_mask is not None and valid_mask.shape != (height, width):
        raise ValueError(f"valid_mask is {valid_mask.shape} (HxW), image is {(height, width)}")
    tx1, ty1, tx2, ty2 = (float(v) for v in target_xyxy)
    tw, th = tx2 - tx1, ty2 - ty1
    taken: list[BoxXYXY] = [(tx1, ty1, tx2, ty2)] + [tuple(map(float, b)) for b in avoid]
    found: list[BoxXYXY] = []
    for _ in range(max_tries):
        if len(found) == n:
            break
        jitter_w, jitter_h = rng.uniform(1 - size_jitter, 1 + size_jitter, size=2)
        bw = int(min(width, max(1, round(tw * jitter_w))))
        bh = int(min(height, max(1, round(th * jitter_h))))
        x1 = int(rng.integers(0, width - bw + 1))
        y1 = int(rng.integers(0, height - bh + 1))
        box = (float(x1), float(y1), float(x1 + bw), float(y1 + bh))
        if valid_mask is not None and not valid_mask[y1 + (bh - 1) // 2, x1 + (bw - 1) // 2]:
            continue
        if all(iou(box, other) < max_iou for other in taken + found):
            found.append(box)
    if len(found) < n:
        raise ValueError(
            f"found {len(found)} of {n} distractor boxes of about {tw:g}x{th:g} px with IoU < "
            f"{max_iou} in a {width}x{height} image after {max_tries} tries; the target is too "
            "large for the image or max_iou too strict"
        )
    return found
