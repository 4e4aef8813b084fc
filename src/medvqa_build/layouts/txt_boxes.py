"""``txt_boxes``: one plain-text box file per image or video frame, in absolute pixels
(LDPolypVideo ``Annotations/<video>/<frame>.txt`` with a polyp count on the first line,
EDD2020 ``bbox/<image>.txt`` with ``xmin ymin xmax ymax class`` lines), optionally with one
binary mask per class (EDD2020 ``masks/<image>_<class>.tif``).

``columns`` names the whitespace-separated tokens of a box line (``x1 y1 x2 y2 label``), so
new variants are a manifest change. Boxes are stored with x2/y2 exclusive.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..geometry import box_problem, rle_encode
from ..media.image import ImageProblem, check_image, load_mask
from ..quarantine import QuarantineEntry
from ..records import MaskRef, Region, Sample
from .base import IMAGE_EXTENSIONS, LAYOUTS, LabelProblem, LayoutOptions, ScanContext, sorted_files

_BOX_KEYS = ("x1", "y1", "x2", "y2")


class ClassMaskOptions(BaseModel):
    """One binary mask per (image, class): ``<dir>/<name>`` with ``{stem}`` and ``{label}``;
    a list of names is tried in order."""

    model_config = ConfigDict(extra="forbid")

    dir: str
    name: str | list[str] = "{stem}_{label}.tif"


class TxtBoxesOptions(LayoutOptions):
    images_dir: str
    labels_dir: str
    # annotation stem = group 1 of this regex on the image stem ("(.+)": the same stem)
    label_stem_regex: str = "(.+)"
    columns: list[str] = ["x1", "y1", "x2", "y2"]  # may add "label" (or "_" to skip a token)
    count_first_line: bool = False  # the first line is the number of boxes that follow
    default_label: str = "polyp"  # raw label when the columns carry none
    max_inclusive: bool = False  # x2/y2 name the last pixel inside the box
    missing_labels: Literal["quarantine", "empty"] = "quarantine"
    class_masks: ClassMaskOptions | None = None
    # folder: the image's folder below the root (the video), also kept as attribute "video"
    group_by: Literal["image", "folder"] = "image"
    count_attribute: str = "box_count"
    split: str | None = None  # official split of every sample of the part
    attributes: dict[str, str] = {}
    extensions: list[str] = list(IMAGE_EXTENSIONS)


def parse_box_lines(text: str, o: TxtBoxesOptions) -> list[tuple[str, tuple[float, ...]]]:
    """``(raw label, xyxy exclusive)`` per box line; raises ImageProblem naming a bad line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if o.count_first_line:
        if not lines or not lines[0].isdigit():
            raise ImageProblem("box file does not start with the number of boxes")
        count, lines = int(lines[0]), lines[1:]
        if count != len(lines):
            raise ImageProblem(f"box file says {count} box(es) but lists {len(lines)}")
    pad = 1.0 if o.max_inclusive else 0.0
    boxes = []
    for line in lines:
        tokens = line.replace(",", " ").split()
        if len(tokens) != len(o.columns):
            raise ImageProblem(f"box line {line!r} has {len(tokens)} fields, expected {o.columns}")
        row = dict(zip(o.columns, tokens, strict=True))
        try:
            x1, y1, x2, y2 = (float(row[k]) for k in _BOX_KEYS)
        except ValueError:
            raise ImageProblem(f"box line {line!r} has a non-numeric coordinate") from None
        boxes.append((row.get("label", o.default_label), (x1, y1, x2 + pad, y2 + pad)))
    return boxes


@LAYOUTS.register("txt_boxes")
class TxtBoxes:
    name = "txt_boxes"
    shardable = True
    Options = TxtBoxesOptions

    def __init__(self, options: TxtBoxesOptions):
        self.o = options
        self._stem_re = re.compile(options.label_stem_regex)

    def scan(self, ctx: ScanContext) -> Iterator[Sample | QuarantineEntry]:
        base = ctx.require_dir(self.o.images_dir, "image")
        ctx.require_dir(self.o.labels_dir, "box annotation")
        for path in sorted_files(base, tuple(e.lower() for e in self.o.extensions)):
            yield ctx.defer(self._sample, ctx, base, path)

    def _label_file(self, ctx: ScanContext, base: Path, path: Path) -> Path:
        match = self._stem_re.search(path.stem)
        if match is None:
            raise ImageProblem(
                f"no annotation name in {path.name!r} (regex {self.o.label_stem_regex!r})"
            )
        sub = path.parent.relative_to(base)
        return ctx.root / self.o.labels_dir / sub / f"{match.group(1)}.txt"

    def _sample(self, ctx: ScanContext, base: Path, path: Path) -> Sample | QuarantineEntry:
        o = self.o
        rel = ctx.rel(path)
        key = path.relative_to(ctx.root).with_suffix("").as_posix()
        try:
            width, height = check_image(path, ctx.verify)
            label_file = self._label_file(ctx, base, path)
            if label_file.is_file():
                boxes = parse_box_lines(label_file.read_text(encoding="utf-8", errors="replace"), o)
            elif o.missing_labels == "empty":
                boxes = []
            else:
                raise ImageProblem(f"box file {ctx.rel(label_file)} is missing")
            regions = self._regions(ctx, path, boxes, width, height)
        except (ImageProblem, LabelProblem) as exc:
            return ctx.quarantine(rel, str(exc))
        raw_labels = list(dict.fromkeys(raw for raw, _ in boxes))
        attributes = {o.count_attribute: str(len(regions)), **o.attributes}
        if raw_labels:
            attributes["source_label"] = "|".join(raw_labels)
        group = key
        if o.group_by == "folder":
            group = path.parent.relative_to(ctx.root).as_posix()
            attributes["video"] = path.parent.name
        return Sample(
            sample_id=ctx.sample_id(key),
            source=ctx.source,
            image=rel,
            width=width,
            height=height,
            modality=ctx.modality,
            scene=ctx.scene,
            labels=tuple(dict.fromkeys(r.label for r in regions)),
            attributes=attributes,
            regions=regions,
            group_id=group,
            split=o.split,
        )

    def _regions(self, ctx: ScanContext, path: Path, boxes, width: int, height: int):
        masks: dict[str, np.ndarray | None] = {}
        regions = []
        for raw, box in boxes:
            problem = box_problem(box, width, height)
            if problem:
                raise ImageProblem(problem)
            if raw not in masks:
                masks[raw] = self._class_mask(ctx, path, raw, width, height)
            regions.append(
                Region(label=ctx.canonical(raw), bbox=box, mask=_mask_in_box(masks[raw], box))
            )
        return tuple(regions)

    def _class_mask(
        self, ctx: ScanContext, path: Path, raw: str, width: int, height: int
    ) -> np.ndarray | None:
        if self.o.class_masks is None:
            return None
        names = self.o.class_masks.name
        names = [names] if isinstance(names, str) else names
        folder = ctx.root / self.o.class_masks.dir
        files = [folder / n.format(stem=path.stem, label=raw) for n in names]
        mask_file = next((f for f in files if f.is_file()), None)
        if mask_file is None:
            return None  # EDD2020 has boxes without masks for some classes
        mask = load_mask(mask_file)
        if mask.shape[:2] != (height, width):
            raise ImageProblem(
                f"mask {mask_file.name} is {mask.shape[1]}x{mask.shape[0]}, "
                f"image is {width}x{height}"
            )
        return mask > (127 if mask.max() > 1 else 0)


def _mask_in_box(mask: np.ndarray | None, box) -> MaskRef | None:
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
