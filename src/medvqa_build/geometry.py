"""Pure geometry on masks and boxes in clean-image pixels.

Boxes are ``[x1, y1, x2, y2]`` with x2/y2 exclusive (pixel-edge coordinates, as COCO).
Masks are boolean ``(H, W)`` arrays; RLE is COCO's uncompressed form (column-major runs
starting with a run of zeros), so it interoperates with pycocotools.
"""

from __future__ import annotations

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
    labelled = measure.label(mask > 0, connectivity=2)
    props = [p for p in measure.regionprops(labelled) if p.area >= min_area_px]
    props.sort(key=lambda p: (-p.area, p.bbox))
    return [labelled == p.label for p in props]


def mask_to_contours(mask: np.ndarray) -> list[np.ndarray]:
    """Outlines of a mask as (N, 2) arrays of (x, y) pixel centres, via skimage."""
    padded = np.pad(mask > 0, 1).astype(np.uint8)
    contours = measure.find_contours(padded, 0.5)
    return [np.stack([c[:, 1] - 1, c[:, 0] - 1], axis=1) for c in contours]


def rle_encode(mask: np.ndarray) -> tuple[tuple[int, int], tuple[int, ...]]:
    """COCO uncompressed RLE of a binary mask: ``(size_hw, counts)``."""
    flat = (np.asarray(mask) > 0).flatten(order="F").astype(np.uint8)
    changes = np.flatnonzero(np.diff(np.concatenate([[0], flat, [1 - flat[-1] if flat.size else 0]])))
    runs = np.diff(np.concatenate([[0], changes]))
    counts = [int(c) for c in runs]
    if flat.size and counts and sum(counts) < flat.size:
        counts.append(int(flat.size - sum(counts)))
    h, w = mask.shape[:2]
    return (int(h), int(w)), tuple(counts)


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
