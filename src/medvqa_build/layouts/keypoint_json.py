"""``keypoint_json``: images with one JSON file each (same stem) holding named keypoints as
labelme-style ``shapes`` (``label`` + ``points``), and an image-level class taken either from the
JSON (``label_key``) or from a separate table with one row per case (``label_table``, CSV or
XLSX; the CSXA release keeps its curvature grades in ``datasets.xlsx``, not in the JSON).

Every image and every JSON without an image is a candidate. Keypoints become one region per
shape (its points in pixel coordinates); a point outside the image is quarantined. With a
table, an image's key is its stem (or the stem's first ``table_key_chars`` characters: CSXA
names a file by the four-digit case number followed by more digits); numeric keys compare as
integers, so ``0012`` matches a cell ``12``.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from pathlib import Path

from pydantic import model_validator

from ..errors import SourceError
from ..media.image import ImageProblem, check_image
from ..quarantine import QuarantineEntry
from ..records import Region, Sample
from .base import LAYOUTS, LabelProblem, LayoutOptions, ScanContext, sorted_files


class KeypointJsonOptions(LayoutOptions):
    images_dir: str
    json_dir: str
    image_suffix: str = ".png"
    label_key: str | None = None  # dot path in the JSON, e.g. "curvature" or "flags.category"
    shapes_key: str = "shapes"
    width_key: str | None = "imageWidth"  # when present, must match the image
    height_key: str | None = "imageHeight"
    attribute_keys: list[str] = []
    # the class from a table instead of the JSON (CSV, or XLSX read without extra packages)
    label_table: str | None = None
    label_table_sheet: str | None = None  # XLSX sheet name; the first sheet when unset
    label_table_header_row: int = 1  # 1-based row holding the column names
    label_table_key_column: str | None = None
    label_table_label_column: str | None = None
    table_key_chars: int | None = None  # key = the image stem's first N characters

    @model_validator(mode="after")
    def _one_label_source(self):
        if (self.label_key is None) == (self.label_table is None):
            raise ValueError("set exactly one of label_key (in the JSON) and label_table")
        if self.label_table and not (self.label_table_key_column and self.label_table_label_column):
            raise ValueError(
                "label_table needs label_table_key_column and label_table_label_column"
            )
        if self.label_table_header_row < 1:
            raise ValueError("label_table_header_row is 1-based")
        if self.table_key_chars is not None and self.table_key_chars < 1:
            raise ValueError("table_key_chars must be at least 1")
        return self


def _get(data, dotted: str):
    for part in dotted.split("."):
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def _key(value: str) -> str:
    """Table keys and file-name keys compare as integers when numeric (``0012`` == ``12.0``)."""
    value = str(value).strip()
    return str(int(float(value))) if re.fullmatch(r"\d+(\.0*)?", value) else value


def _cell_text(value) -> str:
    """A cell as the text a CSV export would show: whole numbers without ``.0``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def read_xlsx_rows(path: Path, sheet: str | None = None) -> list[tuple[int, list[str]]]:
    """``(1-based row number, cell strings)`` of the non-empty rows of one worksheet
    (the first when ``sheet`` is None), read with openpyxl; trailing empty cells dropped."""
    from openpyxl import load_workbook

    try:
        book = load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises zipfile, KeyError, XML and its own errors
        raise SourceError(f"{path.name} is not a readable XLSX workbook ({exc})") from None
    try:
        if sheet is not None and sheet not in book.sheetnames:
            raise SourceError(f"no sheet {sheet!r} in {path.name}; it has {book.sheetnames}")
        ws = book[sheet] if sheet is not None else book.worksheets[0]
        rows = []
        for number, values in enumerate(ws.iter_rows(values_only=True), start=1):
            cells = [_cell_text(v) for v in values]
            while cells and cells[-1] == "":
                cells.pop()
            if cells:
                rows.append((number, cells))
        return rows
    finally:
        book.close()


def read_table_rows(path: Path, sheet: str | None = None) -> list[tuple[int, list[str]]]:
    """``(1-based row number, cells)`` of a CSV file or one XLSX worksheet."""
    if path.suffix.lower() == ".xlsx":
        return read_xlsx_rows(path, sheet)
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            return [(n, list(r)) for n, r in enumerate(csv.reader(fh), start=1)]
    except (UnicodeDecodeError, csv.Error) as exc:
        raise SourceError(f"{path.name} is not a readable UTF-8 CSV table ({exc})") from None


@LAYOUTS.register("keypoint_json")
class KeypointJson:
    name = "keypoint_json"
    Options = KeypointJsonOptions

    def __init__(self, options: KeypointJsonOptions):
        self.o = options
        self.labels: dict[str, str | None] | None = None  # key -> raw label (None: conflicting)

    def _load_table(self, ctx: ScanContext) -> dict[str, str | None]:
        o = self.o
        path = ctx.require_file(o.label_table, "label table")
        try:
            rows = read_table_rows(path, o.label_table_sheet)
        except SourceError as exc:
            raise SourceError(f"{ctx.source}: {exc.what}", where=str(path)) from None
        header_row = o.label_table_header_row
        header = next((cells for n, cells in rows if n == header_row), None)
        if header is None:
            raise SourceError(
                f"{ctx.source}: {o.label_table} has no row {header_row} (the header row)",
                where=str(path),
            )
        header = [" ".join(c.split()) for c in header]  # line breaks inside a header cell
        wanted = [
            " ".join(c.split()) for c in (o.label_table_key_column, o.label_table_label_column)
        ]
        missing = [c for c in wanted if c not in header]
        if missing:
            raise SourceError(
                f"{ctx.source}: {o.label_table} lacks column(s) {missing}; row "
                f"{header_row} has {header}",
                where=str(path),
                fix="set label_table_header_row / label_table_*_column to the release's names",
            )
        ki, li = (header.index(c) for c in wanted)
        labels: dict[str, str | None] = {}
        for number, row in rows:
            if number <= header_row:
                continue
            key = _key(row[ki]) if ki < len(row) else ""
            if not key:
                continue
            value = row[li].strip() if li < len(row) else ""
            value = _key(value) if value else value  # "1.0" and "1" are the same grade
            labels[key] = value if labels.get(key, value) == value else None
        return labels

    def _table_label(self, ctx: ScanContext, stem: str) -> str:
        o = self.o
        key = _key(stem[: o.table_key_chars] if o.table_key_chars else stem)
        if key not in self.labels:
            raise LabelProblem(f"no row for {key!r} in {o.label_table}")
        raw = self.labels[key]
        if raw is None:
            raise LabelProblem(f"{o.label_table} gives {key!r} conflicting labels")
        if not raw:
            raise LabelProblem(f"{o.label_table} has no {o.label_table_label_column!r} for {key!r}")
        return raw

    def scan(self, ctx: ScanContext) -> Iterator[Sample | QuarantineEntry]:
        o = self.o
        images = ctx.require_dir(o.images_dir, "image")
        jsons = ctx.require_dir(o.json_dir, "JSON annotation")
        if o.label_table:
            self.labels = self._load_table(ctx)
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
            if o.label_table:
                raw = self._table_label(ctx, path.stem)
            else:
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
