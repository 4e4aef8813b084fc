"""``metadata_table``: images found on disk (optionally in class folders) joined by file name to
the rows of a metadata table that may carry per-row box corner points (Kvasir-Capsule
``metadata.csv``, GastroVision ``GastroVision_metadata.csv``).

Every image file on disk and every table row that names no file is one candidate, so
``found = converted + quarantined``. A file may have several rows (one frame with two findings,
or a segment label plus a boxed finding): its labels are the rows' labels, its regions their boxes.

A cell holding one of ``missing_values`` is no value: an empty label cell drops that row's label
(and its box) only, an empty attribute or group cell that attribute or group; each is counted
with :meth:`ScanContext.label_missing`, and the sample is kept. With ``class_folders`` the
folder is the image's label, so a file whose only rows lack a label keeps its folder's label.
"""

from __future__ import annotations

import csv
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from ..errors import ImageProblem, SourceError
from ..geometry import box_problem
from ..media.image import check_image
from ..records import QuarantineEntry, Region, Sample
from ..store.paths import IMAGE_EXTENSIONS, sorted_files, without_suffix
from ..store.table_text import check_text_table
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

log = logging.getLogger(__name__)


class MetadataTableOptions(LayoutOptions):
    # the table's path below the root; a list names the places the owners' downloads put it
    # (Kvasir-Capsule: beside labelled_images/ on OSF, inside it in the Simula zip): the first
    # one present is read
    table: str | list[str]
    # false: without the table the images still convert, labelled by their class folder (the
    # table only adds checks); needs class_folders
    table_required: bool = True
    sep: str = ","
    images_dir: str = "."
    file_column: str  # the image's file name (no folder) as the table lists it
    label_column: str
    # files live in <images_dir>/<class>/<file>; a row joins a file only if its label maps to
    # the same canonical name as the folder (file names repeat across GastroVision classes)
    class_folders: bool = False
    group_column: str | None = None
    frame_column: str | None = None
    attribute_columns: list[str] = []
    # x/y column pairs of a box's corner points (x1, y1, x2, y2, ...); the box is their
    # min/max in pixel-edge coordinates; all empty = no box, partly empty = quarantined
    box_point_columns: list[str] = []
    width_column: str | None = None  # when given, listed sizes must match the file's
    height_column: str | None = None
    extensions: list[str] = list(IMAGE_EXTENSIONS)
    # cells that mean "no value" (add the owners' own "not assessed" markers here)
    missing_values: list[str] = list(MISSING_MARKERS)


def read_rows(path: Path, sep: str, wanted: list[str], source: str) -> list[dict[str, str]]:
    """Rows as dicts of stripped strings; short rows are padded with "" (Kvasir-Capsule writes
    one empty field too few for unboxed rows, see its scripts/generate_csv_from_json.py)."""
    check_text_table(path, "metadata table", sep)
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh, delimiter=sep, restval="")
        columns = [c.strip() for c in reader.fieldnames or []]
        missing = [c for c in wanted if c not in columns]
        if missing:
            raise SourceError(
                f"{source}: metadata table lacks column(s) {missing}; it has {columns}",
                where=str(path),
                fix=f"check the separator (manifest says {sep!r}) and the column names",
            )
        return [
            {(k or "").strip(): (v or "").strip() for k, v in row.items() if k is not None}
            for row in reader
        ]


class _Table(NamedTuple):
    """The metadata table as read once: its name for messages (the first place when absent),
    its rows and the rows of each file name."""

    name: str
    rows: list[dict[str, str]]
    by_name: dict[str, list[int]]
    absent: bool


class _Match(NamedTuple):
    """The rows that describe one file: those with a label, those whose label cell is empty;
    the file's label from its class folder (None without class folders); and the raw label
    kept as ``source_label``."""

    labelled: list[int]
    unlabelled: list[int]
    folder_label: str | None
    source_label: str
    # the sample key when the class folder sits in a folder of its own name (one tarball
    # unpacked into its own folder): the key of the flat layout, so the ids do not change
    key: str | None = None


@LAYOUTS.register("metadata_table")
class MetadataTable(FileLayout):
    name = "metadata_table"
    Options = MetadataTableOptions

    def __init__(self, options: MetadataTableOptions):
        super().__init__(options)
        self.tables = [options.table] if isinstance(options.table, str) else list(options.table)
        if not self.tables:
            raise SourceError("metadata_table: table names no file", where="table: []")
        if len(options.box_point_columns) % 2:
            raise SourceError(
                "box_point_columns must list x/y pairs", where=str(options.box_point_columns)
            )
        if not options.table_required and not options.class_folders:
            raise SourceError(
                "metadata_table: table_required: false needs class_folders: true (without the "
                "table only a class folder can label an image)",
                where=f"table: {options.table}",
            )

    def _wanted(self) -> list[str]:
        o = self.options
        optional = (o.group_column, o.frame_column, o.width_column, o.height_column)
        return [
            o.file_column,
            o.label_column,
            *o.attribute_columns,
            *o.box_point_columns,
            *(c for c in optional if c),
        ]

    def expects(self) -> Alternatives:
        images = expect_paths(self.options.images_dir, kind="dir")
        if not self.options.table_required:  # the images make the part; a table there is read
            return [images]
        return [expect_paths(t, kind="file") + images for t in self.tables]

    def provides(self) -> set[str]:
        o = self.options
        out = {"labels", "attribute:source_label"} | attribute_caps(o.attribute_columns)
        return out | ({"regions"} if o.box_point_columns else set())

    def _table_path(self, ctx: ScanContext) -> Path | None:
        """The first of the table's places present under the root; None when the table is
        optional and absent (raises :class:`SourceError` naming the first when required)."""
        for rel in self.tables:
            if (ctx.root / rel).is_file():
                return ctx.require_file(rel, "metadata table")
        if self.options.table_required:
            return ctx.require_file(self.tables[0], "metadata table")
        log.warning(
            "%s: %s not found under %s: labels come from the class folders alone "
            "(no size check, no boxes)",
            ctx.source,
            " or ".join(self.tables),
            ctx.root,
        )
        return None

    def _read_table(self, ctx: ScanContext) -> _Table:
        """The table's rows (none when the optional table is absent), indexed by file name."""
        path = self._table_path(ctx)
        rows: list[dict[str, str]] = []
        if path is not None:
            rows = read_rows(path, self.options.sep, self._wanted(), ctx.source)
            ctx.note_table(path, rows[0].keys() if rows else self._wanted())
        by_name: dict[str, list[int]] = {}
        for index, row in enumerate(rows):
            by_name.setdefault(row[self.options.file_column], []).append(index)
        name = ctx.rel(path) if path is not None else self.tables[0]
        return _Table(name, rows, by_name, path is None)

    def candidates(self, ctx: ScanContext) -> Iterator[FileCandidate | QuarantineEntry]:
        """Every image file on disk, joined to its rows (a file no row can describe is
        quarantined here, before its image is read), then each row naming no file (one entry
        per file name and label)."""
        o = self.options
        table = self._read_table(ctx)
        base = ctx.require_dir(o.images_dir, "image")
        used: set[int] = set()
        for path in sorted_files(base, tuple(e.lower() for e in o.extensions)):
            rel = ctx.rel(path)
            try:
                match = self._matching_rows(ctx, base, path, table)
            except LabelProblem as exc:
                yield ctx.quarantine(rel, str(exc))
                continue
            used.update(match.labelled + match.unlabelled)
            yield FileCandidate(rel, (path, table, match))
        unmatched: dict[tuple[str, str], int] = {}
        for index, row in enumerate(table.rows):
            if index not in used:
                unmatched.setdefault((row[o.file_column], row[o.label_column]), index)
        for (name, label), index in unmatched.items():
            rel = f"{Path(o.images_dir).as_posix()}/{name}"
            yield ctx.quarantine(
                rel,
                f"listed in {table.name} (row {index + 2}, {o.label_column} {label!r}) "
                f"but {ctx.why_absent(rel, o.images_dir)}",
            )

    def _missing(self, value: str) -> bool:
        return is_missing(value, self.options.missing_values)

    def _matching_rows(self, ctx: ScanContext, base: Path, path: Path, table: _Table) -> _Match:
        """The rows that describe ``path`` (see :class:`_Match`); raises :class:`LabelProblem`
        when none can (an unlisted file, a class folder the rows contradict)."""
        o = self.options
        rows = table.rows
        candidates = table.by_name.get(path.name, [])
        unlabelled = [i for i in candidates if self._missing(rows[i][o.label_column])]
        labelled = [i for i in candidates if i not in unlabelled]
        if not o.class_folders:
            if not candidates:
                raise LabelProblem(f"image not listed in {table.name}")
            raw = "|".join(dict.fromkeys(rows[i][o.label_column] for i in labelled))
            return _Match(labelled, unlabelled, None, raw)
        folders = path.relative_to(base).parts[:-1]
        key = None
        if len(folders) == 2 and _same_name(*folders):
            # labelled_images/normal_clean_mucosa/Normal clean mucosa/x.jpg: the tarball
            # normal_clean_mucosa.tar.gz unpacked into a folder of its own name
            key = without_suffix(ctx.rel(base / folders[1] / path.name))
            folders = folders[1:]
        elif len(folders) != 1:
            raise LabelProblem(
                f"expected 1 folder level below {o.images_dir!r} (or a class folder inside a "
                f"folder of the same name), found {len(folders)}"
            )
        folder_label = ctx.canonical(folders[0])
        matching = [i for i in labelled if self._canonical_or_none(ctx, rows[i]) == folder_label]
        if not matching and not unlabelled and not table.absent:
            listed = sorted({rows[i][o.label_column] for i in labelled})
            where = f"only as {listed}" if listed else "not at all"
            raise LabelProblem(f"image in folder {folders[0]!r} is listed in {table.name} {where}")
        return _Match(matching, unlabelled, folder_label, folders[0], key)

    def _canonical_or_none(self, ctx: ScanContext, row: dict[str, str]) -> str | None:
        try:
            return ctx.canonical(row[self.options.label_column])
        except LabelProblem:
            return None

    def read(self, ctx: ScanContext, candidate: FileCandidate) -> Sample:
        """The file's sample: its labels and boxes from its labelled rows (or its folder), its
        size checked against, and its attributes, group and frame taken from, its first row."""
        o = self.options
        path, table, match = candidate.info
        rows = table.rows
        width, height = check_image(path, ctx.verify, ctx.max_pixels)
        described = match.labelled + match.unlabelled  # rows with a label first
        first = rows[described[0]] if described else {}
        self._check_size(first, width, height, table.name)
        labels = (
            (match.folder_label,)
            if match.folder_label is not None
            else tuple(
                dict.fromkeys(ctx.canonical(rows[i][o.label_column]) for i in match.labelled)
            )
        )
        regions = tuple(
            r
            for i in match.labelled
            if (r := self._region(ctx, rows[i], width, height, table.name)) is not None
        )
        for _ in match.unlabelled:  # the row names the file but not its finding: label out
            ctx.label_missing(o.label_column)
        attributes = {"source_label": match.source_label}
        for column in o.attribute_columns:
            if first and self._missing(first[column]):
                ctx.label_missing(column)
            elif first:
                attributes[column] = first[column]
        group = first.get(o.group_column or "", "")
        if o.group_column and first and self._missing(group):
            ctx.label_missing(o.group_column)
        return ctx.sample(
            candidate.rel,
            width,
            height,
            key=match.key,
            frame=_frame(first.get(o.frame_column or "", "")),
            labels=labels,
            attributes=attributes,
            regions=regions,
            group_id=group if o.group_column and not self._missing(group) else None,
        )

    def _check_size(self, row: dict[str, str], width: int, height: int, table_name: str) -> None:
        o = self.options
        if not (o.width_column and o.height_column and row):
            return
        listed = (row[o.width_column], row[o.height_column])
        if any(self._missing(v) for v in listed):
            return  # the table gives no size for this file: nothing to check
        if listed != (str(width), str(height)) and _number(listed) != (width, height):
            raise ImageProblem(
                f"{table_name} lists {listed[0]}x{listed[1]}, the file is {width}x{height}"
            )

    def _region(
        self, ctx: ScanContext, row: dict[str, str], width: int, height: int, table_name: str
    ) -> Region | None:
        values = [row[c] for c in self.options.box_point_columns]
        empty = [self._missing(v) for v in values]
        if all(empty):  # no box: a segment-level (image) label
            return None
        if any(empty):
            raise ImageProblem(f"incomplete box corners {values} in {table_name}")
        try:
            xs, ys = [float(v) for v in values[0::2]], [float(v) for v in values[1::2]]
        except ValueError:
            raise ImageProblem(f"non-numeric box corners {values} in {table_name}") from None
        box = (min(xs), min(ys), max(xs), max(ys))
        problem = box_problem(box, width, height)
        if problem:
            raise ImageProblem(problem)
        return Region(label=ctx.canonical(row[self.options.label_column]), bbox=box, level="box")


def _same_name(outer: str, inner: str) -> bool:
    """Whether two folder names differ only in case, spaces and punctuation
    (``normal_clean_mucosa`` and ``Normal clean mucosa``, ``blood_fresh`` and ``Blood - fresh``)."""

    def letters(name: str) -> str:
        return "".join(c for c in name.lower() if c.isalnum())

    return letters(outer) == letters(inner) != ""


def _frame(value: str) -> int | None:
    """A frame number cell: ``"1204"``, or ``"1204.0"`` as a table re-saved by pandas writes it;
    None when empty or not a whole number."""
    try:
        number = float(value)
    except ValueError:
        return None
    return int(number) if number.is_integer() and number >= 0 else None


def _number(values: tuple[str, str]) -> tuple[float, float] | None:
    """``("768.0", "576")`` -> ``(768.0, 576.0)``: sizes written as floats still compare."""
    try:
        return float(values[0]), float(values[1])
    except ValueError:
        return None
