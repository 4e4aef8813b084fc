"""``instrument_label_folders``: per-sequence frame folders with one grey-level mask folder per
instrument (EndoVis 2017 robotic instrument segmentation:
``instrument_dataset_N/left_frames/frameNNN.png`` and
``instrument_dataset_N/ground_truth/<Instrument>[_labels]/frameNNN.png``).

The folder name is the instrument type (the raw label); each mask file is one object, so a
frame gets one region per label folder whose mask is not empty, with the file as its mask.
Grey values inside a mask encode instrument parts (shaft / wrist / claspers); the parts seen
are kept per region as ``attributes["region<i>.parts"]``.

Release quirks handled here: some label folders lack the ``_labels`` suffix
(``instrument_dataset_6/ground_truth/Prograsp_Forceps``, ``instrument_dataset_7``'s
``Left_Bipolar_Forceps`` and ``Right_Vessel_Sealer``, per public loaders that list every
folder), some masks are stored as 3-channel PNGs (read as the largest channel, as the renderer
reads them), and the training archives unpack either side by side or each into a folder of its
own, so ``key_depth: 1`` keys samples by the sequence folder's name alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np

from ..errors import ImageProblem, SourceError
from ..geometry import mask_to_xyxy
from ..media.image import MASK_READ, check_image
from ..records import MaskRef, QuarantineEntry, Region, Sample
from .base import LAYOUTS, FileCandidate, FileLayout, LayoutOptions, ScanContext
from .discovery import Alternatives, Expect
from .sequence_dirs import find_sequence_dirs, frame_candidates, frame_number, is_noise_dir


class InstrumentLabelFoldersOptions(LayoutOptions):
    sequence_regex: str = r"^instrument_dataset_\d+$"  # at any depth below the root
    images_dir: str = "left_frames"
    labels_dir: str = "ground_truth"
    # group 1 is the raw instrument label; the "_labels" suffix is optional in the release
    label_folder_regex: str = r"^(.+?)(?:_labels)?$"
    part_values: dict[int, str] = {}  # grey value -> part name, e.g. {10: shaft}
    min_area_px: int = 16  # a mask with fewer non-zero pixels means "instrument not in view"
    labels_required: bool = True  # frames of a sequence without labels_dir are quarantined
    # folders of the sequence path kept in sample ids (None: all below ROOT; 1: the sequence
    # folder's name, for releases whose sequence names are unique across their archives)
    key_depth: int | None = None
    split: str | None = None


@LAYOUTS.register("instrument_label_folders")
class InstrumentLabelFolders(FileLayout):
    name = "instrument_label_folders"
    Options = InstrumentLabelFoldersOptions

    def __init__(self, options: InstrumentLabelFoldersOptions):
        super().__init__(options)
        self._folder_re = re.compile(options.label_folder_regex)

    def expects(self) -> Alternatives:
        o = self.options
        return [[Expect(o.images_dir, "dir", name_regex=o.sequence_regex)]]

    def provides(self) -> set[str]:
        return {"regions", "masks", "labels", "attribute:sequence"}

    def candidates(self, ctx: ScanContext) -> Iterator[FileCandidate | QuarantineEntry]:
        """Every frame of every sequence, with the sequence's label folders (listed once)."""
        o = self.options
        sequences = find_sequence_dirs(ctx, o.sequence_regex, o.images_dir)
        yield from frame_candidates(
            ctx, sequences, o.images_dir, o.key_depth, lambda seq: self._label_folders(ctx, seq)
        )

    def _label_folders(self, ctx: ScanContext, seq: Path) -> list[tuple[str, Path]] | None:
        """``(raw label, folder)`` per instrument, or ``None`` when the sequence has no labels."""
        base = seq / self.options.labels_dir
        if not base.is_dir():
            return None
        folders = []
        for folder in sorted(p for p in base.iterdir() if p.is_dir() and not is_noise_dir(p.name)):
            match = self._folder_re.search(folder.name)
            if match is None:
                raise SourceError(
                    f"{ctx.source}: label folder {folder.name!r} does not match "
                    f"{self.options.label_folder_regex!r} (expected <Instrument>_labels)",
                    where=str(folder),
                    fix="check the manifest's label_folder_regex against the release",
                )
            folders.append((match.group(1), folder))
        return folders

    def read(self, ctx: ScanContext, candidate: FileCandidate) -> Sample:
        """One region per label folder whose mask of this frame is not empty; a frame no
        folder has a mask for is not labelled (a test frame), not a frame without tools."""
        o = self.options
        seq, path, key, folders = candidate.info
        attributes = {"sequence": seq.name}
        regions: list[Region] = []
        width, height = check_image(path, ctx.verify, ctx.max_pixels)
        if folders is None and o.labels_required:
            raise ImageProblem(f"{ctx.rel(seq)} has no {o.labels_dir!r} folder")
        if folders and not any((folder / path.name).is_file() for _, folder in folders):
            raise ImageProblem(
                f"no mask for {path.name} in any of the {len(folders)} folders of "
                f"{ctx.rel(seq / o.labels_dir)} (an unlabelled test frame?)"
            )
        for raw, folder in folders or ():
            found = self._region(ctx, raw, folder / path.name, width, height)
            if found is not None:
                region, parts = found
                i = len(regions)
                attributes[f"region{i}.source_label"] = raw
                if o.part_values:
                    attributes[f"region{i}.parts"] = ",".join(parts)
                regions.append(region)
        raw_labels = sorted({attributes[f"region{i}.source_label"] for i in range(len(regions))})
        return ctx.sample(
            candidate.rel,
            width,
            height,
            key=key,
            group_id=seq.name,
            frame=frame_number(path.stem),
            labels=tuple(sorted({r.label for r in regions})),
            attributes={"source_label": ",".join(raw_labels), **attributes},
            regions=tuple(regions),
            split=o.split,
        )

    def _region(self, ctx: ScanContext, raw: str, mask_file: Path, width: int, height: int):
        """The instrument's region and its parts, or ``None`` when the mask is (nearly) empty."""
        o = self.options
        if not mask_file.is_file():
            raise ImageProblem(f"mask {ctx.rel(mask_file)} is missing")
        mask = _read_mask(mask_file)
        if mask.shape[:2] != (height, width):
            raise ImageProblem(
                f"mask {ctx.rel(mask_file)} is {mask.shape[1]}x{mask.shape[0]}, "
                f"image is {width}x{height}"
            )
        nonzero = mask > 0
        if int(nonzero.sum()) < o.min_area_px:
            return None
        label = ctx.canonical(raw)
        values = {int(v) for v in np.unique(mask[nonzero])}
        parts = sorted(o.part_values[v] for v in values if v in o.part_values)
        region = Region(
            label=label, bbox=mask_to_xyxy(nonzero), mask=MaskRef(path=ctx.rel(mask_file))
        )
        return region, parts


def _read_mask(path: Path) -> np.ndarray:
    """A mask file as a 2-D array: a grey PNG as is, a colour one (some EndoVis 2017 masks are
    3-channel) as its largest colour channel, alpha ignored; the renderer reads it the same way
    (non-zero in any channel), so boxes and drawn masks agree."""
    data = np.fromfile(str(path), dtype=np.uint8)
    mask = cv2.imdecode(data, MASK_READ) if data.size else None
    if mask is None:
        raise ImageProblem(f"cannot decode mask {path.name}")
    return mask if mask.ndim == 2 else mask[..., :3].max(axis=2)
