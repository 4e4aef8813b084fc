"""``json_boxes``: one JSON object of boxes keyed by image stem, beside an image folder.

The Simula polyp sets ship boxes this way (Kvasir-SEG ``kavsir_bboxes.json``, HyperKvasir
``segmented-images/bounding-boxes.json``): ``{stem: {"height", "width", "bbox": [{"label",
"xmin", "ymin", "xmax", "ymax"}, ...]}}``. The reader is shared with ``image_mask_pairs``.
"""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import BaseModel, ConfigDict

from ..errors import ImageProblem, SourceError
from ..geometry import box_problem
from ..media.image import check_image
from ..records import Region, Sample
from ..store.limits import box_count_problem
from ..store.paths import IMAGE_EXTENSIONS, sorted_files
from ..store.table_text import read_json_file
from .base import LAYOUTS, FileCandidate, FileLayout, LayoutOptions, ScanContext
from .discovery import Alternatives, expect_paths


class BoxJsonOptions(BaseModel):
    """Where the JSON is and how one entry names its boxes."""

    model_config = ConfigDict(extra="forbid")

    file: str
    boxes_key: str = "bbox"
    label_key: str = "label"
    default_label: str = "polyp"  # raw label when an entry has no label key
    # True when xmax/ymax name the last pixel inside the box; we store exclusive edges.
    max_inclusive: bool = False
    check_size: bool = True  # the entry's width/height must match the image header


def read_box_json(ctx: ScanContext, opts: BoxJsonOptions) -> dict[str, dict]:
    path = ctx.require_file(opts.file, "box JSON")
    try:
        data = read_json_file(path)
    except ValueError as exc:  # not JSON, not UTF-8, over a JSON limit
        raise SourceError(
            f"{ctx.source}: box JSON is not valid JSON ({exc})", where=str(path)
        ) from None
    if not isinstance(data, dict):
        raise SourceError(
            f"{ctx.source}: box JSON must be an object keyed by image stem, "
            f"found {type(data).__name__}",
            where=str(path),
        )
    return data


def regions_from_entry(
    ctx: ScanContext, opts: BoxJsonOptions, entry: dict, width: int, height: int
) -> tuple[tuple[Region, ...], tuple[str, ...]]:
    """Box regions of one JSON entry and their raw labels; raises ImageProblem/LabelProblem
    with the quarantine reason."""
    if not isinstance(entry, dict):
        raise ImageProblem(
            f"{opts.file} entry is {type(entry).__name__} {str(entry)[:40]!r}; expected an "
            f"object with {opts.boxes_key!r}"
        )
    listed = {"width", "height"} <= set(entry) and opts.check_size
    try:
        size = (int(entry["width"]), int(entry["height"])) if listed else None
    except (TypeError, ValueError):
        raise ImageProblem(
            f"{opts.file} entry has width/height {entry['width']!r}x{entry['height']!r}; "
            "expected whole numbers"
        ) from None
    boxes = entry.get(opts.boxes_key) or ()
    if not isinstance(boxes, list | tuple):
        raise ImageProblem(
            f"{opts.file} entry field {opts.boxes_key!r} is {type(boxes).__name__}; expected "
            "a list of boxes"
        )
    too_many = box_count_problem(len(boxes), f"{opts.file} entry")
    if too_many:
        raise ImageProblem(too_many)
    if listed and size != (width, height):
        raise ImageProblem(
            f"{opts.file} says {entry['width']}x{entry['height']}, image is {width}x{height}"
        )
    pad = 1.0 if opts.max_inclusive else 0.0
    regions, raw_labels = [], []
    for raw in boxes:
        try:
            box = (
                float(raw["xmin"]),
                float(raw["ymin"]),
                float(raw["xmax"]) + pad,
                float(raw["ymax"]) + pad,
            )
        except (KeyError, TypeError, ValueError):
            shown = repr(raw) if len(repr(raw)) <= 80 else repr(raw)[:77] + "..."
            raise ImageProblem(
                f"box {shown} in {opts.file} lacks numeric xmin/ymin/xmax/ymax"
            ) from None
        problem = box_problem(box, width, height)
        if problem:
            raise ImageProblem(problem)
        raw_label = str(raw.get(opts.label_key, opts.default_label))
        regions.append(Region(label=ctx.canonical(raw_label), bbox=box, level="box"))
        raw_labels.append(raw_label)
    return tuple(regions), tuple(raw_labels)


class JsonBoxesOptions(LayoutOptions):
    images_dir: str
    boxes: BoxJsonOptions
    extensions: list[str] = list(IMAGE_EXTENSIONS)
    require_entry: bool = True  # an image without a JSON entry is quarantined


@LAYOUTS.register("json_boxes")
class JsonBoxes(FileLayout):
    name = "json_boxes"
    Options = JsonBoxesOptions

    def expects(self) -> Alternatives:
        o = self.options
        return [expect_paths(o.images_dir, kind="dir") + expect_paths(o.boxes.file, kind="file")]

    def provides(self) -> set[str]:
        return {"regions", "labels", "attribute:box_count"}

    def candidates(self, ctx: ScanContext) -> Iterator[FileCandidate]:
        """Every image under ``images_dir``, with its JSON entry (None: not listed); the JSON
        is read once."""
        o = self.options
        base = ctx.require_dir(o.images_dir, "image")
        table = read_box_json(ctx, o.boxes)
        for path in sorted_files(base, tuple(e.lower() for e in o.extensions)):
            yield FileCandidate(ctx.rel(path), (path, table.get(path.stem)))

    def read(self, ctx: ScanContext, candidate: FileCandidate) -> Sample:
        """The image's boxes; an image the JSON does not list is quarantined only once its
        header reads (a damaged file is reported as such first)."""
        o = self.options
        path, entry = candidate.info
        width, height = check_image(path, ctx.verify, ctx.max_pixels)
        if entry is None and o.require_entry:
            raise ImageProblem(f"image not listed in {o.boxes.file}")
        regions, raw_labels = regions_from_entry(ctx, o.boxes, entry or {}, width, height)
        return ctx.sample(
            candidate.rel,
            width,
            height,
            labels=tuple(dict.fromkeys(r.label for r in regions)),
            attributes={
                "box_count": str(len(regions)),
                "source_label": "|".join(dict.fromkeys(raw_labels)),
            },
            regions=regions,
        )
