"""Turn a Region's mask (RLE, PNG path or polygon) into a checked boolean array for drawing."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from ..geometry import BoxXYXY, box_problem, mask_to_xyxy, rle_decode, rle_decode_box
from ..media.image import MASK_READ
from ..records import Region

# Lossy masks (Kvasir-SEG ships its masks as JPEG) carry compression noise around 0 and 255,
# so "non-zero" would select noise; for these files "non-zero" means "above mid-grey".
_LOSSY_SUFFIXES = {".jpg", ".jpeg"}


def _read_mask_file(path: Path, value: int | None) -> np.ndarray:
    pixels = cv2.imread(str(path), MASK_READ)  # as displayed, as convert read it
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
        _check_rle_size(region, height, width)
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


def load_region_crop(
    region: Region, height: int, width: int, root: str | Path | None = None
) -> tuple[tuple[int, int, int, int], np.ndarray]:
    """The region's mask cut to its tight box: ``((x0, y0, x1, y1), bool crop)`` (x1/y1
    exclusive). The same checks and errors as :func:`load_region_mask`; an RLE mask is
    decoded straight into the crop (no whole-image array)."""
    ref = region.mask
    if ref is None or ref.counts is None:
        mask = load_region_mask(region, height, width, root)
        x0, y0, x1, y1 = (int(v) for v in mask_to_xyxy(mask))
        return (x0, y0, x1, y1), mask[y0:y1, x0:x1]
    _check_rle_size(region, height, width)
    box, crop = rle_decode_box(ref.size_hw, ref.counts)
    if box is None:
        raise ValueError(f"region {region.label!r}: mask is empty (no selected pixels)")
    return box, crop


def _check_rle_size(region: Region, height: int, width: int) -> None:
    size_hw = region.mask.size_hw
    if tuple(size_hw) != (height, width):
        raise ValueError(
            f"region {region.label!r}: RLE mask is {size_hw[0]}x{size_hw[1]} (HxW) "
            f"but the image is {height}x{width}"
        )


def region_box(region: Region, height: int, width: int, root: str | Path | None = None) -> BoxXYXY:
    """The region's box (x2/y2 exclusive): its own bbox, else the tight box of its mask."""
    if region.bbox is not None:
        box = tuple(float(v) for v in region.bbox)
    else:
        box = tuple(float(v) for v in load_region_crop(region, height, width, root)[0])
    problem = box_problem(box, width, height)
    if problem:
        raise ValueError(f"region {region.label!r}: {problem}")
    return box  # type: ignore[return-value]
