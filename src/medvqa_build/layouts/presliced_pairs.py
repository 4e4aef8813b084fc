"""``presliced_pairs``: 2-D corpora that already sliced their volumes into PNG files, one image
per slice and one binary mask file per structure (instance), the modality, dataset, case,
slice axis and index spelled out in the image name and the structure in the mask name.

SA-Med2D-20M (``images/ct_00--AbdomenCT1K--Case_00011--x_0040.png`` with
``masks/ct_00--AbdomenCT1K--Case_00011--x_0040--0003_000.png``, the class id resolved through
``SAMed2D_v1_class_mapping_id.json``) is the reference layout; ``image_regex`` and
``mask_regex`` carry other spellings. A mask either names its structure (``structure`` group)
or gives a class id (``class`` group) looked up in ``class_map_json``. The masks folder is
listed once and grouped by image stem, so finding a slice's masks costs no directory walk.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from ..errors import ImageProblem, SourceError
from ..geometry import mask_to_xyxy, rle_encode
from ..media.image import check_image, load_mask
from ..records import MaskRef, QuarantineEntry, Region, Sample
from ..store.table_text import read_json_file
from .base import (
    LAYOUTS,
    FileCandidate,
    FileLayout,
    LabelProblem,
    LayoutOptions,
    ScanContext,
)
from .discovery import Alternatives, expect_paths

# SA-Med2D-20M's image name: <modality>_<sub-modality>--<dataset>--<case>--<axis>_<index>.png
# (the name definition of the corpus' own tooling, see docs/sources/sa-med2d-20m.md)
SA_MED2D_IMAGE = (
    r"^(?P<modality>[^-]+)--(?P<dataset>.+?)--(?P<case>.+)--"
    r"(?P<axis>[a-z])_(?P<index>\d+)\.png$"
)
SA_MED2D_MASK = r"^(?P<class>\d+)_(?P<instance>\d+)\.png$"
# the name a mask left out for its size is counted under (labels_missing in the report)
MASK_SIZE_DIFFERS = "mask (size differs from its image)"


class PreslicedPairsOptions(LayoutOptions):
    images_dir: str = "images"
    masks_dir: str = "masks"
    image_regex: str = SA_MED2D_IMAGE  # needs a 'case' group; 'modality', 'axis', 'index' used
    mask_separator: str = "--"  # mask name = <image stem><separator><mask part>
    mask_regex: str = SA_MED2D_MASK  # on <mask part>: a 'structure' or a 'class' group
    class_map_json: str | None = None  # {dataset: {structure: class id}} or {structure: id}
    class_map_key: str = "dataset"  # image_regex group that picks the per-dataset map
    # image modality token -> canonical modality; a key matches the token or its prefix
    # before "_<sub-modality>" (ct_00 -> ct, mr_t1 -> mri with sequence t1)
    modality_map: dict[str, str] = {}
    skip_structures: str | None = None  # regex: structures left out (SA-Med2D "union_*")
    group: str = "{dataset}/{case}"  # group_id from the image_regex groups
    min_area_px: int = 1
    # datasets (image_regex 'dataset' group) whose masks are 0 on the structure, >0 elsewhere
    inverted_mask_datasets: list[str] = []


@LAYOUTS.register("presliced_pairs")
class PreslicedPairs(FileLayout):
    name = "presliced_pairs"
    Options = PreslicedPairsOptions

    def __init__(self, options: PreslicedPairsOptions):
        super().__init__(options)
        self._image_re = re.compile(options.image_regex)
        self._mask_re = re.compile(options.mask_regex)
        self._skip = re.compile(options.skip_structures) if options.skip_structures else None

    def expects(self) -> Alternatives:
        o = self.options
        return [
            expect_paths(o.images_dir, o.masks_dir, kind="dir")
            + expect_paths(o.class_map_json, kind="file")
        ]

    def provides(self) -> set[str]:
        return {"labels", "regions", "masks", "attribute:source_label", "attribute:dataset"}

    def candidates(self, ctx: ScanContext) -> Iterator[FileCandidate | QuarantineEntry]:
        """Every PNG of ``images_dir`` in name order, with its name's groups and its mask
        files (the masks folder is listed once and grouped by image stem); a name that does
        not match ``image_regex`` is quarantined in its place."""
        o = self.options
        images = ctx.require_dir(o.images_dir, "images")
        masks = ctx.require_dir(o.masks_dir, "masks")
        class_map = self._class_map(ctx)
        by_stem: dict[str, list[str]] = defaultdict(list)
        for name in _names(masks):
            stem, sep, _ = name.rpartition(o.mask_separator)
            if sep:
                by_stem[stem].append(name)
        for name in _names(images):
            path = images / name
            found = self._image_re.search(name)
            if found is None or "case" not in found.groupdict():
                yield ctx.quarantine(ctx.rel(path), f"file name does not match {o.image_regex!r}")
                continue
            groups = {k: v for k, v in found.groupdict().items() if v is not None}
            mask_names = sorted(by_stem.get(path.stem, []))
            yield FileCandidate(ctx.rel(path), (path, groups, mask_names, class_map))

    def read(self, ctx: ScanContext, candidate: FileCandidate) -> Sample:
        """One slice's sample, a region per mask; its id is the image's stem (the images
        folder is flat, so stems are unique); a mask whose size differs from the image is
        left out and counted."""
        o = self.options
        path, groups, mask_names, class_map = candidate.info
        modality, sequence = self._modality(ctx, groups.get("modality"))
        width, height = check_image(path, ctx.verify, ctx.max_pixels)
        if not mask_names:
            raise ImageProblem(f"no mask file {path.stem}{o.mask_separator}* in {o.masks_dir}")
        regions, raw, dropped = self._regions(
            ctx, path, mask_names, groups, class_map, width, height
        )
        for _ in dropped:
            ctx.label_missing(MASK_SIZE_DIFFERS)
        return ctx.sample(
            candidate.rel,
            width,
            height,
            key=path.stem,
            group_id=o.group.format_map(_Groups(groups)),
            modality=modality,
            labels=tuple(dict.fromkeys(r.label for r in regions)),
            attributes=_attributes(groups, raw, sequence),
            regions=regions,
        )

    def _class_map(self, ctx: ScanContext) -> dict:
        o = self.options
        if o.class_map_json is None:
            return {}
        path = ctx.require_file(o.class_map_json, "class map JSON")
        ctx.note_table(path, ["dataset", "class name", "class id"])
        try:
            return read_json_file(path)
        except (OSError, ValueError) as exc:
            raise SourceError(
                f"{ctx.source}: cannot read {o.class_map_json} ({exc})",
                where=str(path),
                fix="re-extract the file from the release",
            ) from None

    def _modality(self, ctx: ScanContext, token: str | None) -> tuple[str, str]:
        """Canonical modality and sub-modality (sequence) of the image's modality token."""
        if token is None or not self.options.modality_map:
            return ctx.modality, ""
        for key in sorted(self.options.modality_map, key=len, reverse=True):
            if token == key or token.startswith(key + "_"):
                sub = token[len(key) + 1 :]
                return self.options.modality_map[key], "" if sub in ("", "00") else sub
        raise ImageProblem(f"modality {token!r} is not in the manifest's modality_map")

    def _regions(
        self,
        ctx: ScanContext,
        path: Path,
        mask_names: list[str],
        groups: dict,
        class_map: dict,
        width: int,
        height: int,
    ) -> tuple[tuple[Region, ...], list[str], list[str]]:
        """The image's regions, their raw structure names, and the masks left out because
        their size differs from the image's."""
        regions, raw, dropped = [], [], []
        invert = groups.get("dataset") in self.options.inverted_mask_datasets
        for name in mask_names:
            part = name.rpartition(self.options.mask_separator)[2]
            found = self._mask_re.search(part)
            if found is None:
                raise ImageProblem(f"mask {name} does not match {self.options.mask_regex!r}")
            structure = self._structure(found.groupdict(), groups, class_map, name)
            if self._skip is not None and self._skip.search(structure):
                continue
            mask_file = ctx.root / self.options.masks_dir / name
            mask = load_mask(mask_file)
            if mask.shape[:2] != (height, width):
                dropped.append(f"mask {name} is {mask.shape[1]}x{mask.shape[0]}")
                continue
            binary = mask == 0 if invert else mask > 0
            box = mask_to_xyxy(binary)
            if box is None or int(binary.sum()) < self.options.min_area_px:
                raise ImageProblem(f"mask {name} is empty")
            # one object per file (the corpus splits instances): the file is the mask, its RLE
            # rides along so the MedSG generators and renderers need not reopen the file
            size_hw, counts = rle_encode(binary)
            regions.append(
                Region(
                    label=ctx.canonical(structure),
                    bbox=box,
                    mask=MaskRef(path=ctx.rel(mask_file), size_hw=size_hw, counts=counts),
                )
            )
            raw.append(structure)
        if not regions and dropped:
            raise ImageProblem(f"{'; '.join(dropped)}, image is {width}x{height}")
        if not regions:
            raise ImageProblem(f"every mask of {path.name} is left out by skip_structures")
        return tuple(regions), raw, dropped

    def _structure(self, found: dict, groups: dict, class_map: dict, name: str) -> str:
        if found.get("structure"):
            return found["structure"]
        if found.get("class") is None:
            raise ImageProblem(f"mask_regex has neither a 'structure' nor a 'class' group ({name})")
        table = class_map
        key = groups.get(self.options.class_map_key)
        if key is not None and isinstance(class_map.get(key), dict):
            table = class_map[key]
        names = {
            int(v): k for k, v in table.items() if isinstance(v, int | str) and str(v).isdigit()
        }
        value = int(found["class"])
        if value not in names:
            raise LabelProblem(
                f"class {value} of mask {name} is not in {self.options.class_map_json} for {key!r}"
            )
        return names[value]


def _attributes(groups: dict[str, str], raw: list[str], sequence: str) -> dict[str, str]:
    """A slice's attributes: its name's groups (the slice axis and index under their own
    names), the modality token, the case, and the raw structure names of its masks."""
    attributes = {k: v for k, v in groups.items() if k not in ("case", "axis", "index", "modality")}
    if "modality" in groups:
        attributes["source_modality"] = groups["modality"]
    attributes.update(case=groups["case"], source_label=",".join(dict.fromkeys(raw)))
    if sequence:
        attributes["sequence"] = sequence
    if "axis" in groups:
        attributes["slice_axis"] = groups["axis"]
    if "index" in groups:
        attributes["slice_index"] = str(int(groups["index"]))
    return attributes


class _Groups(dict):
    """Missing regex groups format as an empty string in ``group``."""

    def __missing__(self, key: str) -> str:
        return ""


def _names(folder: Path) -> list[str]:
    """Sorted PNG names of a flat folder (millions of files: one scandir, no stat)."""
    with os.scandir(folder) as entries:
        return sorted(
            e.name
            for e in entries
            if e.name.lower().endswith(".png") and not e.name.startswith(".")
        )
