"""``txt_boxes``: one plain-text box file per image or video frame, in absolute pixels
(LDPolypVideo ``Annotations/<video>/<frame>.txt`` with a polyp count on the first line,
EDD2020 ``bbox/<image>.txt`` with ``xmin ymin xmax ymax class`` lines), optionally with one
binary mask per class (EDD2020 ``masks/<image>_<class>.tif``).

``columns`` names the whitespace-separated tokens of a box line (``x1 y1 x2 y2 label``), so
new variants are a manifest change. ``origin`` and ``max_inclusive`` say how the file counts
pixels (EDD2020 writes VOC boxes: first pixel 1, last pixel inside the box); boxes are stored
as 0-based pixel edges with x2/y2 exclusive.

A file that says nothing (empty, or a count line holding a missing marker) and a box whose
label token is a missing marker are labels left out: the sample is kept without them and
``ctx.label_missing`` counts them. A file that contradicts itself is quarantined.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..errors import ImageProblem
from ..geometry import box_problem, rle_encode
from ..media.image import check_image
from ..records import MaskRef, Region, Sample
from ..store.paths import IMAGE_EXTENSIONS, sorted_files
from ..store.table_text import TableProblem, box_lines
from .base import (
    LAYOUTS,
    MISSING_MARKERS,
    FileCandidate,
    FileLayout,
    LayoutOptions,
    ScanContext,
    attribute_caps,
    is_missing,
)
from .discovery import Alternatives, expect_paths
from .masks import load_binary_mask

_BOX_KEYS = ("x1", "y1", "x2", "y2")
BOXES_FIELD = "boxes"  # the name labels left out are counted under


class ClassMaskOptions(BaseModel):
    """One binary mask per (image, class): ``<dir>/<name>`` with ``{stem}`` and ``{label}``;
    a list of names is tried in order."""

    model_config = ConfigDict(extra="forbid")

    dir: str
    name: str | list[str] = "{stem}_{label}.tif"


class TxtBoxesOptions(LayoutOptions):
    images_dir: str
    labels_dir: str
    # the folder images_dir, labels_dir and class_masks.dir are relative to; alternatives are
    # tried in order and the first holding both folders is read (LDPolypVideo's training
    # folder is TrainValid/ in the Google Drive copy and Train/ in others)
    base_dir: str | list[str] = "."
    # annotation stem = group 1 of this regex on the image stem ("(.+)": the same stem)
    label_stem_regex: str = "(.+)"
    columns: list[str] = ["x1", "y1", "x2", "y2"]  # may add "label" (or "_" to skip a token)
    count_first_line: bool = False  # the first line is the number of boxes that follow
    default_label: str = "polyp"  # raw label when the columns carry none
    origin: Literal[0, 1] = 0  # the coordinate of the first pixel (1: VOC files)
    max_inclusive: bool = False  # x2/y2 name the last pixel inside the box
    missing_labels: Literal["quarantine", "empty"] = "quarantine"  # image without a box file
    # a count line or label token holding one of these says "not annotated"
    missing_values: list[str] = list(MISSING_MARKERS)
    class_masks: ClassMaskOptions | None = None
    # folder: the image's folder below the root (the video), also kept as attribute "video"
    group_by: Literal["image", "folder"] = "image"
    count_attribute: str = "box_count"
    split: str | None = None  # official split of every sample of the part
    attributes: dict[str, str] = {}
    extensions: list[str] = list(IMAGE_EXTENSIONS)

    @property
    def base_dirs(self) -> list[str]:
        return [self.base_dir] if isinstance(self.base_dir, str) else list(self.base_dir)


@dataclass
class BoxFile:
    """What one box file says: its boxes ``(raw label, xyxy exclusive)``, how many box labels
    it leaves out, and whether it says nothing at all (not annotated)."""

    boxes: list[tuple[str, tuple[float, float, float, float]]] = field(default_factory=list)
    labels_left_out: int = 0
    unannotated: bool = False


def parse_box_lines(text: str, o: TxtBoxesOptions) -> BoxFile:
    """The boxes of one box file; raises ImageProblem naming a bad or contradictory line."""
    markers = frozenset(o.missing_values)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return BoxFile(unannotated=True)
    if o.count_first_line:
        first, lines = lines[0], lines[1:]
        if is_missing(first, markers):
            if lines:
                raise ImageProblem(f"box file has no count ({first!r}) but lists {len(lines)}")
            return BoxFile(unannotated=True)
        if not first.isdigit():
            raise ImageProblem("box file does not start with the number of boxes")
        if int(first) != len(lines):
            raise ImageProblem(f"box file says {int(first)} box(es) but lists {len(lines)}")
    shift, pad = float(o.origin), 1.0 if o.max_inclusive else 0.0
    out = BoxFile()
    for line in lines:
        tokens = line.replace(",", " ").split()
        if len(tokens) != len(o.columns):
            raise ImageProblem(f"box line {line!r} has {len(tokens)} fields, expected {o.columns}")
        row = dict(zip(o.columns, tokens, strict=True))
        raw = row.get("label", o.default_label)
        if is_missing(raw, markers):
            out.labels_left_out += 1
            continue
        try:
            x1, y1, x2, y2 = (float(row[k]) - shift for k in _BOX_KEYS)
        except ValueError:
            raise ImageProblem(f"box line {line!r} has a non-numeric coordinate") from None
        out.boxes.append((raw, (x1, y1, x2 + pad, y2 + pad)))
    return out


class _Folders(NamedTuple):
    """The base folder chosen for the part and its image and box-file folders."""

    base_dir: str
    images: Path
    labels: Path


@LAYOUTS.register("txt_boxes")
class TxtBoxes(FileLayout):
    name = "txt_boxes"
    Options = TxtBoxesOptions

    def __init__(self, options: TxtBoxesOptions):
        super().__init__(options)
        self._stem_re = re.compile(options.label_stem_regex)

    def _in(self, base: str, rel: str) -> str:
        return rel if base in ("", ".") else f"{base.rstrip('/')}/{rel}"

    def expects(self) -> Alternatives:
        o = self.options
        return [
            expect_paths(self._in(b, o.images_dir), self._in(b, o.labels_dir), kind="dir")
            for b in o.base_dirs
        ]

    def provides(self) -> set[str]:
        o = self.options
        out = {"regions", "labels", f"attribute:{o.count_attribute}"} | attribute_caps(o.attributes)
        return out | ({"masks"} if o.class_masks else set())

    def _base(self, ctx: ScanContext) -> str:
        """The first base folder holding both the image and the box folder (else the first,
        so the error names it)."""
        o = self.options
        for b in o.base_dirs:
            images, labels = self._in(b, o.images_dir), self._in(b, o.labels_dir)
            if (ctx.root / images).is_dir() and (ctx.root / labels).is_dir():
                return b
        return o.base_dirs[0]

    def candidates(self, ctx: ScanContext) -> Iterator[FileCandidate]:
        """Every image below the chosen base's image folder, with the folders its box file
        and class masks are looked up in."""
        o = self.options
        b = self._base(ctx)
        base = ctx.require_dir(self._in(b, o.images_dir), "image")
        labels = ctx.require_dir(self._in(b, o.labels_dir), "box annotation")
        ctx.note_table(labels, ["count"] * o.count_first_line + o.columns)
        folders = _Folders(b, base, labels)
        for path in sorted_files(base, tuple(e.lower() for e in o.extensions)):
            yield FileCandidate(ctx.rel(path), (folders, path))

    def _label_file(self, base: Path, labels: Path, path: Path) -> Path:
        match = self._stem_re.search(path.stem)
        if match is None:
            raise ImageProblem(
                f"no annotation name in {path.name!r} (regex {self.options.label_stem_regex!r})"
            )
        return labels / path.parent.relative_to(base) / f"{match.group(1)}.txt"

    def _box_file(self, ctx: ScanContext, folders: _Folders, path: Path) -> BoxFile:
        """What the image's box file says (an absent file: no boxes, or a per-file problem)."""
        label_file = self._label_file(folders.images, folders.labels, path)
        if label_file.is_file():
            heads = 1 if self.options.count_first_line else 0
            read = box_lines(label_file, heads=heads, errors="replace")
            lines: list[str] = []
            try:  # read up to max_boxes_per_image box lines, no further
                lines.extend(line for _, line in read)
            except TableProblem as exc:  # over a limit: that image's entry, naming the limit
                raise ImageProblem(str(exc)) from None
            except MemoryError:  # over the worker's budget: free and close before it goes up
                lines.clear()
                read.close()
                raise
            return parse_box_lines("\n".join(lines), self.options)
        if self.options.missing_labels == "empty":
            return BoxFile()
        raise ImageProblem(f"box file {ctx.rel(label_file)} is missing")

    def read(self, ctx: ScanContext, candidate: FileCandidate) -> Sample:
        o = self.options
        folders, path = candidate.info
        width, height = check_image(path, ctx.verify, ctx.max_pixels)
        found = self._box_file(ctx, folders, path)
        regions = self._regions(ctx, folders.base_dir, path, found.boxes, width, height)
        if found.unannotated or found.labels_left_out:
            ctx.label_missing(BOXES_FIELD, max(found.labels_left_out, 1))
        raw_labels = list(dict.fromkeys(raw for raw, _ in found.boxes))
        attributes = dict(o.attributes)
        if not (found.unannotated or found.labels_left_out):
            attributes[o.count_attribute] = str(len(regions))  # a count only when complete
        if raw_labels:
            attributes["source_label"] = "|".join(raw_labels)
        group = None
        if o.group_by == "folder":
            group = path.parent.relative_to(ctx.root).as_posix()
            attributes["video"] = path.parent.name
        return ctx.sample(
            candidate.rel,
            width,
            height,
            labels=tuple(dict.fromkeys(r.label for r in regions)),
            attributes=attributes,
            regions=regions,
            group_id=group,
            split=o.split,
        )

    def _regions(self, ctx: ScanContext, b: str, path: Path, boxes, width: int, height: int):
        masks: dict[str, np.ndarray | None] = {}
        regions = []
        for raw, box in boxes:
            problem = box_problem(box, width, height)
            if problem:
                raise ImageProblem(problem)
            if raw not in masks:
                masks[raw] = self._class_mask(ctx, b, path, raw, width, height)
            regions.append(
                Region(label=ctx.canonical(raw), bbox=box, mask=mask_in_box(masks[raw], box))
            )
        return tuple(regions)

    def _class_mask(
        self, ctx: ScanContext, b: str, path: Path, raw: str, width: int, height: int
    ) -> np.ndarray | None:
        if self.options.class_masks is None:
            return None
        names = self.options.class_masks.name
        names = [names] if isinstance(names, str) else names
        folder = ctx.root / self._in(b, self.options.class_masks.dir)
        files = [folder / n.format(stem=path.stem, label=raw) for n in names]
        mask_file = next((f for f in files if f.is_file()), None)
        if mask_file is None:
            return None  # a box may come without its class mask
        mask = load_binary_mask(mask_file)
        if mask.shape[:2] != (height, width):
            raise ImageProblem(
                f"mask {mask_file.name} is {mask.shape[1]}x{mask.shape[0]}, "
                f"image is {width}x{height}"
            )
        return mask > (127 if mask.max() > 1 else 0)


def mask_in_box(mask: np.ndarray | None, box) -> MaskRef | None:
    """The class mask's pixels inside the box: the object's own mask (None when empty)."""
    if mask is None:
        return None
    x1, y1, x2, y2 = (int(round(v)) for v in box)
    own = np.zeros_like(mask)
    own[y1:y2, x1:x2] = mask[y1:y2, x1:x2]
    if not own.any():
        return None
    size_hw, counts = rle_encode(own)
    return MaskRef(size_hw=size_hw, counts=counts)
