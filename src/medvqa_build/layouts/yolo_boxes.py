"""``yolo_boxes``: an image folder with one YOLO text file per image (``<stem>.txt``, one
``class cx cy w h`` line per box, normalised to [0, 1]) and optional masks beside it
(WCEBleedGen ``bleeding/Bounding boxes/YOLO_TXT``, SEE-AI ``SEE_AI_project_all_txt``).

Boxes become xyxy pixel-edge boxes (x2/y2 exclusive): ``x1 = (cx - w/2) * width``. The image
label is either fixed for the part (the folder says "bleeding") or the set of box classes.

Folder options take a list of alternative names, read in order (WCEBleedGen's non-bleeding
folders are ``images``/``annotation`` in the Zenodo archive, ``Images``/``Annotations`` in
the owners' loaders). An empty or absent label file means "no object" in YOLO's convention
(``empty_file: no_objects``); where the part's own label says there must be one
(``empty_file: missing``) it is a label left out, as is a zero-size box line: the sample is
kept without those boxes and ``ctx.label_missing`` counts them; so is a box whose class
token is a missing marker.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ..errors import ImageProblem
from ..geometry import box_problem
from ..media.image import check_image
from ..records import Region, Sample
from ..store.paths import IMAGE_EXTENSIONS, sorted_files
from ..store.table_text import TableProblem, box_lines
from .base import (
    LAYOUTS,
    MISSING_MARKERS,
    FileCandidate,
    FileLayout,
    LabelProblem,
    LayoutOptions,
    ScanContext,
    is_missing,
)
from .discovery import Alternatives, Expect, expect_paths
from .masks import load_binary_mask, regions_from_mask
from .txt_boxes import mask_in_box

BOXES_FIELD = "boxes"  # the name labels left out are counted under

Folders = str | list[str]  # one folder, or alternatives tried in order


def _names(folders: Folders | None) -> list[str]:
    if folders is None:
        return []
    return [folders] if isinstance(folders, str) else list(folders)


class RenamedMaskOptions(BaseModel):
    """Mask file = ``<dir>/<re.sub(pattern, repl, image stem)><suffix>`` (``img- (1)`` ->
    ``ann- (1)`` in WCEBleedGen)."""

    model_config = ConfigDict(extra="forbid")

    dir: Folders
    suffix: str = ".png"
    pattern: str = "^"
    repl: str = ""
    min_area_px: int = 16
    required: bool = True


class YoloBoxesOptions(LayoutOptions):
    images_dir: Folders
    labels_dir: Folders | None = None  # YOLO txt folder; None for a part without boxes
    class_names: dict[int, str] = {}  # YOLO class id -> raw label (mapped via label_map)
    image_label: str | None = None  # raw image label for every image of the part
    missing_labels: Literal["quarantine", "empty"] = "quarantine"  # image without a txt file
    # an empty txt file: no object in the image, or boxes left out (the part says there is one)
    empty_file: Literal["no_objects", "missing"] = "no_objects"
    # a class token holding one of these leaves that box out (counted)
    missing_values: list[str] = list(MISSING_MARKERS)
    masks: RenamedMaskOptions | None = None
    extensions: list[str] = list(IMAGE_EXTENSIONS)


def yolo_to_xyxy(cx: float, cy: float, w: float, h: float, width: int, height: int):
    """Normalised centre/size -> pixel-edge xyxy (x2/y2 exclusive), as Ultralytics defines it."""
    x1, y1 = (cx - w / 2) * width, (cy - h / 2) * height
    box = (x1, y1, x1 + w * width, y1 + h * height)
    # six-decimal text rounds edge boxes a hair outside the image: snap within half a pixel
    limits = (width, height, width, height)
    return tuple(
        round(min(max(v, 0.0), lim) if -0.5 < v < lim + 0.5 else v, 3)
        for v, lim in zip(box, limits, strict=True)
    )


@LAYOUTS.register("yolo_boxes")
class YoloBoxes(FileLayout):
    name = "yolo_boxes"
    Options = YoloBoxesOptions

    def __init__(self, options: YoloBoxesOptions):
        super().__init__(options)
        self._missing = frozenset(options.missing_values)

    def _folder_lists(self) -> list[list[str]]:
        o = self.options
        lists = [_names(o.images_dir), _names(o.labels_dir)]
        if o.masks is not None and o.masks.required:
            lists.append(_names(o.masks.dir))
        return [names for names in lists if names]

    def expects(self) -> Alternatives:
        alternatives: list[list[Expect]] = [[]]
        for names in self._folder_lists():
            alternatives = [a + expect_paths(n, kind="dir") for a in alternatives for n in names]
        return alternatives

    def provides(self) -> set[str]:
        out = {"labels", "attribute:source_label"}
        if self.options.labels_dir:
            out.add("regions")
        masks = self.options.masks
        return out | ({"masks", "regions"} if masks and masks.required else set())

    @staticmethod
    def _first(ctx: ScanContext, folders: Folders) -> str:
        """The first alternative that is a folder under the root (else the first, so the
        error names it)."""
        names = _names(folders)
        return next((n for n in names if (ctx.root / n).is_dir()), names[0])

    def candidates(self, ctx: ScanContext) -> Iterator[FileCandidate]:
        """Every image of the first image folder present, with the label and mask folders
        (an optional mask folder that is not there is no folder)."""
        o = self.options
        base = ctx.require_dir(self._first(ctx, o.images_dir), "image")
        labels = masks = None
        if o.labels_dir is not None:
            labels = ctx.require_dir(self._first(ctx, o.labels_dir), "YOLO label")
            ctx.note_table(labels, ["class", "cx", "cy", "w", "h"])
        if o.masks is not None:
            folder = self._first(ctx, o.masks.dir)
            if o.masks.required or (ctx.root / folder).is_dir():
                masks = ctx.require_dir(folder, "mask")
        for path in sorted_files(base, tuple(e.lower() for e in o.extensions)):
            yield FileCandidate(ctx.rel(path), (path, labels, masks))

    def _boxes(
        self, ctx: ScanContext, labels: Path | None, stem: str, width: int, height: int
    ) -> tuple[list[tuple[str, Region]], int]:
        """``(raw class name, region)`` per box line of ``<labels>/<stem>.txt``, and the
        number of box labels the file leaves out."""
        o = self.options
        if labels is None:
            return [], 0
        txt = labels / f"{stem}.txt"
        if not txt.is_file():
            if o.missing_labels == "empty":
                return [], 0
            raise ImageProblem(f"box file {ctx.rel(txt)} is missing")
        regions, left_out = [], 0
        lines = box_lines(txt)
        try:
            for number, line in lines:
                left_out += self._box(ctx, txt, number, line, width, height, regions)
        except TableProblem as exc:  # over a limit: that image's entry, naming the limit
            raise ImageProblem(str(exc)) from None
        except MemoryError:
            # over the worker's budget (the caller quarantines the image): free what was
            # read and close the file now, or the generator's cleanup runs out of memory
            # later and Python prints "Exception ignored in" on the terminal
            regions.clear()
            lines.close()
            raise
        if not regions and not left_out and o.empty_file == "missing":
            left_out = 1
        return regions, left_out

    def _box(
        self, ctx: ScanContext, txt: Path, number: int, line: str, width: int, height: int, regions
    ) -> int:
        """Read box line ``number`` into ``regions``; 1 when it leaves its box out, else 0."""
        o = self.options
        fields = line.split()  # a non-blank line (store.table_text.box_lines)
        where = f"{ctx.rel(txt)} line {number}"
        if is_missing(fields[0], self._missing):
            return 1  # no class for this box
        try:
            class_id, numbers = int(fields[0]), [float(v) for v in fields[1:]]
        except ValueError:
            raise ImageProblem(f"{where}: expected 'class cx cy w h', got {line!r}") from None
        if len(numbers) != 4 or not all(math.isfinite(v) for v in numbers):
            raise ImageProblem(f"{where}: expected 'class cx cy w h', got {line!r}")
        if class_id not in o.class_names:
            raise LabelProblem(f"{where}: class id {class_id} is not in the manifest's class_names")
        if numbers[2] == 0 or numbers[3] == 0:
            return 1  # a zero-size box: what a box tool writes for an empty mask
        box = yolo_to_xyxy(*numbers, width, height)
        problem = box_problem(box, width, height)
        if problem:
            raise ImageProblem(f"{where}: {problem}")
        raw = o.class_names[class_id]
        regions.append((raw, Region(label=ctx.canonical(raw), bbox=box, level="box")))
        return 0

    def _masks(
        self, ctx: ScanContext, masks: Path | None, path: Path, boxes, label: str, w: int, h: int
    ) -> tuple[tuple[Region, ...], tuple[Region, ...]]:
        """``(boxes, mask regions)``: the mask beside the image is cut to each box (the box
        was drawn around it: one region per lesion, not two); without boxes, one region per
        connected component of the mask."""
        m = self.options.masks
        if m is None or masks is None:
            return boxes, ()
        mask_file = masks / f"{re.sub(m.pattern, m.repl, path.stem)}{m.suffix}"
        if not mask_file.is_file():
            if m.required:
                raise ImageProblem(f"mask {ctx.rel(mask_file)} is missing")
            return boxes, ()
        if not boxes:
            return (), regions_from_mask(mask_file, label, w, h, m.min_area_px)
        mask = load_binary_mask(mask_file)
        if mask.shape[:2] != (h, w):
            raise ImageProblem(
                f"mask {mask_file.name} is {mask.shape[1]}x{mask.shape[0]}, image is {w}x{h}"
            )
        binary = mask > (127 if mask.max() > 1 else 0)
        return tuple(replace(b, mask=mask_in_box(binary, b.bbox)) for b in boxes), ()

    def read(self, ctx: ScanContext, candidate: FileCandidate) -> Sample:
        o = self.options
        path, labels, masks = candidate.info
        width, height = check_image(path, ctx.verify, ctx.max_pixels)
        found, left_out = self._boxes(ctx, labels, path.stem, width, height)
        boxes = tuple(region for _, region in found)
        if o.image_label is not None:
            image_labels: tuple[str, ...] = (ctx.canonical(o.image_label),)
            source_label = o.image_label
        else:
            image_labels = tuple(dict.fromkeys(r.label for r in boxes))
            source_label = "|".join(dict.fromkeys(raw for raw, _ in found))
        mask_label = image_labels[0] if image_labels else "lesion"
        boxes, mask_regions = self._masks(ctx, masks, path, boxes, mask_label, width, height)
        if left_out:
            ctx.label_missing(BOXES_FIELD, left_out)
        attributes = {"source_label": source_label} if source_label else {}
        if not left_out:
            attributes["boxes"] = str(len(boxes))  # a count only when the file is complete
        return ctx.sample(
            candidate.rel,
            width,
            height,
            labels=image_labels,
            attributes=attributes,
            regions=boxes + tuple(mask_regions),
        )
