"""Shared by the NIfTI layouts: an image volume + its label volume -> one sample per slice.

A label volume whose shape or affine disagrees with its image, a value the label list does not
name, or a volume without any foreground quarantines the case; a slice whose structures are all
below ``min_area_px`` quarantines the slice. Slices without foreground are not candidates
unless ``empty_slices: quarantine`` asks to list them. One region per structure per slice.
A value the case's info file or tables leave empty (``CaseVolumes.missing``) is left out of
every sample of the case and counted once per sample (``ScanContext.label_missing``).
Each sample and each quarantine entry is one candidate of the layout's scan
(:func:`slice_candidates`), read by :func:`read_slice`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

import numpy as np

from ..geometry import mask_to_xyxy, rle_encode
from ..media.volume import (
    VolumeProblem,
    canonical_header,
    load_volume,
    slice_2d,
    slice_shape_hw,
    slice_spacing,
)
from ..records import MaskRef, QuarantineEntry, Region, Sample, SliceRef
from ..store.memory import budget_reason
from .base import FileCandidate, LabelProblem, LayoutOptions, ScanContext

# what every volume layout's slices carry: the structures' masks and boxes, the label volume
# (MedSG multi-view and tracking re-slice it) and the voxel spacing
VOLUME_PROVIDES = frozenset(
    {
        "labels",
        "regions",
        "masks",
        "attribute:source_label",
        "attribute:label_volume",
        "attribute:spacing_mm",
    }
)

log = logging.getLogger(__name__)


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
    # attributes the owners' info file or tables leave empty or "not available" for this case
    missing: tuple[str, ...] = ()

    @property
    def first_image(self) -> Path:
        """The file a case-wide quarantine entry names."""
        return next(iter(self.images.values()))[0]


def _case_problem(
    images: dict[str, tuple[Path, int | None]], label: Path, atol: float
) -> str | None:
    lab = canonical_header(label)
    for path, _ in images.values():
        img = canonical_header(path)
        if tuple(img.shape[:3]) != tuple(lab.shape[:3]):
            return (
                f"label volume {label.name} is {tuple(lab.shape[:3])}, image {path.name} is "
                f"{tuple(img.shape[:3])}"
            )
        if not np.allclose(img.affine, lab.affine, atol=atol):
            return f"label volume {label.name} has another affine than image {path.name}"
    return None


@dataclass
class OpenCase:
    """A case whose label volume was read and checked: what reading its slices needs."""

    volumes: CaseVolumes
    options: VolumeSliceOptions
    labels: np.ndarray  # the label volume (RAS+)
    names: dict[int, str]  # label value -> canonical structure name, by value
    spacing: tuple[float, float, float]
    # sequence -> channels of a 4-D image no channel was chosen for (its first is sliced)
    channels: dict[str, int] = field(default_factory=dict)


def _open_case(
    ctx: ScanContext, o: VolumeSliceOptions, cv: CaseVolumes
) -> OpenCase | QuarantineEntry:
    """The case with its label volume read, or the quarantine entry (naming the first image)
    of a case that cannot be read, disagrees with its image or has no known foreground."""
    first = cv.first_image
    try:
        problem = _case_problem(cv.images, cv.label, o.affine_atol)
        if problem:
            return ctx.quarantine(first, problem)
        labels = load_volume(cv.label)
        values = {int(v) for v in np.unique(labels)} - {0}
        unknown = sorted(values - set(cv.labels))
        if unknown:
            return ctx.quarantine(
                first,
                f"label value(s) {unknown} of {cv.label.name} are not "
                f"in the label list {cv.labels}",
            )
        if not values:
            return ctx.quarantine(first, f"label volume {cv.label.name} has no foreground")
        names = {v: ctx.canonical(cv.labels[v]) for v in sorted(values)}
        spacing = canonical_header(first).zooms[:3]
        channels = _unchosen_channels(cv)
    except (VolumeProblem, LabelProblem) as exc:
        return ctx.quarantine(first, str(exc))
    except MemoryError:  # past the worker's budget (store.memory.worker_budget)
        return ctx.quarantine(first, budget_reason(f"reading the volumes of case {cv.case}"))
    for sequence, n in channels.items():
        ctx.notes[f"4-D image volume: channel 0 of {n} sliced"] += 1
        name = cv.images[sequence][0].name
        log.info("%s: %s is 4-D (%d channels): channel 0 is sliced", ctx.source, name, n)
    return OpenCase(cv, o, labels, names, spacing, channels)  # type: ignore[arg-type]


def _unchosen_channels(cv: CaseVolumes) -> dict[str, int]:
    """Sequences whose image is 4-D with more than one channel (or time point) and no channel
    chosen: the first is sliced, which the samples and the report then say."""
    out = {}
    for sequence, (path, channel) in cv.images.items():
        shape = canonical_header(path).shape
        if channel is None and len(shape) == 4 and shape[3] > 1:
            out[sequence] = int(shape[3])
    return out


@dataclass
class VolumeSlice:
    """One foreground slice of an open case, shared by the candidates of its sequences: its
    plane and structures are computed once, by whichever needs them first."""

    case: OpenCase
    axis: str
    index: int

    @cached_property
    def plane(self) -> np.ndarray:
        return np.rint(slice_2d(self.case.labels, self.axis, self.index)).astype(np.int32)

    @cached_property
    def areas(self) -> dict[int, int]:
        """Pixels of each structure value in the slice, by value."""
        values, counts = np.unique(self.plane, return_counts=True)
        return {int(v): int(n) for v, n in zip(values, counts, strict=True) if v != 0}

    @property
    def kept(self) -> bool:
        """Whether a structure of the slice reaches ``min_area_px`` (else it has no sample)."""
        return any(n >= self.case.options.min_area_px for n in self.areas.values())

    @cached_property
    def regions(self) -> tuple[Region, ...]:
        """One region per structure that reaches ``min_area_px``, by label value."""
        regions = []
        for value, area in sorted(self.areas.items()):
            if area < self.case.options.min_area_px:
                continue
            mask = self.plane == value
            size_hw, counts = rle_encode(mask)
            regions.append(
                Region(
                    label=self.case.names[value],
                    bbox=mask_to_xyxy(mask),
                    mask=MaskRef(size_hw=size_hw, counts=counts),
                )
            )
        return tuple(regions)


def slice_candidates(
    ctx: ScanContext, o: VolumeSliceOptions, cv: CaseVolumes
) -> Iterator[FileCandidate | QuarantineEntry]:
    """The candidates of one case, one per sample or quarantine entry it gives.

    The label volume is read here, not in ``read``: which slices have foreground, and whether
    a slice gives one sample per sequence or one entry (every structure below
    ``min_area_px``), is only known from it. Every candidate then stands for exactly one entry
    (so a shard owns whole entries, and the scan index counts entries as it always did), and
    ``read`` does the per-slice work: the structures' masks, boxes and RLE.
    """
    case = _open_case(ctx, o, cv)
    if isinstance(case, QuarantineEntry):
        yield case
        return
    for axis in o.axes:
        dim = {"sagittal": 0, "coronal": 1, "axial": 2}[axis]
        other = tuple(d for d in range(3) if d != dim)
        has_fg = np.any(case.labels != 0, axis=other)
        if o.empty_slices == "quarantine":
            for index in np.flatnonzero(~has_fg):
                yield ctx.quarantine(
                    f"{ctx.rel(cv.first_image)}#{axis}={index}", "slice has no foreground"
                )
        for index in np.flatnonzero(has_fg)[:: o.slice_step]:
            piece = VolumeSlice(case, axis, int(index))
            if not piece.kept:
                yield ctx.quarantine(
                    f"{ctx.rel(cv.label)}#{axis}={index}",
                    f"every structure of this slice is below min_area_px={o.min_area_px}",
                )
                continue
            for sequence, (path, _) in cv.images.items():
                yield FileCandidate(ctx.rel(path), (piece, sequence))


def read_slice(ctx: ScanContext, candidate: FileCandidate) -> Sample:
    """The sample of one sequence of one slice (a candidate of :func:`slice_candidates`)."""
    piece, sequence = candidate.info
    case, cv = piece.case, piece.case.volumes
    values = {name: value for value, name in case.names.items()}
    row_mm, col_mm = slice_spacing(case.spacing, piece.axis)
    present = [r.label for r in piece.regions]
    raw = [cv.labels[values[label]] for label in present]
    attributes = {
        **cv.attributes,
        "source_label": ",".join(raw),
        "case": cv.case,
        "label_volume": ctx.rel(cv.label),
        "label_values": json.dumps(values, sort_keys=True),
        "spacing_mm": f"{row_mm:g},{col_mm:g}",
    }
    if case.options.window:
        attributes["window"] = case.options.window
    channel = cv.images[sequence][1]
    if channel is not None:
        attributes["channel"] = str(channel)
    elif sequence in case.channels:  # a 4-D image with no channel chosen: its first
        attributes["channel"] = "0"
        attributes["channels"] = str(case.channels[sequence])
    if sequence:
        attributes["sequence"] = sequence
    for name in cv.missing:
        ctx.label_missing(name)
    height, width = slice_shape_hw(case.labels.shape, piece.axis)
    key = f"{cv.case}/{piece.axis}/{piece.index:04d}"
    return ctx.sample(
        candidate.rel,
        int(width),
        int(height),
        key=f"{key}/{sequence}" if sequence else key,
        group_id=cv.group_id,
        modality=cv.modality,
        slice=SliceRef(piece.axis, piece.index),
        labels=tuple(dict.fromkeys(present)),
        attributes=attributes,
        regions=piece.regions,
    )
