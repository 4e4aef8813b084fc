"""``instrument_label_folders``: per-sequence frame folders with one grey-level mask folder per
instrument (EndoVis 2017 robotic instrument segmentation:
``instrument_dataset_N/left_frames/frameNNN.png`` and
``instrument_dataset_N/ground_truth/<Instrument>_labels/frameNNN.png``).

The folder name is the instrument type (the raw label); each mask file is one object, so a
frame gets one region per label folder whose mask is not empty, with the file as its mask.
Grey values inside a mask encode instrument parts (shaft / wrist / claspers); the parts seen
are kept per region as ``attributes["region<i>.parts"]``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..errors import SourceError
from ..geometry import mask_to_xyxy
from ..media.image import ImageProblem, check_image, load_mask
from ..quarantine import QuarantineEntry
from ..records import MaskRef, Region, Sample
from .base import LAYOUTS, LabelProblem, LayoutOptions, ScanContext, sorted_files
from .sequence_dirs import find_sequence_dirs, frame_number


class InstrumentLabelFoldersOptions(LayoutOptions):
    sequence_regex: str = r"^instrument_dataset_\d+$"  # at any depth below the root
    images_dir: str = "left_frames"
    labels_dir: str = "ground_truth"
    label_folder_regex: str = r"^(.+)_labels$"  # group 1 is the raw instrument label
    part_values: dict[int, str] = {}  # grey value -> part name, e.g. {10: shaft}
    min_area_px: int = 16  # a mask with fewer non-zero pixels means "instrument not in view"
    labels_required: bool = True  # frames of a sequence without labels_dir are quarantined
    split: str | None = None


@LAYOUTS.register("instrument_label_folders")
class InstrumentLabelFolders:
    name = "instrument_label_folders"
    Options = InstrumentLabelFoldersOptions

    def __init__(self, options: InstrumentLabelFoldersOptions):
        self.o = options
        self._folder_re = re.compile(options.label_folder_regex)

    def scan(self, ctx: ScanContext) -> Iterator[Sample | QuarantineEntry]:
        for seq in find_sequence_dirs(ctx, self.o.sequence_regex, self.o.images_dir):
            folders = self._label_folders(ctx, seq)
            for path in sorted_files(seq / self.o.images_dir):
                yield self._sample(ctx, seq, path, folders)

    def _label_folders(self, ctx: ScanContext, seq: Path) -> list[tuple[str, Path]] | None:
        """``(raw label, folder)`` per instrument, or ``None`` when the sequence has no labels."""
        base = seq / self.o.labels_dir
        if not base.is_dir():
            return None
        folders = []
        for folder in sorted(p for p in base.iterdir() if p.is_dir()):
            match = self._folder_re.search(folder.name)
            if match is None:
                raise SourceError(
                    f"{ctx.source}: label folder {folder.name!r} does not match "
                    f"{self.o.label_folder_regex!r} (expected <Instrument>_labels)",
                    where=str(folder),
                    fix="check the manifest's label_folder_regex against the release",
                )
            folders.append((match.group(1), folder))
        return folders

    def _sample(self, ctx: ScanContext, seq: Path, path: Path, folders):
        o = self.o
        rel = ctx.rel(path)
        attributes = {"sequence": seq.name}
        regions: list[Region] = []
        try:
            width, height = check_image(path, ctx.verify)
            if folders is None and o.labels_required:
                raise ImageProblem(f"{ctx.rel(seq)} has no {o.labels_dir!r} folder")
            for raw, folder in folders or ():
                mask_file = folder / path.name
                found = self._region(ctx, raw, mask_file, width, height)
                if found is not None:
                    region, parts = found
                    i = len(regions)
                    attributes[f"region{i}.source_label"] = raw
                    if o.part_values:
                        attributes[f"region{i}.parts"] = ",".join(parts)
                    regions.append(region)
        except (ImageProblem, LabelProblem) as exc:
            return ctx.quarantine(rel, str(exc))
        raw_labels = sorted({attributes[f"region{i}.source_label"] for i in range(len(regions))})
        return Sample(
            sample_id=ctx.sample_id(f"{ctx.rel(seq)}/{path.stem}"),
            source=ctx.source,
            image=rel,
            frame=frame_number(path.stem),
            width=width,
            height=height,
            modality=ctx.modality,
            scene=ctx.scene,
            labels=tuple(sorted({r.label for r in regions})),
            attributes={"source_label": ",".join(raw_labels), **attributes},
            regions=tuple(regions),
            group_id=seq.name,
            split=o.split,
        )

    def _region(self, ctx: ScanContext, raw: str, mask_file: Path, width: int, height: int):
        """The instrument's region and its parts, or ``None`` when the mask is (nearly) empty."""
        if not mask_file.is_file():
            raise ImageProblem(f"mask {ctx.rel(mask_file)} is missing")
        mask = load_mask(mask_file)
        if mask.shape[:2] != (height, width):
            raise ImageProblem(
                f"mask {ctx.rel(mask_file)} is {mask.shape[1]}x{mask.shape[0]}, "
                f"image is {width}x{height}"
            )
        nonzero = mask > 0
        if int(nonzero.sum()) < self.o.min_area_px:
            return None
        label = ctx.canonical(raw)
        values = {int(v) for v in np.unique(mask[nonzero])}
        parts = sorted(self.o.part_values[v] for v in values if v in self.o.part_values)
        region = Region(
            label=label, bbox=mask_to_xyxy(nonzero), mask=MaskRef(path=ctx.rel(mask_file))
        )
        return region, parts
