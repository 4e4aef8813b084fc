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
import posixpath
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree as ET

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


# --- a minimal XLSX reader (cell values only; the standard library has no xlsx support) ------
_NS = {
    "m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main",
    "pr": "http://schemas.openxmlformats.org/package/2006/relationships",
}
_REL_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"


def _text(node) -> str:
    """A string item's text: its <t> runs, without phonetic (<rPh>) hints."""
    parts = []
    for child in node:
        tag = child.tag.rsplit("}", 1)[-1]
        if tag == "t":
            parts.append(child.text or "")
        elif tag == "r":
            parts.append(_text(child))
    return "".join(parts)


def _column(ref: str) -> int:
    index = 0
    for ch in re.match(r"[A-Z]*", ref.upper()).group():
        index = index * 26 + ord(ch) - 64
    return index - 1


def _cell_value(cell, shared: list[str]) -> str:
    kind = cell.get("t", "n")
    if kind == "inlineStr":
        node = cell.find("m:is", _NS)
        return _text(node) if node is not None else ""
    v = cell.find("m:v", _NS)
    raw = v.text if v is not None and v.text is not None else ""
    if kind == "s":
        return shared[int(raw)] if raw.strip().isdigit() and int(raw) < len(shared) else ""
    if kind == "b":
        return "TRUE" if raw.strip() == "1" else "FALSE"
    if kind == "n" and raw:
        number = float(raw)
        return str(int(number)) if number.is_integer() else raw
    return raw  # "str" (formula text), "e" (error) and dates stored as numbers stay as written


def read_xlsx_rows(path: Path, sheet: str | None = None) -> list[tuple[int, list[str]]]:
    """``(row number, cell strings)`` for the non-empty rows of one worksheet (1-based numbers
    as the sheet gives them; gaps between cells filled with "")."""
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
            book = ET.fromstring(zf.read("xl/workbook.xml"))
            sheets = book.findall("m:sheets/m:sheet", _NS)
            chosen = next((s for s in sheets if sheet is None or s.get("name") == sheet), None)
            if chosen is None:
                found = [s.get("name") for s in sheets]
                raise SourceError(f"no sheet {sheet!r} in {path.name}; it has {found}")
            rels = ET.fromstring(zf.read("xl/_rels/workbook.xml.rels"))
            target = next(
                r.get("Target")
                for r in rels.findall("pr:Relationship", _NS)
                if r.get("Id") == chosen.get(_REL_ID)
            )
            target = target.lstrip("/") if target.startswith("/") else posixpath.join("xl", target)
            shared = []
            if "xl/sharedStrings.xml" in names:
                strings = ET.fromstring(zf.read("xl/sharedStrings.xml"))
                shared = [_text(si) for si in strings.findall("m:si", _NS)]
            data = ET.fromstring(zf.read(posixpath.normpath(target)))
        rows: dict[int, dict[int, str]] = {}
        for n, row in enumerate(data.findall("m:sheetData/m:row", _NS), start=1):
            cells = rows.setdefault(int(row.get("r", n)), {})
            for k, cell in enumerate(row.findall("m:c", _NS)):
                ref = cell.get("r")
                cells[_column(ref) if ref else k] = _cell_value(cell, shared)
    except (zipfile.BadZipFile, KeyError, StopIteration, ET.ParseError, ValueError) as exc:
        raise SourceError(f"{path.name} is not a readable XLSX workbook ({exc})") from None
    return [
        (number, [cells.get(i, "") for i in range(max(cells, default=-1) + 1)])
        for number, cells in sorted(rows.items())
    ]


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
