"""``colour_label_masks``: per-sequence frame folders with colour-coded label PNGs and a JSON
colour -> class table (EndoVis 2018 scene segmentation: ``seq_N/left_frames/frameNNN.png``,
``seq_N/labels/frameNNN.png``, ``labels.json`` = ``[{"name", "color": [r, g, b], "classid"}]``).

Each class present in a label image becomes one region per connected component (box + RLE).
One candidate per frame in the images folder; ``group_id`` is the sequence folder name.
Optional ``annotations_xml`` appends per-frame instrument boxes with their tool-tissue
interaction (``region<k>.interaction``) from third-party XML files (see ``instrument_xml``).

Release quirks handled here: the colour table is a bare list in the training releases but
``{"classes": [...]}`` with RGBA colours in the EndoVis 2018 test release (alpha is dropped);
each release lists only its own classes, so the table nearest the sequence is used; and
``label_repairs`` reads the organisers' corrected labels (``repairs.zip``: flat
``seq_<n>_frame<NNN>.png`` files for release 1) in place of the originals, without copying.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..errors import ImageProblem, SourceError
from ..geometry import mask_components, mask_to_xyxy, rle_encode
from ..media.image import check_image, load_rgb
from ..records import MaskRef, QuarantineEntry, Region, Sample
from ..store.table_text import read_json_file
from .base import LAYOUTS, FileCandidate, FileLayout, LabelProblem, LayoutOptions, ScanContext
from .discovery import Alternatives, Expect
from .instrument_xml import InstrumentXmlOptions, xml_regions
from .sequence_dirs import find_sequence_dirs, frame_candidates, frame_number, is_noise_dir


class LabelRepairsOptions(LayoutOptions):
    """Corrected label files shipped apart from the release (EndoVis 2018 ``repairs.zip``)."""

    dir: str = "repairs"  # folder name, looked for at any depth below the root
    # group 1: the sequence folder name, group 2: the frame stem (seq_1_frame042.png)
    file_regex: str = r"^(seq_\d+)_(frame\d+)\.png$"
    under: str | None = None  # only for sequences inside a folder of this name (the release)


class ColourLabelMasksOptions(LayoutOptions):
    sequence_regex: str = r"^seq_\d+$"  # folder names of sequences, at any depth below the root
    images_dir: str = "left_frames"
    labels_dir: str = "labels"
    label_name: str = "{stem}.png"  # label file of an image, in labels_dir
    # colour table file name: looked up in the sequence folder, then in each parent up to ROOT
    colour_map: str = "labels.json"
    name_key: str = "name"
    colour_key: str = "color"
    skip_classes: list[str] = []  # raw class names that never become regions (background)
    min_area_px: int = 16
    labels_required: bool = True  # a frame without a label file is quarantined
    split: str | None = None
    # folders of the sequence path kept in sample ids (None: all below ROOT; 2: release/seq_N)
    key_depth: int | None = None
    annotations_xml: InstrumentXmlOptions | None = None  # instrument boxes + interactions
    label_repairs: LabelRepairsOptions | None = None  # corrected labels used over the originals


ColourTable = dict[int, str]  # packed 0xRRGGBB -> raw class name
Repairs = dict[tuple[str, str], Path]  # (sequence folder name, frame stem) -> corrected label


@LAYOUTS.register("colour_label_masks")
class ColourLabelMasks(FileLayout):
    name = "colour_label_masks"
    Options = ColourLabelMasksOptions

    def expects(self) -> Alternatives:
        o = self.options
        return [[Expect(o.images_dir, "dir", name_regex=o.sequence_regex)]]

    def provides(self) -> set[str]:
        out = {"regions", "masks", "labels", "attribute:sequence"}
        if self.options.annotations_xml is not None:
            out |= {"region_attribute:interaction"}
        return out

    def candidates(self, ctx: ScanContext) -> Iterator[FileCandidate | QuarantineEntry]:
        """Every frame of every sequence, with the sequence's colour table and the repaired
        labels that apply to it (both read once)."""
        o = self.options
        sequences = find_sequence_dirs(ctx, o.sequence_regex, o.images_dir)
        repairs, r = self._repairs(ctx), o.label_repairs

        def per_sequence(seq: Path) -> tuple[ColourTable, Repairs]:
            table = self._colour_table(ctx, seq)
            fixes = repairs if r and (r.under is None or r.under in ctx.rel(seq).split("/")) else {}
            return table, fixes

        yield from frame_candidates(ctx, sequences, o.images_dir, o.key_depth, per_sequence)

    def read(self, ctx: ScanContext, candidate: FileCandidate) -> Sample:
        """One region per connected component of each class in the frame's label image (the
        repaired one when there is), then the XML instrument boxes."""
        o = self.options
        seq, path, key, (table, fixes) = candidate.info
        label_file = fixes.get((seq.name, path.stem)) or (
            seq / o.labels_dir / o.label_name.format(stem=path.stem)
        )
        width, height = check_image(path, ctx.verify, ctx.max_pixels)
        regions: list[Region] = []
        raw_names: list[str] = []
        if label_file.is_file():
            for raw, binary in self._classes(label_file, table, width, height):
                found = _component_regions(binary, ctx.canonical(raw), o.min_area_px)
                if found:
                    raw_names.append(raw)
                    regions.extend(found)
        elif o.labels_required:
            raise ImageProblem(f"label file {ctx.rel(label_file)} is missing")
        region_attributes = self._xml(ctx, seq, path, width, height, regions)
        return ctx.sample(
            candidate.rel,
            width,
            height,
            key=key,
            group_id=seq.name,
            frame=frame_number(path.stem),
            labels=tuple(sorted({r.label for r in regions})),
            attributes={
                "sequence": seq.name,
                "source_label": ",".join(sorted(raw_names)),
                **region_attributes,
            },
            regions=tuple(regions),
            split=o.split,
        )

    def _repairs(self, ctx: ScanContext) -> Repairs:
        """Corrected label files under any ``label_repairs.dir`` folder below the root (the
        first one in path order wins); sequence folders and ``__MACOSX`` are not searched."""
        r = self.options.label_repairs
        if r is None:
            return {}
        file_re, seq_re = re.compile(r.file_regex), re.compile(self.options.sequence_regex)
        found: Repairs = {}
        for dirpath, dirnames, filenames in os.walk(ctx.root):
            dirnames[:] = sorted(
                d for d in dirnames if not is_noise_dir(d) and not seq_re.search(d)
            )
            if Path(dirpath).name != r.dir:
                continue
            for name in sorted(filenames):
                if match := file_re.search(name):
                    found.setdefault((match.group(1), match.group(2)), Path(dirpath) / name)
        return found

    def _colour_table(self, ctx: ScanContext, seq: Path) -> ColourTable:
        """The colour table nearest the sequence (each release lists only its own classes)."""
        o = self.options
        folder = seq
        while not (folder / o.colour_map).is_file():
            if folder == ctx.root:
                raise SourceError(
                    f"{ctx.source}: expected the colour table {o.colour_map!r} in "
                    f"{ctx.rel(seq)!r} or a folder above it",
                    where=str(seq),
                    fix="unpack the release with its labels.json (see the source's docs page)",
                )
            folder = folder.parent
        path = folder / o.colour_map
        try:
            entries = read_json_file(path)
            if isinstance(entries, dict):  # the test release: {"classes": [...]}
                entries = entries["classes"]
            table: ColourTable = {}
            ctx.note_table(path, sorted({k for e in entries if isinstance(e, dict) for k in e}))
            for entry in entries:
                # [r, g, b] in the training releases, [r, g, b, a] in the test release
                r, g, b = (int(v) for v in entry[o.colour_key][:3])
                packed = (r << 16) | (g << 8) | b
                name = str(entry[o.name_key])
                if table.get(packed, name) != name:
                    raise ValueError(f"colour {[r, g, b]} is {table[packed]!r} and {name!r}")
                table[packed] = name
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as exc:
            raise SourceError(
                f"{ctx.source}: colour table is not a list of {{{o.name_key!r}, "
                f"{o.colour_key!r}: [r, g, b]}} entries ({exc.__class__.__name__}: {exc})",
                where=str(path),
            ) from None
        return table

    def _xml(
        self,
        ctx: ScanContext,
        seq: Path,
        path: Path,
        width: int,
        height: int,
        regions: list[Region],
    ) -> dict[str, str]:
        """Append the frame's XML instrument boxes to ``regions``; their attributes."""
        x = self.options.annotations_xml
        if x is None:
            return {}
        xml_file = seq / x.dir / x.file_name.format(stem=path.stem)
        if not xml_file.is_file():
            if x.required:
                raise ImageProblem(f"annotation {ctx.rel(xml_file)} is missing")
            return {}
        found, attributes = xml_regions(ctx, x, xml_file, width, height, first=len(regions))
        regions.extend(found)
        return attributes

    def _classes(self, label_file: Path, table: ColourTable, width: int, height: int):
        """``(raw name, binary mask)`` of each listed class in the label image, in table order."""
        o = self.options
        rgb = load_rgb(label_file).astype(np.int32)
        if rgb.shape[:2] != (height, width):
            raise ImageProblem(
                f"label {label_file.name} is {rgb.shape[1]}x{rgb.shape[0]}, "
                f"image is {width}x{height}"
            )
        packed = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
        colours, counts = np.unique(packed, return_counts=True)
        unknown = [(int(c), int(n)) for c, n in zip(colours, counts, strict=True) if c not in table]
        if unknown:
            c, n = unknown[0]
            raise LabelProblem(
                f"label colour {[c >> 16, (c >> 8) & 255, c & 255]} ({n} px) is "
                f"not in {o.colour_map}"
            )
        present = {int(c) for c in colours}
        for colour, raw in table.items():
            if colour in present and raw not in o.skip_classes:
                yield raw, packed == colour


def _component_regions(binary: np.ndarray, label: str, min_area_px: int) -> list[Region]:
    """One region per connected component (largest first), with box and RLE mask."""
    regions = []
    for component in mask_components(binary, min_area_px=min_area_px):
        size_hw, counts = rle_encode(component)
        regions.append(
            Region(
                label=label,
                bbox=mask_to_xyxy(component),
                mask=MaskRef(size_hw=size_hw, counts=counts),
            )
        )
    return regions
