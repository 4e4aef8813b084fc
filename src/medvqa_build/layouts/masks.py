"""Regions from a binary or label-map mask file beside an image (same stem)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..geometry import components_with_boxes, rle_encode
from ..media.image import ImageProblem, load_mask
from ..records import MaskRef, Region


class MaskOptions(BaseModel):
    """Where masks live: ``<dir>/<image stem><suffix>``; non-zero pixels are the region."""

    model_config = ConfigDict(extra="forbid")

    dir: str
    suffix: str = ".png"
    region_label: str = "sample"  # "sample": the sample's (single) label; else a literal name
    min_area_px: int = 16
    required: bool = False  # a missing mask file quarantines the image


def mask_path_for(root: Path, opts: MaskOptions, stem: str) -> Path:
    return root / opts.dir / f"{stem}{opts.suffix}"


def regions_from_mask(
    mask_file: Path, label: str, width: int, height: int, min_area_px: int
) -> tuple[Region, ...]:
    """One region per connected component (largest first) with its box and RLE mask.

    Raises :class:`ImageProblem` when the mask cannot be read or its size differs from the image.
    """
    mask = load_mask(mask_file)
    if mask.shape[:2] != (height, width):
        raise ImageProblem(
            f"mask {mask_file.name} is {mask.shape[1]}x{mask.shape[0]}, image is {width}x{height}"
        )
    # JPEG-compressed masks carry noise around 0/255: threshold at half range.
    binary = mask > (127 if mask.max() > 1 else 0)
    regions = []
    for component, box in components_with_boxes(binary, min_area_px=min_area_px):
        size_hw, counts = rle_encode(component)
        regions.append(Region(label=label, bbox=box, mask=MaskRef(size_hw=size_hw, counts=counts)))
    return tuple(regions)


def empty_mask_like(height: int, width: int) -> np.ndarray:
    return np.zeros((height, width), dtype=bool)
