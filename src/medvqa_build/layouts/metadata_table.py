"""``metadata_table``: images found on disk (optionally in class folders) joined by file name to
the rows of a metadata table that may carry per-row box corner points (Kvasir-Capsule
``metadata.csv``, GastroVision ``GastroVision_metadata.csv``).

Every image file on disk and every table row that names no file is one candidate, so
``found = converted + quarantined``. A file may have several rows (one frame with two findings,
or a segment label plus a boxed finding): its labels are the rows' labels, its regions their boxes.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from ..errors import SourceError
from ..geometry import box_problem
from ..media.image import ImageProblem, check_image
from ..quarantine import QuarantineEntry
from ..records import Region, Sample
from .base import IMAGE_EXTENSIONS, LAYOUTS, LabelProblem, LayoutOptions, ScanContext, sorted_files


class MetadataTableOptions(LayoutOptions):
    table: str
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


def read_rows(path: Path, sep: str, wanted: list[str], source: str) -> list[dict[str, str]]:
    """Rows as dicts of stripped strings; short rows are padded with "" (Kvasir-Capsule writes
    one empty field too few for unboxed rows, see its scripts/generate_csv_from_json.py)."""
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


@LAYOUTS.register("metadata_table")
class MetadataTable:
    name = "metadata_table"
    Options = MetadataTableOptions

    def __init__(self, options: MetadataTableOptions):
        self.o = options
        if len(options.box_point_columns) % 2:
            raise SourceError(
                "box_point_columns must list x/y pairs", where=str(options.box_point_columns)
            )

    def _wanted(self) -> list[str]:
        o = self.o
        optional = (o.group_column, o.frame_column, o.width_column, o.height_column)
        return [
            o.file_column,
            o.label_column,
            *o.attribute_columns,
            *o.box_point_columns,
            *(c for c in optional if c),
        ]

    def scan(self, ctx: ScanContext) -> Iterator[Sample | QuarantineEntry]:
        o = self.o
        table = ctx.require_file(o.table, "metadata table")
        rows = read_rows(table, o.sep, self._wanted(), ctx.source)
        base = ctx.require_dir(o.images_dir, "image")
        by_name: dict[str, list[int]] = {}
        for index, row in enumerate(rows):
            by_name.setdefault(row[o.file_column], []).append(index)
        used: set[int] = set()
        for path in sorted_files(base, tuple(e.lower() for e in o.extensions)):
            yield self._file(ctx, base, path, rows, by_name, used)
        unmatched: dict[tuple[str, str], int] = {}
        for index, row in enumerate(rows):
            if index not in used:
                unmatched.setdefault((row[o.file_column], row[o.label_column]), index)
        for (name, label), index in unmatched.items():
            yield ctx.quarantine(
                f"{Path(o.images_dir).as_posix()}/{name}",
                f"listed in {o.table} (row {index + 2}, {o.label_column} {label!r}) "
                f"but no such file under {o.images_dir!r}",
            )

    def _matching_rows(self, ctx, base, path, rows, by_name) -> tuple[list[int], str]:
        """Rows that describe ``path`` and the raw label to keep as ``source_label``."""
        o = self.o
        candidates = by_name.get(path.name, [])
        if not o.class_folders:
            if not candidates:
                raise LabelProblem(f"image not listed in {o.table}")
            return candidates, "|".join(dict.fromkeys(rows[i][o.label_column] for i in candidates))
        folders = path.relative_to(base).parts[:-1]
        if len(folders) != 1:
            raise LabelProblem(
                f"expected 1 folder level below {o.images_dir!r}, found {len(folders)}"
            )
        folder_label = ctx.canonical(folders[0])
        matching = [i for i in candidates if self._canonical_or_none(ctx, rows[i]) == folder_label]
        if not matching:
            listed = sorted({rows[i][o.label_column] for i in candidates})
            where = f"only as {listed}" if listed else "not at all"
            raise LabelProblem(f"image in folder {folders[0]!r} is listed in {o.table} {where}")
        return matching, folders[0]

    def _canonical_or_none(self, ctx: ScanContext, row: dict[str, str]) -> str | None:
        try:
            return ctx.canonical(row[self.o.label_column])
        except LabelProblem:
            return None

    def _file(self, ctx, base, path, rows, by_name, used) -> Sample | QuarantineEntry:
        o = self.o
        rel = ctx.rel(path)
        try:
            indices, source_label = self._matching_rows(ctx, base, path, rows, by_name)
            used.update(indices)
            width, height = check_image(path, ctx.verify)
            first = rows[indices[0]]
            self._check_size(first, width, height)
            labels = tuple(dict.fromkeys(ctx.canonical(rows[i][o.label_column]) for i in indices))
            regions = tuple(
                r for i in indices if (r := self._region(ctx, rows[i], width, height)) is not None
            )
        except (ImageProblem, LabelProblem) as exc:
            return ctx.quarantine(rel, str(exc))
        key = path.relative_to(ctx.root).with_suffix("").as_posix()
        frame = first.get(o.frame_column or "", "")
        return Sample(
            sample_id=ctx.sample_id(key),
            source=ctx.source,
            image=rel,
            frame=int(frame) if frame.isdigit() else None,
            width=width,
            height=height,
            modality=ctx.modality,
            scene=ctx.scene,
            labels=labels,
            attributes={"source_label": source_label, **{c: first[c] for c in o.attribute_columns}},
            regions=regions,
            group_id=first[o.group_column] if o.group_column else key,
        )

    def _check_size(self, row: dict[str, str], width: int, height: int) -> None:
        o = self.o
        if o.width_column and o.height_column:
            listed = (row[o.width_column], row[o.height_column])
            if listed != (str(width), str(height)):
                raise ImageProblem(
                    f"{o.table} lists {listed[0]}x{listed[1]}, the file is {width}x{height}"
                )

    def _region(
        self, ctx: ScanContext, row: dict[str, str], width: int, height: int
    ) -> Region | None:
        values = [row[c] for c in self.o.box_point_columns]
        if not any(values):
            return None
        if not all(values):
            raise ImageProblem(f"incomplete box corners {values} in {self.o.table}")
        try:
            xs, ys = [float(v) for v in values[0::2]], [float(v) for v in values[1::2]]
        except ValueError:
            raise ImageProblem(f"non-numeric box corners {values} in {self.o.table}") from None
        box = (min(xs), min(ys), max(xs), max(ys))
        problem = box_problem(box, width, height)
        if problem:
            raise ImageProblem(problem)
        return Region(label=ctx.canonical(row[self.o.label_column]), bbox=box, level="box")
