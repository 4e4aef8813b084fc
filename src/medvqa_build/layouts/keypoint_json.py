"""``keypoint_json``: images with one JSON file each (same stem) holding named keypoints as
labelme-style ``shapes`` (``label`` + ``points``), and an image-level class taken either from the
JSON (``label_key``) or from a separate table with one row per case (``label_table``, CSV or
XLSX; the CSXA release keeps its curvature grades in ``datasets.xlsx``, not in the JSON).

Every image and every JSON without an image is a candidate. Keypoints become one region per
shape (its points in pixel coordinates); a point outside the image is quarantined. With a
table, an image's key is its stem (or the stem's first ``table_key_chars`` characters: CSXA
names a file by the four-digit case number followed by more digits); numeric keys compare as
integers, so ``0012`` matches a cell ``12``.

An empty class cell (or ``nan``, or another of ``missing_values``) leaves the image without a
class, keeps its keypoints and is counted; two rows of one case with different classes are
contradictory and quarantined (an empty row beside a graded one is not a conflict). A keypoint
name given twice at different places in one file (CSXA ``2548130.json`` repeats
``C3 top right``) is left out, both copies, and counted; the image keeps its other keypoints.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from pathlib import Path

from pydantic import model_validator

from ..errors import ImageProblem, SourceError
from ..media.image import check_image
from ..records import QuarantineEntry, Region, Sample
from ..store.paths import sorted_files
from ..store.table_text import TableProblem, check_text_table, read_json_file
from ..store.workbook import WorkbookProblem, check_workbook
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
    # class cells meaning "no value": the image is kept without a class, the cell counted
    missing_values: list[str] = list(MISSING_MARKERS)

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
        check_workbook(path)  # sizes, longest text and sheet extent, before openpyxl parses
    except WorkbookProblem as exc:
        raise SourceError(
            str(exc),
            where=str(path),
            fix="download the workbook again from the release, or raise the limit it names "
            "in MEDVQA_LIMITS (docs/reliability.md, Limits) if the file is genuine",
        ) from None
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
        check_text_table(path, "table", ",")
        with path.open(newline="", encoding="utf-8-sig") as fh:
            return [(n, list(r)) for n, r in enumerate(csv.reader(fh), start=1)]
    except (UnicodeDecodeError, csv.Error, TableProblem) as exc:
        raise SourceError(f"{path.name} is not a readable UTF-8 CSV table ({exc})") from None


Labels = dict[str, str | None]  # table key -> raw label ("" empty cell, None conflicting rows)


@LAYOUTS.register("keypoint_json")
class KeypointJson(FileLayout):
    name = "keypoint_json"
    Options = KeypointJsonOptions

    def __init__(self, options: KeypointJsonOptions):
        super().__init__(options)
        self._missing = frozenset(options.missing_values)

    def expects(self) -> Alternatives:
        o = self.options
        return [
            expect_paths(o.images_dir, o.json_dir, kind="dir")
            + expect_paths(o.label_table, kind="file")
        ]

    def provides(self) -> set[str]:
        return {"labels", "points", "attribute:source_label"} | attribute_caps(
            self.options.attribute_keys
        )

    def candidates(self, ctx: ScanContext) -> Iterator[FileCandidate | QuarantineEntry]:
        """Every image (with its JSON path and the label table, read once), then every JSON
        without an image (quarantined, so the annotations count as found too)."""
        o = self.options
        images = ctx.require_dir(o.images_dir, "image")
        jsons = ctx.require_dir(o.json_dir, "JSON annotation")
        labels = self._load_table(ctx) if o.label_table else None
        stems = set()
        for path in sorted_files(images, (o.image_suffix.lower(),)):
            stems.add(path.stem)
            yield FileCandidate(ctx.rel(path), (path, jsons / f"{path.stem}.json", labels))
        for path in sorted_files(jsons, (".json",)):
            if path.stem not in stems:
                reason = f"annotation without an image {path.stem}{o.image_suffix}"
                yield ctx.quarantine(path, reason)

    def read(self, ctx: ScanContext, candidate: FileCandidate) -> Sample:
        """The image's keypoints and class; a class or keypoint left out is counted only once
        the image is known to be kept."""
        o = self.options
        path, json_path, labels = candidate.info
        data, width, height = self._json(ctx, path, json_path)
        raw = self._table_label(labels, path.stem) if o.label_table else _get(data, o.label_key)
        raw = "" if is_missing(raw, self._missing) else str(raw).strip()
        label = ctx.canonical(raw) if raw else None
        shapes = _get(data, o.shapes_key) or []
        if not isinstance(shapes, list):
            raise ImageProblem(
                f"{ctx.rel(json_path)} field {o.shapes_key!r} is {type(shapes).__name__}; "
                "expected a list of shapes"
            )
        regions, repeated = self._regions(ctx, shapes, width, height)
        if label is None:
            ctx.label_missing(o.label_table_label_column if o.label_table else o.label_key)
        for name in repeated:
            ctx.label_missing(f"keypoint {name!r} (given twice)")
        attrs = {
            k: str(v) for k in o.attribute_keys if not is_missing(v := _get(data, k), self._missing)
        }
        return ctx.sample(
            candidate.rel,
            width,
            height,
            labels=(label,) if label is not None else (),
            attributes={**({"source_label": raw} if raw else {}), **attrs},
            regions=regions,
        )

    def _json(self, ctx: ScanContext, path: Path, json_path: Path) -> tuple[dict, int, int]:
        """The image's JSON and the image's size, which the JSON's size keys must match."""
        o = self.options
        if not json_path.is_file():
            raise LabelProblem(f"annotation {ctx.rel(json_path)} is missing")
        try:
            data = read_json_file(json_path)
        except ValueError as exc:  # not JSON, not UTF-8, over a JSON limit
            raise ImageProblem(f"{ctx.rel(json_path)} is not valid JSON ({exc})") from None
        if not isinstance(data, dict):
            raise ImageProblem(
                f"{ctx.rel(json_path)} is a JSON {type(data).__name__}; expected an object"
            )
        width, height = check_image(path, ctx.verify, ctx.max_pixels)
        listed = (_get(data, o.width_key or ""), _get(data, o.height_key or ""))
        try:
            size = (int(listed[0]), int(listed[1])) if None not in listed else None
        except (TypeError, ValueError):
            raise ImageProblem(
                f"{ctx.rel(json_path)} gives the size {listed[0]!r}x{listed[1]!r}; expected "
                "whole numbers"
            ) from None
        if size is not None and size != (width, height):
            raise ImageProblem(
                f"{ctx.rel(json_path)} says {listed[0]}x{listed[1]}, the image is {width}x{height}"
            )
        return data, width, height

    def _load_table(self, ctx: ScanContext) -> Labels:
        """Each case's raw class from the label table; a case whose rows disagree maps to None,
        so only its images are quarantined, not the scan stopped."""
        o = self.options
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
        ctx.note_table(path, [c for c in header if c])
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
        labels: Labels = {}
        for number, row in rows:
            if number <= header_row:
                continue
            key = _key(row[ki]) if ki < len(row) else ""
            if not key:
                continue
            value = row[li].strip() if li < len(row) else ""
            if is_missing(value, self._missing):
                labels.setdefault(key, "")  # an empty row beside a graded one is no conflict
                continue
            value = _key(value)  # "1.0" and "1" are the same grade
            seen = labels.get(key, "")
            labels[key] = value if seen in ("", value) else None
        return labels

    def _table_label(self, labels: Labels, stem: str) -> str:
        """The case's raw class, or "" when its cell is empty (left out, not an error)."""
        o = self.options
        key = _key(stem[: o.table_key_chars] if o.table_key_chars else stem)
        if key not in labels:
            raise LabelProblem(f"no row for {key!r} in {o.label_table}")
        raw = labels[key]
        if raw is None:
            raise LabelProblem(f"{o.label_table} gives {key!r} conflicting labels")
        return raw

    def _regions(self, ctx, shapes, width: int, height: int) -> tuple[tuple[Region, ...], list]:
        """One region per shape, and the names given twice at different places (all their
        copies left out: which one is right cannot be told)."""
        regions = [self._shape(ctx, s, width, height) for s in shapes]
        places: dict[str, set] = {}
        for region in regions:
            places.setdefault(region.label, set()).add(region.points)
        repeated = [name for name, where in places.items() if len(where) > 1]
        kept, seen = [], set()
        for region in regions:
            if region.label in repeated or (region.label, region.points) in seen:
                continue  # contradictory, or the same point written twice
            seen.add((region.label, region.points))
            kept.append(region)
        return tuple(kept), repeated

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
