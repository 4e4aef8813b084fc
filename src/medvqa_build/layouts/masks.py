"""Regions from a binary or label-map mask file beside an image (same stem).

Owners store binary masks in many ways: 8-bit grey 0/255 (CVC, ETIS TIFFs), 1-bit TIFF/PNG,
3-channel JPEG with compression noise around 0/255 (Kvasir-SEG, PolypGen), 16-bit PNG,
palette ("P" mode) PNG/TIFF whose foreground colour may be pure red or green, RGBA PNG with an
opaque alpha. :func:`load_binary_mask` turns all of these into one 2-D array whose non-zero
pixels (above the JPEG threshold) are the foreground.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
from PIL import Image, UnidentifiedImageError
from pydantic import BaseModel, ConfigDict

from ..errors import ImageProblem
from ..media.image import MASK_READ, displayed
from ..media.png import plain_grey_png
from ..records import MaskRef, Region, RLECounts


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


def load_binary_mask(path: str | Path, size: tuple[int, int] | None = None) -> np.ndarray:
    """A mask file as a 2-D array (its own dtype) whose non-zero pixels are the foreground.

    With ``size`` (the image's ``(width, height)``), a plain 8-bit grey PNG of that size is
    decoded by :func:`~medvqa_build.media.png.plain_grey_png` (the same pixels, about half the
    CPU of OpenCV's decoder); any other file by OpenCV.

    A palette image gives 255 wherever its palette colour is not black: OpenCV expands the
    palette to BGR, and a pure red foreground (128, 0, 0) has a zero blue channel, which the
    first-channel reading of :func:`~medvqa_build.media.image.load_mask` takes for empty.
    Other colour masks give the largest of their colour channels (alpha left out), so a red,
    green or white foreground all count. Raises :class:`ImageProblem` when the
    file cannot be decoded.
    """
    with open(path, "rb") as fh:
        raw = fh.read()
    if size is not None:
        plain = plain_grey_png(raw, *size)
        if plain is not None:
            return plain
    data = np.frombuffer(raw, np.uint8)
    mask = cv2.imdecode(data, MASK_READ) if data.size else None
    if mask is None:
        raise ImageProblem(f"cannot decode mask {Path(path).name}")
    if mask.ndim == 2:
        return mask
    palette = _palette_foreground(path, data)
    if palette is not None:
        return palette
    colour = mask[..., :3] if mask.shape[2] >= 3 else mask[..., :1]
    return colour.max(axis=2)


def _palette_foreground(path: str | Path, data: np.ndarray) -> np.ndarray | None:
    """A palette PNG/TIFF/BMP/GIF (JPEG has none) as 0/255: 255 where the pixel's palette
    colour is not black, whatever index it has (tools that write adaptive palettes do not keep
    index 0 for the background); None for any other file."""
    head = data[:26].tobytes()
    if head[:3] == b"\xff\xd8\xff":
        return None
    if head[:8] == b"\x89PNG\r\n\x1a\n" and len(head) == 26 and head[25] != 3:
        return None  # IHDR colour type 3 is the only palette PNG
    try:
        with Image.open(path) as im:
            if im.mode not in ("P", "PA"):
                return None
            indices = np.asarray(displayed(im))
            palette = im.getpalette() or []
    except (UnidentifiedImageError, OSError, ValueError):
        return None
    if indices.ndim == 3:  # PA: index and alpha
        indices = indices[..., 0]
    colours = np.zeros((256, 3), np.uint8)
    listed = np.asarray(palette[: 256 * 3], np.uint8).reshape(-1, 3)
    colours[: len(listed)] = listed
    lut = np.where(colours.max(axis=1) > 0, 255, 0).astype(np.uint8)
    return lut[indices]


def regions_from_mask(
    mask_file: Path, label: str, width: int, height: int, min_area_px: int
) -> tuple[Region, ...]:
    """One region per connected component (largest first) with its box and RLE mask.

    Raises :class:`ImageProblem` when the mask cannot be read or its size differs from the image.
    """
    mask = load_binary_mask(mask_file, (width, height))
    if mask.shape[:2] != (height, width):
        raise ImageProblem(
            f"mask {mask_file.name} is {mask.shape[1]}x{mask.shape[0]}, image is {width}x{height}"
        )
    # JPEG-compressed masks carry noise around 0/255: threshold at half range.
    return component_regions(mask, 127 if mask.max() > 1 else 0, label, min_area_px)


def component_regions(
    mask: np.ndarray, threshold: int, label: str, min_area_px: int
) -> tuple[Region, ...]:
    """Regions of the connected components (8-connectivity) of ``mask > threshold`` with at
    least ``min_area_px`` pixels, largest first (ties by box): exactly what
    :func:`~medvqa_build.geometry.components_with_boxes` and
    :func:`~medvqa_build.geometry.rle_encode` give, at a fraction of the cost.

    The work is done on the transposed mask, whose row-major order is the column-major order
    of COCO RLE, and only inside the box of its foreground (a lesion covers a small part of
    most masks): OpenCV labels the components there, one pass finds the runs of equal
    labels, and each component's area, box and RLE come from its runs alone."""
    if mask.dtype == np.uint8 and mask.flags.c_contiguous:
        binary_t = cv2.threshold(cv2.transpose(mask), threshold, 1, cv2.THRESH_BINARY)[1]
    else:
        binary_t = np.greater(mask.T, threshold, order="C").view(np.uint8)
    width, height = binary_t.shape  # a row of the transpose is a column of the mask
    # OpenCV numbers the window's components in another order than the whole mask's would;
    # the order of the regions never depends on it: two 8-connected components cannot share
    # a box (a path between its left and right sides and one between its top and bottom
    # would touch), so (area, box) orders them
    x, y, w, h = cv2.boundingRect(binary_t)
    if w == 0:
        return ()
    box_t = binary_t[y : y + h, x : x + w]
    # at most ceil(h/2) * ceil(w/2) components (8-connected ones cannot be closer)
    small = ((w + 1) // 2) * ((h + 1) // 2) < 65535
    n, labels_t = cv2.connectedComponents(
        box_t, connectivity=8, ltype=cv2.CV_16U if small else cv2.CV_32S
    )
    if n < 2:
        return ()
    starts, ends, run_labels = _window_runs(box_t if n == 2 else labels_t, x, y, height)
    if n > 2:
        order = np.argsort(run_labels, kind="stable")  # by label, in scan order within one
        starts, ends, run_labels = starts[order], ends[order], run_labels[order]
        first = np.flatnonzero(np.diff(run_labels, prepend=-1))  # each label's first run
        areas = np.add.reduceat(ends - starts, first)
    else:
        first = np.zeros(1, np.intp)
        areas = np.array([int((ends - starts).sum())])
    kept = []  # (-area, (row0, col0, row1, col1) of the mask, first run, end of runs)
    bounds = [*first.tolist(), len(run_labels)]
    for i, area in enumerate(areas.tolist()):
        if area < min_area_px:
            continue
        s, e = starts[bounds[i] : bounds[i + 1]], ends[bounds[i] : bounds[i + 1]] - 1
        col_s, col_e = s // height, e // height
        within = col_s == col_e  # runs inside one column; any other spans whole columns
        if within.all():
            r0, r1 = int((s % height).min()), int((e % height).max()) + 1
        else:
            r0, r1 = 0, height
        box = (r0, int(col_s[0]), r1, int(col_e[-1]) + 1)
        kept.append((-area, box, bounds[i], bounds[i + 1]))
    kept.sort()
    return tuple(
        Region(
            label=label,
            bbox=(float(c0), float(r0), float(c1), float(r1)),
            mask=_rle(starts[lo:hi], ends[lo:hi], width, height),
        )
        for _, (r0, c0, r1, c1), lo, hi in kept
    )


def _window_runs(
    values: np.ndarray, x: int, y: int, height: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(starts, ends, labels)`` of the runs of non-zero values in ``values``, the window at
    row ``y``, column ``x`` of a transposed mask whose rows are ``height`` long, as positions
    in the whole transposed mask (its flat, row-major order)."""
    h, w = values.shape
    if w == height:  # whole rows: runs may go on from one row of the transpose to the next
        flat, stride = values.reshape(-1), w
    else:  # a background column after each row keeps runs inside their row
        stride = w + 1
        padded = np.zeros((h, stride), values.dtype)
        padded[:, :w] = values
        flat = padded.reshape(-1)
    change = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    starts = np.concatenate(([0], change))
    ends = np.concatenate((change, [flat.size]))
    run_labels = flat[starts].astype(np.intp)
    foreground = run_labels != 0
    starts, ends, run_labels = starts[foreground], ends[foreground], run_labels[foreground]
    starts = (y + starts // stride) * height + x + starts % stride
    ends = (y + ends // stride) * height + x + ends % stride
    return starts, ends, run_labels


def _rle(s: np.ndarray, e: np.ndarray, width: int, height: int) -> MaskRef:
    """The COCO RLE of one component from its runs ``[s, e)`` in the transposed mask."""
    size = width * height
    counts = np.empty(2 * len(s) + (e[-1] < size), dtype=np.int32)
    counts[0 : 2 * len(s) : 2] = s - np.concatenate(([0], e[:-1]))  # zeros before a run
    counts[1 : 2 * len(s) : 2] = e - s
    if e[-1] < size:
        counts[-1] = size - e[-1]
    return MaskRef(size_hw=(height, width), counts=RLECounts(counts.tobytes()))
