"""``image_mask_pairs``: an image folder and a mask folder paired by file stem (Kvasir-SEG,
CVC-ClinicDB/ColonDB/300, ETIS-Larib, the PraNet test bundle, PolypGen, SUN-SEG, KID), with an
optional box JSON keyed by stem and an optional per-image label table (SUN-SEG
``classification.txt``) that names each image's region label.

The same dataset often circulates in several folder shapes (the owner's release and the
PraNet ``TestDataset/<name>/{images,masks}`` bundle), so ``folders`` lists the accepted
shapes and the first one present under the root (its folders and its box JSON) is read.
A label the table leaves out keeps the image: its mask regions get ``region_label`` and it
has no image label (counted under the table's ``field``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ImageProblem, SourceError
from ..media.image import check_image
from ..records import MaskRef, Region, Sample
from ..store.paths import IMAGE_EXTENSIONS, sorted_files, without_suffix
from .base import (
    LAYOUTS,
    FileCandidate,
    FileLayout,
    LayoutOptions,
    ScanContext,
    attribute_caps,
)
from .discovery import Alternatives, expect_paths
from .image_label_table import ImageLabels, ImageLabelTableOptions, label_for, read_image_labels
from .json_boxes import BoxJsonOptions, read_box_json, regions_from_entry
from .masks import regions_from_mask


class PairFolders(BaseModel):
    """One accepted folder shape: ``<images_dir>/<sub>/<image>`` pairs with
    ``<masks_dir>/<sub>/<mask_name>``."""

    model_config = ConfigDict(extra="forbid")

    images_dir: str
    masks_dir: str
    # {stem}/{ext} of the image: "p{stem}.tif", "{stem}_mask.jpg"; a list is tried in order
    mask_name: str | list[str] = "{stem}{ext}"
    # rewrites of <sub> for the mask side ("images_": "masks_" for seqN/images_seqN in PolypGen)
    mask_subdir_replace: dict[str, str] = {}
    # only files whose path below images_dir matches are images (masks may share the tree)
    image_path_regex: str | None = None
    boxes: BoxJsonOptions | None = None
    # per-image raw labels (replaces region_label for the images it lists)
    labels: ImageLabelTableOptions | None = None


class ImageMaskPairsOptions(LayoutOptions):
    folders: list[PairFolders] = Field(min_length=1)
    extensions: list[str] = list(IMAGE_EXTENSIONS)
    region_label: str = "polyp"  # raw label of every mask region, mapped through label_map
    mask_regions: Literal["components", "file"] = "components"  # file: one region = the file
    min_area_px: int = 16
    mask_required: bool = True  # a missing mask quarantines the image
    image_label: Literal["if_regions", "always", "never"] = "if_regions"
    group_by: Literal["image", "folder", "ranges", "regex"] = "image"
    # group name -> [first, last] numeric stems (inclusive), for releases that number frames
    # sequence after sequence; only with group_by: ranges
    group_ranges: dict[str, tuple[int, int]] = {}
    # searched in the image path below the root; group 1 is the group id; only with group_by: regex
    group_regex: str | None = None
    split: str | None = None  # official split of every sample of the part
    attributes: dict[str, str] = {}  # constant attributes of every sample of the part

    @property
    def missing_values(self) -> list[str] | None:
        """The "no value" markers of the part's label tables (None: the part reads none), as
        table-driven layouts expose them (docs/scripts/gen_sources_md.py lists them)."""
        tables = [f.labels for f in self.folders if f.labels is not None]
        if not tables:
            return None
        return list(dict.fromkeys(m for t in tables for m in t.missing_values))


class _Part(NamedTuple):
    """What every candidate of the part shares: the folder shape found under the root, its
    image folder, and its box JSON and label table (read once)."""

    folders: PairFolders
    base: Path
    boxes: dict | None
    labels: ImageLabels | None


@LAYOUTS.register("image_mask_pairs")
class ImageMaskPairs(FileLayout):
    name = "image_mask_pairs"
    Options = ImageMaskPairsOptions

    def __init__(self, options: ImageMaskPairsOptions):
        super().__init__(options)
        if (options.group_by == "regex") != (options.group_regex is not None):
            raise SourceError(
                "group_regex is needed with, and only with, group_by: regex",
                where=f"group_by={options.group_by!r}",
            )
        self._group_re = re.compile(options.group_regex) if options.group_regex else None

    def _folders(self, ctx: ScanContext) -> PairFolders:
        for folders in self.options.folders:
            boxes = folders.boxes
            if (
                (ctx.root / folders.images_dir).is_dir()
                and (ctx.root / folders.masks_dir).is_dir()
                and (boxes is None or (ctx.root / boxes.file).is_file())
            ):
                return folders
        expected = " or ".join(
            f"{f.images_dir!r} + {f.masks_dir!r}" + (f" + {f.boxes.file!r}" if f.boxes else "")
            for f in self.options.folders
        )
        raise SourceError(
            f"{ctx.source}: expected the image and mask folders {expected} under the source root",
            where=str(ctx.root),
            fix="point ROOT at the unpacked dataset (see the source's docs page)",
        )

    def expects(self) -> Alternatives:
        """Each shape's two folders and, where it names one, its box JSON: a folder shape
        without the JSON (the PraNet copy of Kvasir-SEG) is another shape, not this one."""
        return [
            expect_paths(f.images_dir, f.masks_dir, kind="dir")
            + (expect_paths(f.boxes.file, kind="file") if f.boxes else [])
            for f in self.options.folders
        ]

    def provides(self) -> set[str]:
        o = self.options
        out = attribute_caps(o.attributes)
        if o.mask_required:  # else masks may be absent throughout (KID's normal frames)
            out |= {"regions", "masks"}
        if o.image_label == "always" or (o.image_label == "if_regions" and o.mask_required):
            out |= {"labels", "attribute:source_label"}
        if any(f.boxes for f in o.folders):
            out.add("attribute:box_count")
        return out

    def candidates(self, ctx: ScanContext) -> Iterator[FileCandidate]:
        """Every image of the first folder shape present (masks may share its tree: only the
        paths ``image_path_regex`` matches), with the shape's box JSON and label table."""
        folders = self._folders(ctx)
        part = _Part(
            folders,
            ctx.root / folders.images_dir,
            read_box_json(ctx, folders.boxes) if folders.boxes is not None else None,
            read_image_labels(ctx, folders.labels) if folders.labels is not None else None,
        )
        wanted = re.compile(folders.image_path_regex or "")
        for path in sorted_files(part.base, tuple(e.lower() for e in self.options.extensions)):
            if wanted.search(path.relative_to(part.base).as_posix()):
                yield FileCandidate(ctx.rel(path), (part, path))

    def read(self, ctx: ScanContext, candidate: FileCandidate) -> Sample:
        o = self.options
        part, path = candidate.info
        folders = part.folders
        mask_file, mask_found = _mask_file(ctx.root, folders, part.base, path)
        attributes = dict(o.attributes)
        width, height = check_image(path, ctx.verify, ctx.max_pixels)
        raw_label, label_given = o.region_label, True
        if part.labels is not None and folders.labels is not None:
            listed = label_for(part.labels, folders.labels, path.relative_to(part.base))
            if listed is None:  # left out by the table: the mask still shows a region
                label_given = False
            else:
                raw_label = listed
        label = ctx.canonical(raw_label)
        regions: tuple[Region, ...] = ()
        if mask_found:
            regions = self._mask_regions(ctx, mask_file, label, width, height)
        elif o.mask_required:
            raise ImageProblem(f"mask {ctx.rel(mask_file)} is missing")
        if part.boxes is not None and folders.boxes is not None:
            attributes.update(_box_attributes(ctx, folders.boxes, part.boxes, path, width, height))
        group_id = self._group(without_suffix(candidate.rel), path, ctx.root)
        if not label_given and folders.labels is not None:
            ctx.label_missing(folders.labels.field)
        show = label_given and (
            o.image_label == "always" or (o.image_label == "if_regions" and bool(regions))
        )
        if show:
            attributes["source_label"] = raw_label
        return ctx.sample(
            candidate.rel,
            width,
            height,
            labels=(label,) if show else (),
            attributes=attributes,
            regions=regions,
            group_id=group_id,
            split=o.split,
        )

    def _group(self, key: str, path: Path, root: Path) -> str:
        o = self.options
        if o.group_by == "folder":  # the image's folder below the root (a sequence)
            return path.parent.relative_to(root).as_posix()
        if o.group_by == "ranges":
            number = re.search(r"\d+", path.stem)
            for name, (first, last) in o.group_ranges.items():
                if number is not None and first <= int(number.group()) <= last:
                    return name
            raise ImageProblem(
                f"image number {path.stem!r} is in none of the manifest's group_ranges"
            )
        if self._group_re is not None:
            match = self._group_re.search(path.relative_to(root).as_posix())
            if match is None:
                raise ImageProblem(f"no group id in the path (group_regex {o.group_regex!r})")
            return match.group(1)
        return key

    def _mask_regions(
        self, ctx: ScanContext, mask_file: Path, label: str, width: int, height: int
    ) -> tuple[Region, ...]:
        regions = regions_from_mask(mask_file, label, width, height, self.options.min_area_px)
        if self.options.mask_regions == "components" or not regions:
            return regions
        # One object per file: the file is the mask, the box spans every component.
        x1 = min(r.bbox[0] for r in regions)
        y1 = min(r.bbox[1] for r in regions)
        x2 = max(r.bbox[2] for r in regions)
        y2 = max(r.bbox[3] for r in regions)
        return (Region(label=label, bbox=(x1, y1, x2, y2), mask=MaskRef(path=ctx.rel(mask_file))),)


def _mask_file(root: Path, folders: PairFolders, base: Path, path: Path) -> tuple[Path, bool]:
    """The image's mask: the first of the shape's mask names that is a file (one stat per
    name), else the first name (what a "missing" reason names); and whether it was found."""
    sub = path.parent.relative_to(base).as_posix()
    for old, new in folders.mask_subdir_replace.items():
        sub = sub.replace(old, new)
    names = [folders.mask_name] if isinstance(folders.mask_name, str) else folders.mask_name
    files = [
        root / folders.masks_dir / sub / n.format(stem=path.stem, ext=path.suffix) for n in names
    ]
    found = next((f for f in files if f.is_file()), None)
    return (found, True) if found is not None else (files[0], False)


def _box_attributes(
    ctx: ScanContext, opts: BoxJsonOptions, boxes: dict, path: Path, width: int, height: int
) -> dict[str, str]:
    """The owners' boxes of the image, kept beside its mask regions (the masks are the
    authoritative outline); an image the box JSON does not list is a per-file problem."""
    if path.stem not in boxes:
        raise ImageProblem(f"image not listed in {opts.file}")
    box_regions, _ = regions_from_entry(ctx, opts, boxes[path.stem], width, height)
    return {
        "source_boxes": json.dumps([list(r.bbox) for r in box_regions]),
        "box_count": str(len(box_regions)),
    }
