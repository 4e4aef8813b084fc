"""``keypoint_json``: images with one JSON file each (same stem) holding an image-level class
under ``label_key`` and named keypoints as labelme-style ``shapes`` (``label`` + ``points``).

Every image and every JSON without an image is a candidate. Keypoints become one region per
shape (its points in pixel coordinates); a point outside the image is quarantined.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from ..media.image import ImageProblem, check_image
from ..quarantine import QuarantineEntry
from ..records import Region, Sample
from .base import LAYOUTS, LabelProblem, LayoutOptions, ScanContext, sorted_files


class KeypointJsonOptions(LayoutOptions):
    images_dir: str
    json_dir: str
    image_suffix: str = ".png"
    label_key: str  # dot path, e.g. "curvature" or "flags.category"
    shapes_key: str = "shapes"
    width_key: str | None = "imageWidth"  # when present, must match the image
    height_key: str | None = "imageHeight"
    attribute_keys: list[str] = []


def _get(data, dotted: str):
    for part in dotted.split("."):
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


@LAYOUTS.register("keypoint_json")
class KeypointJson:
    name = "keypoint_json"
    Options = KeypointJsonOptions

    def __init__(self, options: KeypointJsonOptions):
        self.o = options

    def scan(self, ctx: ScanContext) -> Iterator[Sample | QuarantineEntry]:
        o = self.o
        images = ctx.require_dir(o.images_dir, "image")
        jsons = ctx.require_dir(o.json_dir, "JSON annotation")
        stems = set()
        for path in sorted_files(images, (o.image_suffix.lower(),)):
            stems.add(path.stem)
            yield self._image(ctx, path, jsons / f"{path.stem}.json")
        for path in sorted_files(jsons, (".json",)):
            if path.stem not in stems:
                reason = f"annotation without an image {path.stem}{o.image_suffix}"
                yield ctx.quarantine(path, reason)

    def _image(self, ctx, path: Path, json_path: Path) -> Sample | QuarantineEntry:
        o = self.o
        rel = ctx.rel(path)
        try:
            if not json_path.is_file():
                raise LabelProblem(f"annotation {ctx.rel(json_path)} is missing")
            try:
                data = json.loads(json_path.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise ImageProblem(f"{ctx.rel(json_path)} is not valid JSON ({exc})") from None
            width, height = check_image(path, ctx.verify)
            listed = (_get(data, o.width_key or ""), _get(data, o.height_key or ""))
            if None not in listed and (int(listed[0]), int(listed[1])) != (width, height):
                raise ImageProblem(
                    f"{ctx.rel(json_path)} says {listed[0]}x{listed[1]}, the image is "
                    f"{width}x{height}"
                )
            raw = _get(data, o.label_key)
            if raw is None or str(raw).strip() == "":
                raise LabelProblem(f"{ctx.rel(json_path)} has no {o.label_key!r}")
            label = ctx.canonical(str(raw))
            shapes = _get(data, o.shapes_key) or []
            regions = tuple(self._shape(ctx, s, width, height) for s in shapes)
        except (ImageProblem, LabelProblem) as exc:
            return ctx.quarantine(rel, str(exc))
        key = Path(rel).with_suffix("").as_posix()
        attrs = {k: str(v) for k in o.attribute_keys if (v := _get(data, k)) is not None}
        return Sample(
            sample_id=ctx.sample_id(key),
            source=ctx.source,
            image=rel,
            width=width,
            height=height,
            modality=ctx.modality,
            scene=ctx.scene,
            labels=(label,),
            attributes={"source_label": str(raw), **attrs},
            regions=regions,
            group_id=key,
        )

    def _shape(self, ctx, shape, width: int, height: int) -> Region:
        try:
            name = str(shape["label"])
            points = tuple((float(x), float(y)) for x, y in shape["points"])
        except (KeyError, TypeError, ValueError):
            raise ImageProblem(f"malformed shape {str(shape)[:80]}") from None
        for x, y in points:
            if not (0 <= x < width and 0 <= y < height):
                raise ImageProblem(
                    f"keypoint {name} ({x:g}, {y:g}) lies outside the {width}x{height} image"
                )
        return Region(label=name, points=points, level="point")
