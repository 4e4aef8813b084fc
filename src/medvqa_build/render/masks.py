"""Turn a Region's mask (RLE, PNG path or polygon) into a checked boolean array for drawing."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from ..geometry import BoxXYXY, box_problem, mask_to_xyxy, rle_decode
from ..records import Region

# Lossy masks (Kvasir-SEG ships its masks as JPEG) carry compression noise around 0 and 255,
# so "non-zero" would select noise; for these files "non-zero" means "above mid-grey".
_LOSSY_SUFFIXES = {".jpg", ".jpeg"}


def _read_mask_file(path: Path, value: int | None) -> np.ndarray:
    pixels = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if pixels is None:
        raise ValueError(f"mask file {path} is missing or not an image")
    if pixels.ndim == 3:
        channels = pixels[..., :3]
        if value is None:
            pixels = channels.max(axis=2)
        elif np.all(channels == channels[..., :1]):
            pixels = channels[..., 0]
        else:
            raise ValueError(
                f"mask file {path} is a colour image; label value {value} needs a grey label map"
            )
    if value is not None:
        return pixels == value
    if path.suffix.lower() in _LOSSY_SUFFIXES:
        return pixels > (np.iinfo(pixels.dtype).max // 2 if pixels.dtype.kind == "u" else 0.5)
    return pixels != 0


def load_region_mask(
    region: Region, height: int, width: int, root: str | Path | None = None
) -> np.ndarray:
    """The region's mask as a bool ``(height, width)`` array.

    Decodes the RLE, or reads ``region.mask.path`` (relative to ``root``; ``value`` selects one
    label of a label map, ``None`` means non-zero), or, without a mask, fills ``region.polygon``.
    Raises ValueError naming the region when there is no mask, it is empty, or its size differs.
    """
    name = f"region {region.label!r}"
    ref = region.mask
    if ref is None:
        if len(region.polygon) >= 3:
            mask = np.zeros((height, width), np.uint8)
            pts = np.round(np.asarray(region.polygon, np.float64)).astype(np.int32)
            cv2.fillPoly(mask, [pts], 1)
            mask = mask.astype(bool)
        else:
            raise ValueError(f"{name} has no mask or polygon to draw")
    elif ref.counts is not None:
        if tuple(ref.size_hw) != (height, width):
            raise ValueError(
                f"{name}: RLE mask is {ref.size_hw[0]}x{ref.size_hw[1]} (HxW) "
                f"but the image is {height}x{width}"
            )
        mask = rle_decode(ref.size_hw, ref.counts)
    else:
        path = Path(ref.path)
        if not path.is_absolute():
            if root is None:
                raise ValueError(f"{name}: mask path {ref.path!r} is relative; pass root=")
            path = Path(root) / path
        mask = _read_mask_file(path, ref.value)
        if mask.shape != (height, width):
            raise ValueError(
                f"{name}: mask {path} is {mask.shape[0]}x{mask.shape[1]} (HxW) "
                f"but the image is {height}x{width}"
            )
    if not mask.any():
        raise ValueError(f"{name}: mask is empty (no selected pixels)")
    return mask


def region_box(region: Region, height: int, width: int, root: str | Path | None = None) -> BoxXYXY:
    """The region's box (x2/y2 exclusive): its own bbox, else the tight box of its mask."""
    if region.bbox is not None:
        box = tuple(float(v) for v in region.bbox)
    else:
        box = mask_to_xyxy(load_region_mask(region, height, width, root))
    problem = box_problem(box, width, height)
    if problem:
        raise ValueError(f"region {region.label!r}: {problem}")
    return box  # type: ignore[return-value]
