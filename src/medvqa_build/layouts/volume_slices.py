"""Shared by the NIfTI layouts: an image volume + its label volume -> one sample per slice.

A label volume whose shape or affine disagrees with its image, a value the label list does not
name, or a volume without any foreground quarantines the case; a slice whose structures are all
below ``min_area_px`` quarantines the slice. Slices without foreground are not candidates
unless ``empty_slices: quarantine`` asks to list them. One region per structure per slice.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from ..geometry import mask_to_xyxy, rle_encode
from ..media.volume import (
    VolumeProblem,
    load_canonical,
    load_volume,
    slice_2d,
    slice_shape_hw,
    slice_spacing,
)
from ..quarantine import QuarantineEntry
from ..records import MaskRef, Region, Sample, SliceRef
from .base import LabelProblem, LayoutOptions, ScanContext


class VolumeSliceOptions(LayoutOptions):
    """How volumes become slices (shared by every NIfTI layout)."""

    axes: list[Literal["axial", "coronal", "sagittal"]] = ["axial"]
    slice_step: int = 1  # every k-th slice with foreground
    min_area_px: int = 16  # smaller structure pieces of a slice are left out
    empty_slices: Literal["skip", "quarantine"] = "skip"
    window: str | None = None  # CT window preset for display (media.volume.CT_WINDOWS); None = MRI
    affine_atol: float = 1e-3


@dataclass
class CaseVolumes:
    """One case: its image file(s) (one per sequence), label file and what to record."""

    case: str
    images: dict[str, tuple[Path, int | None]]  # sequence name ("" if one) -> (file, channel)
    label: Path
    labels: dict[int, str]  # label value -> raw structure name
    modality: str
    group_id: str
    attributes: dict[str, str] = field(default_factory=dict)


def _case_problem(
    images: dict[str, tuple[Path, int | None]], label: Path, atol: float
) -> str | None:
    lab = load_canonical(label)
    for path, _ in images.values():
        img = load_canonical(path)
        if tuple(img.shape[:3]) != tuple(lab.shape[:3]):
            return (
                f"label volume {label.name} is {tuple(lab.shape[:3])}, image {path.name} is "
                f"{tuple(img.shape[:3])}"
            )
        if not np.allclose(img.affine, lab.affine, atol=atol):
            return f"label volume {label.name} has another affine than image {path.name}"
    return None


def scan_case(
    ctx: ScanContext, o: VolumeSliceOptions, cv: CaseVolumes
) -> Iterator[Sample | QuarantineEntry]:
    """Samples of every foreground slice of one case, or quarantine entries with the reason."""
    first = next(iter(cv.images.values()))[0]
    try:
        problem = _case_problem(cv.images, cv.label, o.affine_atol)
        if problem:
            yield ctx.quarantine(first, problem)
            return
        labels = load_volume(cv.label)
        values = {int(v) for v in np.unique(labels)} - {0}
        unknown = sorted(values - set(cv.labels))
        if unknown:
            yield ctx.quarantine(
                first,
                f"label value(s) {unknown} of {cv.label.name} are not "
                f"in the label list {cv.labels}",
            )
            return
        if not values:
            yield ctx.quarantine(first, f"label volume {cv.label.name} has no foreground")
            return
        names = {v: ctx.canonical(cv.labels[v]) for v in sorted(values)}
        spacing = tuple(float(z) for z in load_canonical(first).header.get_zooms()[:3])
    except (VolumeProblem, LabelProblem) as exc:
        yield ctx.quarantine(first, str(exc))
        return
    for axis in o.axes:
        dim = {"sagittal": 0, "coronal": 1, "axial": 2}[axis]
        other = tuple(d for d in range(3) if d != dim)
        has_fg = np.any(labels != 0, axis=other)
        if o.empty_slices == "quarantine":
            for index in np.flatnonzero(~has_fg):
                yield ctx.quarantine(f"{ctx.rel(first)}#{axis}={index}", "slice has no foreground")
        for index in np.flatnonzero(has_fg)[:: o.slice_step]:
            yield from _slice_samples(ctx, o, cv, labels, names, spacing, axis, int(index))


def _slice_samples(
    ctx: ScanContext,
    o: VolumeSliceOptions,
    cv: CaseVolumes,
    labels: np.ndarray,
    names: dict[int, str],
    spacing: tuple,
    axis: str,
    index: int,
) -> Iterator[Sample | QuarantineEntry]:
    plane = np.rint(slice_2d(labels, axis, index)).astype(np.int32)
    height, width = slice_shape_hw(labels.shape, axis)
    key = f"{cv.case}/{axis}/{index:04d}"
    regions = []
    for value in sorted(int(v) for v in np.unique(plane) if v != 0):
        mask = plane == value
        if int(mask.sum()) < o.min_area_px:
            continue
        size_hw, counts = rle_encode(mask)
        regions.append(
            Region(
                label=names[value],
                bbox=mask_to_xyxy(mask),
                mask=MaskRef(size_hw=size_hw, counts=counts),
            )
        )
    if not regions:
        yield ctx.quarantine(
            f"{ctx.rel(cv.label)}#{axis}={index}",
            f"every structure of this slice is below min_area_px={o.min_area_px}",
        )
        return
    values = {names[v]: v for v in names}
    row_mm, col_mm = slice_spacing(spacing, axis)  # type: ignore[arg-type]
    present = [r.label for r in regions]
    raw = [cv.labels[values[label]] for label in present]
    for sequence, (path, channel) in cv.images.items():
        attributes = {
            **cv.attributes,
            "source_label": ",".join(raw),
            "case": cv.case,
            "label_volume": ctx.rel(cv.label),
            "label_values": json.dumps(values, sort_keys=True),
            "spacing_mm": f"{row_mm:g},{col_mm:g}",
        }
        if o.window:
            attributes["window"] = o.window
        if channel is not None:
            attributes["channel"] = str(channel)
        if sequence:
            attributes["sequence"] = sequence
        yield Sample(
            sample_id=ctx.sample_id(f"{key}/{sequence}" if sequence else key),
            source=ctx.source,
            image=ctx.rel(path),
            width=int(width),
            height=int(height),
            modality=cv.modality,
            slice=SliceRef(axis, int(index)),
            scene=ctx.scene,
            labels=tuple(dict.fromkeys(present)),
            attributes=attributes,
            regions=tuple(regions),
            group_id=cv.group_id,
        )
