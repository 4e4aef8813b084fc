"""``colour_label_masks``: per-sequence frame folders with colour-coded label PNGs and a JSON
colour -> class table (EndoVis 2018 scene segmentation: ``seq_N/left_frames/frameNNN.png``,
``seq_N/labels/frameNNN.png``, ``labels.json`` = ``[{"name", "color": [r, g, b], "classid"}]``).

Each class present in a label image becomes one region per connected component (box + RLE).
One candidate per frame in the images folder; ``group_id`` is the sequence folder name.
Optional ``annotations_xml`` appends per-frame instrument boxes with their tool-tissue
interaction (``region<k>.interaction``) from third-party XML files (see ``instrument_xml``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..errors import SourceError
from ..geometry import mask_components, mask_to_xyxy, rle_encode
from ..media.image import ImageProblem, check_image, load_rgb
from ..quarantine import QuarantineEntry
from ..records import MaskRef, Region, Sample
from .base import LAYOUTS, LabelProblem, LayoutOptions, ScanContext, sorted_files
from .instrument_xml import InstrumentXmlOptions, xml_regions
from .sequence_dirs import find_sequence_dirs, frame_number


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
    annotations_xml: InstrumentXmlOptions | None = None  # instrument boxes + interactions


ColourTable = dict[int, str]  # packed 0xRRGGBB -> raw class name


@LAYOUTS.register("colour_label_masks")
class ColourLabelMasks:
    name = "colour_label_masks"
    Options = ColourLabelMasksOptions

    def __init__(self, options: ColourLabelMasksOptions):
        self.o = options

    def scan(self, ctx: ScanContext) -> Iterator[Sample | QuarantineEntry]:
        for seq in find_sequence_dirs(ctx, self.o.sequence_regex, self.o.images_dir):
            table = self._colour_table(ctx, seq)
            for path in sorted_files(seq / self.o.images_dir):
                yield self._sample(ctx, seq, path, table)

    def _colour_table(self, ctx: ScanContext, seq: Path) -> ColourTable:
        folder = seq
        while not (folder / self.o.colour_map).is_file():
            if folder == ctx.root:
                raise SourceError(
                    f"{ctx.source}: expected the colour table {self.o.colour_map!r} in "
                    f"{ctx.rel(seq)!r} or a folder above it",
                    where=str(seq),
                    fix="unpack the release with its labels.json (see the source's docs page)",
                )
            folder = folder.parent
        path = folder / self.o.colour_map
        try:
            entries = json.loads(path.read_text(encoding="utf-8"))
            table: ColourTable = {}
            for entry in entries:
                r, g, b = (int(v) for v in entry[self.o.colour_key])
                packed = (r << 16) | (g << 8) | b
                if packed in table:
                    raise ValueError(f"colour {[r, g, b]} is listed twice")
                table[packed] = str(entry[self.o.name_key])
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as exc:
            raise SourceError(
                f"{ctx.source}: colour table is not a list of {{{self.o.name_key!r}, "
                f"{self.o.colour_key!r}: [r, g, b]}} entries ({exc.__class__.__name__}: {exc})",
                where=str(path),
            ) from None
        return table

    def _sample(self, ctx: ScanContext, seq: Path, path: Path, table: ColourTable):
        o = self.o
        rel = ctx.rel(path)
        label_file = seq / o.labels_dir / o.label_name.format(stem=path.stem)
        try:
            width, height = check_image(path, ctx.verify)
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
        except (ImageProblem, LabelProblem) as exc:
            return ctx.quarantine(rel, str(exc))
        sequence = seq.name
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
            attributes={
                "sequence": sequence,
                "source_label": ",".join(sorted(raw_names)),
                **region_attributes,
            },
            regions=tuple(regions),
            group_id=sequence,
            split=o.split,
        )

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
        x = self.o.annotations_xml
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
                f"not in {self.o.colour_map}"
            )
        present = {int(c) for c in colours}
        for colour, raw in table.items():
            if colour in present and raw not in self.o.skip_classes:
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
