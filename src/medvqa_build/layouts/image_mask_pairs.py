"""``image_mask_pairs``: an image folder and a mask folder paired by file stem (Kvasir-SEG,
CVC-ClinicDB/ColonDB/300, ETIS-Larib, the PraNet test bundle, PolypGen, SUN-SEG), with an
optional box JSON keyed by stem and an optional per-image label table (SUN-SEG
``classification.txt``) that names each image's region label.

The same dataset often circulates in several folder shapes (the owner's release and the
PraNet ``TestDataset/<name>/{images,masks}`` bundle), so ``folders`` lists the accepted
shapes and the first one present under the root is read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..errors import SourceError
from ..media.image import ImageProblem, check_image
from ..quarantine import QuarantineEntry
from ..records import MaskRef, Region, Sample
from .base import IMAGE_EXTENSIONS, LAYOUTS, LabelProblem, LayoutOptions, ScanContext, sorted_files
from .image_label_table import ImageLabelTableOptions, label_for, read_image_labels
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


@LAYOUTS.register("image_mask_pairs")
class ImageMaskPairs:
    name = "image_mask_pairs"
    shardable = True
    Options = ImageMaskPairsOptions

    def __init__(self, options: ImageMaskPairsOptions):
        self.o = options
        if (options.group_by == "regex") != (options.group_regex is not None):
            raise SourceError(
                "group_regex is needed with, and only with, group_by: regex",
                where=f"group_by={options.group_by!r}",
            )
        self._group_re = re.compile(options.group_regex) if options.group_regex else None

    def _folders(self, ctx: ScanContext) -> PairFolders:
        for folders in self.o.folders:
            if (ctx.root / folders.images_dir).is_dir() and (ctx.root / folders.masks_dir).is_dir():
                return folders
        expected = " or ".join(f"{f.images_dir!r} + {f.masks_dir!r}" for f in self.o.folders)
        raise SourceError(
            f"{ctx.source}: expected the image and mask folders {expected} under the source root",
            where=str(ctx.root),
            fix="point ROOT at the unpacked dataset (see the source's docs page)",
        )

    def scan(self, ctx: ScanContext) -> Iterator[Sample | QuarantineEntry]:
        folders = self._folders(ctx)
        boxes = read_box_json(ctx, folders.boxes) if folders.boxes is not None else None
        labels = read_image_labels(ctx, folders.labels) if folders.labels is not None else None
        base = ctx.root / folders.images_dir
        wanted = re.compile(folders.image_path_regex or "")
        for path in sorted_files(base, tuple(e.lower() for e in self.o.extensions)):
            if wanted.search(path.relative_to(base).as_posix()):
                yield ctx.defer(self._sample, ctx, folders, base, path, boxes, labels)

    def _group(self, key: str, path: Path, root: Path) -> str:
        if self.o.group_by == "folder":  # the image's folder below the root (a sequence)
            return path.parent.relative_to(root).as_posix()
        if self.o.group_by == "ranges":
            number = re.search(r"\d+", path.stem)
            for name, (first, last) in self.o.group_ranges.items():
                if number is not None and first <= int(number.group()) <= last:
                    return name
            raise ImageProblem(
                f"image number {path.stem!r} is in none of the manifest's group_ranges"
            )
        if self._group_re is not None:
            match = self._group_re.search(path.relative_to(root).as_posix())
            if match is None:
                raise ImageProblem(f"no group id in the path (group_regex {self.o.group_regex!r})")
            return match.group(1)
        return key

    def _sample(
        self,
        ctx: ScanContext,
        folders: PairFolders,
        base: Path,
        path: Path,
        boxes: dict | None,
        labels: dict[str, str] | None,
    ) -> Sample | QuarantineEntry:
        o = self.o
        rel = ctx.rel(path)
        sub = path.parent.relative_to(base).as_posix()
        for old, new in folders.mask_subdir_replace.items():
            sub = sub.replace(old, new)
        names = [folders.mask_name] if isinstance(folders.mask_name, str) else folders.mask_name
        candidates = [
            ctx.root / folders.masks_dir / sub / n.format(stem=path.stem, ext=path.suffix)
            for n in names
        ]
        found = next((c for c in candidates if c.is_file()), None)  # one stat per candidate
        mask_file = found if found is not None else candidates[0]
        key = path.relative_to(ctx.root).with_suffix("").as_posix()
        attributes = dict(o.attributes)
        raw_label = o.region_label
        try:
            width, height = check_image(path, ctx.verify)
            if labels is not None and folders.labels is not None:
                raw_label = label_for(labels, folders.labels, path.relative_to(base))
            label = ctx.canonical(raw_label)
            regions: tuple[Region, ...] = ()
            if found is not None:
                regions = self._mask_regions(ctx, mask_file, label, width, height)
            elif o.mask_required:
                raise ImageProblem(f"mask {ctx.rel(mask_file)} is missing")
            if boxes is not None and folders.boxes is not None:
                if path.stem not in boxes:
                    raise ImageProblem(f"image not listed in {folders.boxes.file}")
                box_regions, _ = regions_from_entry(
                    ctx, folders.boxes, boxes[path.stem], width, height
                )
                # Masks are the authoritative outline; the owners' boxes are kept beside them.
                attributes["source_boxes"] = json.dumps([list(r.bbox) for r in box_regions])
                attributes["box_count"] = str(len(box_regions))
            group_id = self._group(key, path, ctx.root)
        except (ImageProblem, LabelProblem) as exc:
            return ctx.quarantine(rel, str(exc))
        show = o.image_label == "always" or (o.image_label == "if_regions" and regions)
        if show:
            attributes["source_label"] = raw_label
        return Sample(
            sample_id=ctx.sample_id(key),
            source=ctx.source,
            image=rel,
            width=width,
            height=height,
            modality=ctx.modality,
            scene=ctx.scene,
            labels=(label,) if show else (),
            attributes=attributes,
            regions=regions,
            group_id=group_id,
            split=o.split,
        )

    def _mask_regions(
        self, ctx: ScanContext, mask_file: Path, label: str, width: int, height: int
    ) -> tuple[Region, ...]:
        regions = regions_from_mask(mask_file, label, width, height, self.o.min_area_px)
        if self.o.mask_regions == "components" or not regions:
            return regions
        # One object per file: the file is the mask, the box spans every component.
        x1 = min(r.bbox[0] for r in regions)
        y1 = min(r.bbox[1] for r in regions)
        x2 = max(r.bbox[2] for r in regions)
        y2 = max(r.bbox[3] for r in regions)
        return (Region(label=label, bbox=(x1, y1, x2, y2), mask=MaskRef(path=ctx.rel(mask_file))),)
