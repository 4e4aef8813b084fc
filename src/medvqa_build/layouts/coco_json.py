"""``coco_json``: one COCO-style JSON (``images``, ``annotations`` with ``bbox = [x, y, w, h]``,
``categories``) over an image folder. Extra per-annotation category fields are read too, as
PSI-AVA (TAPIR) ships them: ``phase`` / ``step`` ids (one per image, copied onto every
annotation) and ``actions`` id lists, each resolved through its own ``*_categories`` list.

One candidate per entry of ``images`` (plus one per annotation that names an unknown image).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from ..errors import SourceError
from ..geometry import box_problem
from ..media.image import ImageProblem, check_image
from ..quarantine import QuarantineEntry
from ..records import Region, Sample
from .base import LAYOUTS, LabelProblem, LayoutOptions, ScanContext


class CocoJsonOptions(LayoutOptions):
    annotations: str  # the JSON file, relative to the root
    images_dir: str = "."  # ``file_name`` is relative to this folder
    split: str | None = None
    group_regex: str | None = None  # on file_name; group 1 is the group id (None: the image)
    # per-annotation id field -> categories list; the image gets one value (attribute + label)
    image_fields: dict[str, str] = {}
    # per-annotation id-list field -> categories list; kept per region and as the image's union
    region_list_fields: dict[str, str] = {}
    image_fields_as_labels: bool = False
    clip_tolerance_px: float = 0.5  # float boxes may overshoot the edge by rounding noise


@LAYOUTS.register("coco_json")
class CocoJson:
    name = "coco_json"
    Options = CocoJsonOptions

    def __init__(self, options: CocoJsonOptions):
        self.o = options
        self._group_re = re.compile(options.group_regex) if options.group_regex else None

    def _load(self, ctx: ScanContext) -> tuple[Path, dict]:
        path = ctx.require_file(self.o.annotations, "COCO annotation")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise SourceError(
                f"{ctx.source}: annotation file is not valid JSON ({exc})", where=str(path)
            ) from None
        keys = [
            "images",
            "annotations",
            "categories",
            *self.o.image_fields.values(),
            *self.o.region_list_fields.values(),
        ]
        missing = [k for k in keys if not isinstance(data, dict) or k not in data]
        if missing:
            found = list(data) if isinstance(data, dict) else type(data).__name__
            raise SourceError(
                f"{ctx.source}: COCO file lacks key(s) {missing}; it has {found}",
                where=str(path),
                fix="check the manifest's annotations path",
            )
        return path, data

    def scan(self, ctx: ScanContext) -> Iterator[Sample | QuarantineEntry]:
        path, data = self._load(ctx)
        names = {
            k: {c["id"]: c["name"] for c in data[k]}
            for k in {
                "categories",
                *self.o.image_fields.values(),
                *self.o.region_list_fields.values(),
            }
        }
        by_image: dict = defaultdict(list)
        image_ids = {image["id"] for image in data["images"]}
        for ann in data["annotations"]:
            if ann.get("image_id") in image_ids:
                by_image[ann["image_id"]].append(ann)
            else:
                yield ctx.quarantine(
                    path, f"annotation {ann.get('id')} names unknown image {ann.get('image_id')}"
                )
        for image in sorted(data["images"], key=lambda im: str(im["file_name"])):
            yield self._sample(ctx, image, by_image[image["id"]], names)

    def _sample(self, ctx: ScanContext, image: dict, anns: list[dict], names: dict):
        o = self.o
        rel = (Path(o.images_dir) / image["file_name"]).as_posix()
        try:
            width, height = check_image(ctx.safe_path(rel), ctx.verify)
            if (image.get("width"), image.get("height")) not in ((width, height), (None, None)):
                raise ImageProblem(
                    f"image is {width}x{height}, the annotation says "
                    f"{image.get('width')}x{image.get('height')}"
                )
            attributes = self._image_fields(ctx, anns, names)
            regions, raw_labels = [], []
            for i, ann in enumerate(anns):
                raw = _name(names["categories"], ann.get("category_id"), "category")
                raw_labels.append(raw)
                regions.append(
                    Region(
                        label=ctx.canonical(raw),
                        bbox=self._box(ann.get("bbox"), width, height),
                        polygon=_polygon(ann.get("segmentation")),
                    )
                )
                for field, key in o.region_list_fields.items():
                    values = [
                        ctx.canonical(_name(names[key], v, field)) for v in ann.get(field) or ()
                    ]
                    attributes[f"region{i}.{field}"] = ",".join(values)
                    union = set(filter(None, attributes.get(field, "").split(","))) | set(values)
                    attributes[field] = ",".join(sorted(union))
        except (ImageProblem, LabelProblem) as exc:
            return ctx.quarantine(rel, str(exc))
        labels = sorted({r.label for r in regions})
        if o.image_fields_as_labels:
            labels += [attributes[f] for f in o.image_fields if f in attributes]
        key = Path(image["file_name"]).with_suffix("").as_posix()
        match = self._group_re.search(image["file_name"]) if self._group_re else None
        return Sample(
            sample_id=ctx.sample_id(key),
            source=ctx.source,
            image=rel,
            width=width,
            height=height,
            modality=ctx.modality,
            scene=ctx.scene,
            labels=tuple(labels),
            attributes={"source_label": ",".join(sorted(set(raw_labels))), **attributes},
            regions=tuple(regions),
            group_id=match.group(1) if match else key,
            split=o.split,
        )

    def _image_fields(self, ctx: ScanContext, anns: list[dict], names: dict) -> dict[str, str]:
        attributes: dict[str, str] = {}
        for field, key in self.o.image_fields.items():
            values = {ann[field] for ann in anns if ann.get(field) is not None}
            if len(values) > 1:
                raise LabelProblem(f"annotations disagree on the image's {field}: {sorted(values)}")
            if values:
                raw = _name(names[key], values.pop(), field)
                attributes[field] = ctx.canonical(raw)
                attributes[f"source_{field}"] = raw
        return attributes

    def _box(self, bbox, width: int, height: int) -> tuple[float, float, float, float]:
        if not isinstance(bbox, list | tuple) or len(bbox) != 4:
            raise ImageProblem(f"bbox {bbox!r} is not [x, y, w, h]")
        x, y, w, h = (float(v) for v in bbox)
        box = [x, y, x + w, y + h]  # COCO boxes are pixel-edge: x + w is already exclusive
        tol = self.o.clip_tolerance_px
        limits = (width, height, width, height)
        box = [
            min(max(v, 0.0), float(lim)) if -tol <= v <= lim + tol else v
            for v, lim in zip(box, limits, strict=True)
        ]
        problem = box_problem(box, width, height)
        if problem:
            raise ImageProblem(problem)
        return tuple(box)  # type: ignore[return-value]


def _name(categories: dict, value, field: str) -> str:
    if value not in categories:
        raise LabelProblem(f"{field} id {value!r} is not in the file's categories")
    return str(categories[value])


def _polygon(segmentation) -> tuple[tuple[float, float], ...]:
    """The longest ring of a COCO polygon segmentation (RLE segmentations are not read)."""
    if not isinstance(segmentation, list) or not segmentation:
        return ()
    rings = [s for s in segmentation if isinstance(s, list) and len(s) >= 6]
    if not rings:
        return ()
    ring = max(rings, key=len)
    return tuple((float(ring[i]), float(ring[i + 1])) for i in range(0, len(ring) - 1, 2))
