"""Pure geometry on masks and boxes in clean-image pixels.

Boxes are ``[x1, y1, x2, y2]`` with x2/y2 exclusive (pixel-edge coordinates, as COCO).
Masks are boolean ``(H, W)`` arrays; RLE is COCO's uncompressed form (column-major runs
starting with a run of zeros), so it interoperates with pycocotools.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
from skimage import measure

BoxXYXY = tuple[float, float, float, float]


def mask_to_xyxy(mask: np.ndarray) -> BoxXYXY | None:
    """Tight box around the non-zero pixels (x2/y2 exclusive); ``None`` for an empty mask."""
    ys, xs = np.nonzero(mask)
    if xs.size == 0:
        return None
    return (float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1))


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
    """Outlines of a mask as (N, 2) arrays of (x, y) pixel centres, via skimage."""
    padded = np.pad(mask > 0, 1).astype(np.uint8)
    contours = measure.find_contours(padded, 0.5)
    return [np.stack([c[:, 1] - 1, c[:, 0] - 1], axis=1) for c in contours]


def rle_encode(mask: np.ndarray) -> tuple[tuple[int, int], tuple[int, ...]]:
    """COCO uncompressed RLE of a binary mask: ``(size_hw, counts)``.

    Runs are counted over the column-major (Fortran) order, starting with a run of zeros
    (possibly empty), exactly as pycocotools does.
    """
    h, w = (int(v) for v in mask.shape[:2])
    flat = (np.ascontiguousarray(np.asarray(mask).T).reshape(-1) != 0).view(np.uint8)
    if flat.size == 0:
        return (h, w), ()
    change = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    counts = np.diff(np.concatenate(([0], change, [flat.size])))
    if flat[0]:
        counts = np.concatenate(([0], counts))
    return (h, w), tuple(counts.tolist())


def rle_decode(size_hw: Sequence[int], counts: Sequence[int]) -> np.ndarray:
    """Inverse of :func:`rle_encode`."""
    h, w = int(size_hw[0]), int(size_hw[1])
    if sum(counts) != h * w:
        raise ValueError(f"RLE counts sum to {sum(counts)}, expected {h * w} for size {h}x{w}")
    values = np.zeros(len(counts), dtype=np.uint8)
    values[1::2] = 1
    flat = np.repeat(values, np.asarray(counts, dtype=np.int64))
    return flat.reshape((h, w), order="F").astype(bool)


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
    if not all(np.isfinite([x1, y1, x2, y2])):
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

BOX_CONVENTIONS = ("abs", "norm1000", "norm1", "qwen")
_QWEN_BOX = re.compile(
    r"<\|box_start\|>\s*\(\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\)\s*,\s*"
    r"\(\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\)\s*<\|box_end\|>"
)
_LIST_BOX = re.compile(r"\[\s*" + r"\s*,\s*".join([r"(-?\d+(?:\.\d+)?)"] * 4) + r"\s*\]")


def _round_half_up(value: float) -> int:
    # Python's round() rounds halves to even; half-up keeps text stable and monotone.
    return int(math.floor(value + 0.5))


def _unknown_convention(convention: str) -> ValueError:
    return ValueError(f"unknown box convention {convention!r}; use one of {list(BOX_CONVENTIONS)}")


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
    if convention not in BOX_CONVENTIONS:
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
