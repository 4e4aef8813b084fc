"""``yolo_boxes``: an image folder with one YOLO text file per image (``<stem>.txt``, one
``class cx cy w h`` line per box, normalised to [0, 1]) and optional masks beside it
(WCEBleedGen ``bleeding/Bounding boxes/YOLO_TXT``, SEE-AI ``SEE_AI_project_all_txt``).

Boxes become xyxy pixel-edge boxes (x2/y2 exclusive): ``x1 = (cx - w/2) * width``. The image
label is either fixed for the part (the folder says "bleeding") or the set of box classes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ..geometry import box_problem
from ..media.image import ImageProblem, check_image
from ..quarantine import QuarantineEntry
from ..records import Region, Sample
from .base import IMAGE_EXTENSIONS, LAYOUTS, LabelProblem, LayoutOptions, ScanContext, sorted_files
from .masks import regions_from_mask


class RenamedMaskOptions(BaseModel):
    """Mask file = ``<dir>/<re.sub(pattern, repl, image stem)><suffix>`` (``img- (1)`` ->
    ``ann- (1)`` in WCEBleedGen)."""

    model_config = ConfigDict(extra="forbid")

    dir: str
    suffix: str = ".png"
    pattern: str = "^"
    repl: str = ""
    min_area_px: int = 16
    required: bool = True


class YoloBoxesOptions(LayoutOptions):
    images_dir: str
    labels_dir: str | None = None  # YOLO txt folder; None for a part without boxes
    class_names: dict[int, str] = {}  # YOLO class id -> raw label (mapped via label_map)
    image_label: str | None = None  # raw image label for every image of the part
    missing_labels: Literal["quarantine", "empty"] = "quarantine"  # image without a txt file
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
class YoloBoxes:
    name = "yolo_boxes"
    shardable = True
    Options = YoloBoxesOptions

    def __init__(self, options: YoloBoxesOptions):
        self.o = options

    def scan(self, ctx: ScanContext) -> Iterator[Sample | QuarantineEntry]:
        o = self.o
        base = ctx.require_dir(o.images_dir, "image")
        if o.labels_dir is not None:
            ctx.require_dir(o.labels_dir, "YOLO label")
        if o.masks is not None:
            ctx.require_dir(o.masks.dir, "mask")
        for path in sorted_files(base, tuple(e.lower() for e in o.extensions)):
            yield ctx.defer(self._sample, ctx, path)

    def _boxes(
        self, ctx: ScanContext, stem: str, width: int, height: int
    ) -> list[tuple[str, Region]]:
        """``(raw class name, region)`` per box line of ``<labels_dir>/<stem>.txt``."""
        o = self.o
        if o.labels_dir is None:
            return []
        txt = ctx.root / o.labels_dir / f"{stem}.txt"
        if not txt.is_file():
            if o.missing_labels == "empty":
                return []
            raise ImageProblem(f"box file {ctx.rel(txt)} is missing")
        regions = []
        for number, line in enumerate(txt.read_text(encoding="utf-8").splitlines(), 1):
            fields = line.split()
            if not fields:
                continue
            where = f"{ctx.rel(txt)} line {number}"
            try:
                class_id, numbers = int(fields[0]), [float(v) for v in fields[1:]]
            except ValueError:
                raise ImageProblem(f"{where}: expected 'class cx cy w h', got {line!r}") from None
            if len(numbers) != 4 or not all(math.isfinite(v) for v in numbers):
                raise ImageProblem(f"{where}: expected 'class cx cy w h', got {line!r}")
            if class_id not in o.class_names:
                raise LabelProblem(
                    f"{where}: class id {class_id} is not in the manifest's class_names"
                )
            box = yolo_to_xyxy(*numbers, width, height)
            problem = box_problem(box, width, height)
            if problem:
                raise ImageProblem(f"{where}: {problem}")
            raw = o.class_names[class_id]
            regions.append((raw, Region(label=ctx.canonical(raw), bbox=box, level="box")))
        return regions

    def _masks(self, ctx: ScanContext, path: Path, label: str, width: int, height: int):
        m = self.o.masks
        if m is None:
            return ()
        mask = ctx.root / m.dir / f"{re.sub(m.pattern, m.repl, path.stem)}{m.suffix}"
        if not mask.is_file():
            if m.required:
                raise ImageProblem(f"mask {ctx.rel(mask)} is missing")
            return ()
        return regions_from_mask(mask, label, width, height, m.min_area_px)

    def _sample(self, ctx: ScanContext, path: Path) -> Sample | QuarantineEntry:
        o = self.o
        rel = ctx.rel(path)
        try:
            width, height = check_image(path, ctx.verify)
            found = self._boxes(ctx, path.stem, width, height)
            boxes = tuple(region for _, region in found)
            if o.image_label is not None:
                labels: tuple[str, ...] = (ctx.canonical(o.image_label),)
                source_label = o.image_label
            else:
                labels = tuple(dict.fromkeys(r.label for r in boxes))
                source_label = "|".join(dict.fromkeys(raw for raw, _ in found))
            mask_label = boxes[0].label if boxes else (labels[0] if labels else "lesion")
            masks = self._masks(ctx, path, mask_label, width, height)
        except (ImageProblem, LabelProblem) as exc:
            return ctx.quarantine(rel, str(exc))
        key = path.relative_to(ctx.root).with_suffix("").as_posix()
        attributes = {"source_label": source_label, "boxes": str(len(boxes))}
        return Sample(
            sample_id=ctx.sample_id(key),
            source=ctx.source,
            image=rel,
            width=width,
            height=height,
            modality=ctx.modality,
            scene=ctx.scene,
            labels=labels,
            attributes=attributes,
            regions=boxes + tuple(masks),
            group_id=key,
        )
