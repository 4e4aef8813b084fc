"""``coco_json``: one COCO-style JSON (``images``, ``annotations`` with ``bbox = [x, y, w, h]``,
``categories``) over an image folder. Extra per-annotation category fields are read too, as
PSI-AVA (TAPIR) ships them: ``phase`` / ``step`` ids (one per image, copied onto every
annotation) and ``actions`` id lists, each resolved through its own ``*_categories`` list.

One candidate per entry of ``images`` (plus one per annotation that names an unknown image).
An id field that is absent, ``null`` or a missing marker (``-1`` where the owners pad with it),
an empty id list, and an image whose annotations carry no value for an image field are labels
left out: the sample is kept without them and ``ctx.label_missing`` counts them.

``annotations`` and ``images_dir`` take a list of alternatives, read in order (PSI-AVA: TAPIR's
``outputs/`` folder as its README sets it up, or the archive and the repository side by side).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from ..errors import ImageProblem, SourceError
from ..geometry import box_problem
from ..media.image import check_image
from ..records import QuarantineEntry, Region, Sample
from ..store.table_text import read_json_file
from .base import (
    LAYOUTS,
    MISSING_MARKERS,
    FileCandidate,
    FileLayout,
    LabelProblem,
    LayoutOptions,
    ScanContext,
    attribute_caps,
    is_missing,
)
from .discovery import Alternatives, expect_paths

CATEGORY_FIELD = "category_id"


class CocoJsonOptions(LayoutOptions):
    annotations: str | list[str]  # the JSON file, relative to the root (alternatives in order)
    images_dir: str | list[str] = "."  # ``file_name`` is relative to this folder
    split: str | None = None
    group_regex: str | None = None  # on file_name; group 1 is the group id (None: the image)
    # per-annotation id field -> categories list; the image gets one value (attribute + label)
    image_fields: dict[str, str] = {}
    # per-annotation id-list field -> categories list; kept per region and as the image's union
    region_list_fields: dict[str, str] = {}
    image_fields_as_labels: bool = False
    clip_tolerance_px: float = 0.5  # float boxes may overshoot the edge by rounding noise
    # an id holding one of these (compared as text, e.g. "-1") means "no value"
    missing_values: list[str] = list(MISSING_MARKERS)

    @property
    def annotation_files(self) -> list[str]:
        a = self.annotations
        return [a] if isinstance(a, str) else list(a)

    @property
    def image_dirs(self) -> list[str]:
        d = self.images_dir
        return [d] if isinstance(d, str) else list(d)


@LAYOUTS.register("coco_json")
class CocoJson(FileLayout):
    name = "coco_json"
    Options = CocoJsonOptions

    def __init__(self, options: CocoJsonOptions):
        super().__init__(options)
        self._group_re = re.compile(options.group_regex) if options.group_regex else None
        self._missing = frozenset(options.missing_values)

    def _absent(self, value) -> bool:
        return value is None or is_missing(value, self._missing)

    def _load(self, ctx: ScanContext) -> tuple[Path, dict]:
        files = self.options.annotation_files
        rel = next((f for f in files if (ctx.root / f).is_file()), files[0])
        path = ctx.require_file(rel, "COCO annotation")
        try:
            data = read_json_file(path)
        except ValueError as exc:  # not JSON, not UTF-8, over a JSON limit
            raise SourceError(
                f"{ctx.source}: annotation file is not valid JSON ({exc})", where=str(path)
            ) from None
        keys = [
            "images",
            "annotations",
            "categories",
            *self.options.image_fields.values(),
            *self.options.region_list_fields.values(),
        ]
        missing = [k for k in keys if not isinstance(data, dict) or k not in data]
        if missing:
            found = list(data) if isinstance(data, dict) else type(data).__name__
            raise SourceError(
                f"{ctx.source}: COCO file lacks key(s) {missing}; it has {found}",
                where=str(path),
                fix="check the manifest's annotations path",
            )
        for key in keys:
            _check_list(ctx, path, key, data[key])
        for key in set(keys) - {"images", "annotations"}:  # id -> name tables, used by all
            for i, raw in enumerate(data[key]):
                entry = raw if isinstance(raw, dict) else {}
                if not _hashable_id(entry.get("id")) or not isinstance(entry.get("name"), str):
                    raise SourceError(
                        f"{ctx.source}: {key}[{i}] of the COCO file is {_shown(raw)}; "
                        'expected {"id": <number or text>, "name": <text>, ...}',
                        where=str(path),
                        fix="repair the annotation file",
                    )
        ctx.note_table(path, keys)
        return path, data

    def expects(self) -> Alternatives:
        return [
            expect_paths(a, kind="file") + expect_paths(d, kind="dir")
            for a in self.options.annotation_files
            for d in self.options.image_dirs
        ]

    def provides(self) -> set[str]:
        fields = self.options.region_list_fields
        return (
            {"regions", "labels"}
            | attribute_caps(self.options.image_fields)
            | attribute_caps(fields)
            | {f"region_attribute:{f}" for f in fields}
        )

    def candidates(self, ctx: ScanContext) -> Iterator[FileCandidate | QuarantineEntry]:
        """The JSON read once: first a quarantine entry per annotation naming an unknown image
        (the JSON is the file at fault), then every entry of ``images`` by file name, with
        its annotations and the category names."""
        path, data = self._load(ctx)
        o = self.options
        dirs = o.image_dirs
        images_dir = next((d for d in dirs if (ctx.root / d).is_dir()), dirs[0])
        names = {
            k: {c["id"]: c["name"] for c in data[k]}
            for k in {"categories", *o.image_fields.values(), *o.region_list_fields.values()}
        }
        by_image: dict = defaultdict(list)
        images = []
        for i, raw in enumerate(data["images"]):
            image = raw if isinstance(raw, dict) else {}
            name = image.get("file_name")
            if not isinstance(name, str) or not name or not _hashable_id(image.get("id")):
                yield ctx.quarantine(
                    f"{ctx.rel(path)}#images[{i}]",
                    f"images[{i}] is {_shown(raw)}; expected "
                    '{"id": <number or text>, "file_name": <text>, ...}',
                )
                continue
            images.append(image)
        image_ids = {image["id"] for image in images}
        for i, ann in enumerate(data["annotations"]):
            if not isinstance(ann, dict):
                yield ctx.quarantine(path, f"annotations[{i}] is {_shown(ann)}, not an object")
                continue
            image_id = ann.get("image_id")
            if _hashable_id(image_id) and image_id in image_ids:
                by_image[image_id].append(ann)
            else:
                yield ctx.quarantine(
                    path, f"annotation {ann.get('id')} names unknown image {image_id!r}"
                )
        for image in sorted(images, key=lambda im: str(im["file_name"])):
            rel = (Path(images_dir) / image["file_name"]).as_posix()
            yield FileCandidate(rel, (image, by_image[image["id"]], names))

    def read(self, ctx: ScanContext, candidate: FileCandidate) -> Sample:
        o = self.options
        image, anns, names = candidate.info
        left_out: dict[str, int] = defaultdict(int)
        width, height = check_image(ctx.safe_path(candidate.rel), ctx.verify, ctx.max_pixels)
        if (image.get("width"), image.get("height")) not in ((width, height), (None, None)):
            raise ImageProblem(
                f"image is {width}x{height}, the annotation says "
                f"{image.get('width')}x{image.get('height')}"
            )
        attributes = self._image_fields(ctx, anns, names, left_out)
        regions, raw_labels = self._regions(ctx, anns, names, (width, height), attributes, left_out)
        for field, n in left_out.items():
            ctx.label_missing(field, n)
        labels = sorted({r.label for r in regions})
        if o.image_fields_as_labels:
            labels += [attributes[f] for f in o.image_fields if f in attributes]
        key = Path(image["file_name"]).with_suffix("").as_posix()
        match = self._group_re.search(image["file_name"]) if self._group_re else None
        return ctx.sample(
            candidate.rel,
            width,
            height,
            key=key,
            labels=tuple(labels),
            attributes={"source_label": ",".join(sorted(set(raw_labels))), **attributes}
            if raw_labels
            else attributes,
            regions=tuple(regions),
            group_id=match.group(1) if match else key,
            split=o.split,
        )

    def _regions(
        self,
        ctx: ScanContext,
        anns: list[dict],
        names: dict,
        size: tuple[int, int],
        attributes: dict[str, str],
        left_out: dict[str, int],
    ) -> tuple[list[Region], list[str]]:
        """The image's regions and their raw category names; each region's id-list fields
        go into ``attributes`` (``region<i>.<field>`` and the image's union)."""
        regions, raw_labels = [], []
        for ann in anns:
            if self._absent(ann.get(CATEGORY_FIELD)):
                left_out[CATEGORY_FIELD] += 1  # a box without its instrument: left out
                continue
            raw = _name(names["categories"], ann.get(CATEGORY_FIELD), "category")
            i = len(regions)
            raw_labels.append(raw)
            regions.append(
                Region(
                    label=ctx.canonical(raw),
                    bbox=self._box(ann.get("bbox"), *size),
                    polygon=_polygon(ann.get("segmentation")),
                )
            )
            for field, key in self.options.region_list_fields.items():
                ids = [v for v in ann.get(field) or () if not self._absent(v)]
                if not ids:
                    left_out[field] += 1  # no value for this region: no attribute
                    continue
                values = [ctx.canonical(_name(names[key], v, field)) for v in ids]
                attributes[f"region{i}.{field}"] = ",".join(values)
                union = set(filter(None, attributes.get(field, "").split(","))) | set(values)
                attributes[field] = ",".join(sorted(union))
        return regions, raw_labels

    def _image_fields(
        self, ctx: ScanContext, anns: list[dict], names: dict, left_out: dict[str, int]
    ) -> dict[str, str]:
        """The image's value of each image field (every annotation repeats it); a field no
        annotation gives a value for (an image without annotations) is left out."""
        attributes: dict[str, str] = {}
        for field, key in self.options.image_fields.items():
            values = {ann[field] for ann in anns if not self._absent(ann.get(field))}
            if len(values) > 1:
                raise LabelProblem(f"annotations disagree on the image's {field}: {sorted(values)}")
            if not values:
                left_out[field] += 1
                continue
            raw = _name(names[key], values.pop(), field)
            attributes[field] = ctx.canonical(raw)
            attributes[f"source_{field}"] = raw
        return attributes

    def _box(self, bbox, width: int, height: int) -> tuple[float, float, float, float]:
        if not isinstance(bbox, list | tuple) or len(bbox) != 4 or not all(map(_is_number, bbox)):
            raise ImageProblem(f"bbox {_shown(bbox)} is not [x, y, w, h] (four numbers)")
        x, y, w, h = (float(v) for v in bbox)
        box = [x, y, x + w, y + h]  # COCO boxes are pixel-edge: x + w is already exclusive
        tol = self.options.clip_tolerance_px
        limits = (width, height, width, height)
        box = [
            min(max(v, 0.0), float(lim)) if -tol <= v <= lim + tol else v
            for v, lim in zip(box, limits, strict=True)
        ]
        problem = box_problem(box, width, height)
        if problem:
            raise ImageProblem(problem)
        return tuple(box)  # type: ignore[return-value]


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _hashable_id(value) -> bool:
    return isinstance(value, int | str) and not isinstance(value, bool)


def _shown(value) -> str:
    text = f"{type(value).__name__} {value!r}"
    return text if len(text) <= 80 else text[:77] + "..."


def _check_list(ctx: ScanContext, path: Path, key: str, value) -> None:
    """A top-level COCO key must be a list: one line naming it otherwise."""
    if not isinstance(value, list):
        raise SourceError(
            f"{ctx.source}: COCO field {key!r} must be a list; found {_shown(value)}",
            where=str(path),
            fix="repair the annotation file",
        )


def _name(categories: dict, value, field: str) -> str:
    if not _hashable_id(value) or value not in categories:
        raise LabelProblem(f"{field} id {value!r} is not in the file's categories")
    return str(categories[value])


def _polygon(segmentation) -> tuple[tuple[float, float], ...]:
    """The longest ring of a COCO polygon segmentation (RLE segmentations are not read)."""
    if not isinstance(segmentation, list) or not segmentation:
        return ()
    rings = [
        s for s in segmentation if isinstance(s, list) and len(s) >= 6 and all(map(_is_number, s))
    ]
    if not rings:
        return ()
    ring = max(rings, key=len)
    return tuple((float(ring[i]), float(ring[i + 1])) for i in range(0, len(ring) - 1, 2))
