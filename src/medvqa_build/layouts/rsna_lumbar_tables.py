"""``rsna_lumbar_tables``: DICOM slices under ``<images>/{study}/{series}/{instance}.dcm`` with
three tables: per-study severities (one column per ``{condition}_{level}``), per-slice label
coordinates and series descriptions (the RSNA 2024 Lumbar Spine competition's data page).

One candidate per labelled slice (a distinct study/series/instance of the coordinates table):
its regions are the coordinate rows (a point, the disc level, the condition), its labels the
conditions graded at least ``min_severity`` there, or ``healthy_label`` when none is. A grade
cell left empty (not graded) drops that grade only (counted): the point still locates its
level, so the region is kept; a series the manifest names in
``exclude_series`` (a documented non-lumbar series) and a slice carrying two conditions that
cannot share one slice at one level (``exclusive_conditions``) are quarantined with the reason.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from pydantic import field_validator

from ..errors import ImageProblem, SourceError
from ..records import Region, Sample, SliceRef
from ..store.table_text import check_text_table
from ..vocab import LEVELS_ATTRIBUTE, join_levels, normalise_level
from .base import (
    LAYOUTS,
    MISSING_MARKERS,
    FileCandidate,
    FileLayout,
    LabelProblem,
    LayoutOptions,
    ScanContext,
    is_missing,
)
from .dicom_common import check_keywords, dicom_size_and_attributes
from .discovery import Alternatives, expect_paths

SEVERITIES = ("Normal/Mild", "Moderate", "Severe")


class RsnaLumbarOptions(LayoutOptions):
    labels_table: str = "train.csv"
    coordinates_table: str = "train_label_coordinates.csv"
    series_table: str = "train_series_descriptions.csv"
    images_dir: str = "train_images"
    min_severity: str = "Moderate"  # grades at or above this make the slice show the condition
    # a grade cell holding one of these was not graded: that label is left out, not the slice
    # (the data page: "Some entries have incomplete labels"; train.csv leaves them empty)
    missing_values: list[str] = list(MISSING_MARKERS)
    healthy_label: str = "Healthy"
    dicom_attributes: list[str] = []
    # series id -> why its slices are left out (a series the owners' forum documents as wrong)
    exclude_series: dict[str, str] = {}
    # groups of conditions that cannot be marked on one slice at one level (a sagittal slice
    # shows one neural foramen): such a slice is contradictory and quarantined
    exclusive_conditions: list[list[str]] = []

    _keywords = field_validator("dicom_attributes")(classmethod(lambda cls, v: check_keywords(v)))

    @field_validator("min_severity")
    @classmethod
    def _severity(cls, value: str) -> str:
        if value not in SEVERITIES:
            raise ValueError(f"must be one of {SEVERITIES}")
        return value


def _read(ctx: ScanContext, rel: str, what: str, wanted: list[str]) -> list[dict[str, str]]:
    path = ctx.require_file(rel, what)
    check_text_table(path, what, ",")
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        columns = list(reader.fieldnames or [])
        ctx.note_table(path, columns)
        missing = [c for c in wanted if c not in columns]
        if missing:
            raise SourceError(
                f"{ctx.source}: {rel} lacks column(s) {missing}; it has {columns}",
                where=str(path),
                fix="pass the folder of the Kaggle download (train.csv, "
                "train_label_coordinates.csv, train_series_descriptions.csv, train_images/)",
            )
        return [{k: (v or "").strip() for k, v in row.items() if k} for row in reader]


def _slug(text: str) -> str:
    """``"Left Neural Foraminal Narrowing"`` -> ``"left_neural_foraminal_narrowing"``."""
    return "_".join(text.lower().split())


class Tables(NamedTuple):
    """What every slice's ``read`` looks up in the tables read once per scan."""

    grades: dict[str, dict[str, str]]  # study id -> its row of the labels table
    described: dict[tuple[str, str], str]  # (study id, series id) -> series description


class Slice(NamedTuple):
    """One labelled slice: its ids, its coordinate rows and the shared tables."""

    study: str
    series: str
    instance: str
    rows: list[dict[str, str]]
    tables: Tables


@LAYOUTS.register("rsna_lumbar_tables")
class RsnaLumbarTables(FileLayout):
    name = "rsna_lumbar_tables"
    Options = RsnaLumbarOptions

    def __init__(self, options: RsnaLumbarOptions):
        super().__init__(options)
        self._missing = frozenset(options.missing_values)

    def expects(self) -> Alternatives:
        o = self.options
        tables = expect_paths(o.labels_table, o.coordinates_table, o.series_table, kind="file")
        return [tables + expect_paths(o.images_dir, kind="dir")]

    def provides(self) -> set[str]:
        return {
            "labels",
            "points",
            f"attribute:{LEVELS_ATTRIBUTE}",
            "attribute:series_description",
            "attribute:source_label",
        }

    def candidates(self, ctx: ScanContext) -> Iterator[FileCandidate]:
        """One candidate per distinct slice of the coordinates table (the three tables read
        once), in numeric study/series/instance order."""
        o = self.options
        labels = _read(ctx, o.labels_table, "labels table", ["study_id"])
        coords = _read(
            ctx,
            o.coordinates_table,
            "label coordinates table",
            ["study_id", "series_id", "instance_number", "condition", "level", "x", "y"],
        )
        series = _read(
            ctx,
            o.series_table,
            "series descriptions table",
            ["study_id", "series_id", "series_description"],
        )
        ctx.require_dir(o.images_dir, "DICOM image")
        tables = Tables(
            grades={row["study_id"]: row for row in labels},
            described={(r["study_id"], r["series_id"]): r["series_description"] for r in series},
        )
        slices: dict[tuple[str, str, str], list[dict[str, str]]] = {}
        for row in coords:
            key = (row["study_id"], row["series_id"], row["instance_number"])
            slices.setdefault(key, []).append(row)
        images = Path(o.images_dir).as_posix()
        # numbers in numeric order; a non-numeric id (a damaged row) sorts after, not a crash
        for key in sorted(
            slices, key=lambda k: tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in k)
        ):
            study, series_id, instance = key
            rel = f"{images}/{study}/{series_id}/{instance}.dcm"
            yield FileCandidate(rel, Slice(*key, slices[key], tables))

    def read(self, ctx: ScanContext, candidate: FileCandidate) -> Sample:
        """The slice's points, labels and grades; an excluded series, a study without grades
        or contradictory marks quarantine it, an ungraded condition only drops its label."""
        o = self.options
        study, series, instance, rows, tables = candidate.info
        if series in o.exclude_series:
            raise LabelProblem(f"series {series} left out: {o.exclude_series[series]}")
        if study not in tables.grades:
            raise LabelProblem(f"study {study} has coordinates but no row in {o.labels_table}")
        self._check_exclusive(rows)
        width, height, attrs = dicom_size_and_attributes(
            ctx.safe_path(candidate.rel), ctx.verify, o.dicom_attributes, ctx.max_pixels
        )
        if not instance.isdigit():
            raise ImageProblem(f"instance number {instance!r} is not a number")
        regions, found, severities, ungraded = [], [], {}, []
        for row in rows:
            region, severity, column = self._region(ctx, row, tables.grades[study], width, height)
            regions.append(region)  # the point locates its level whatever the grade
            if severity is None:  # not graded: the grade is left out, the point kept
                ungraded.append(column)
                continue
            severities[f"{row['condition']} {region.level}"] = severity
            if SEVERITIES.index(severity) >= SEVERITIES.index(o.min_severity):
                found.append(region)
        for column in ungraded:  # counted only for a slice that is kept
            ctx.label_missing(column)
        labels = tuple(dict.fromkeys(r.label for r in found))
        if not labels and not ungraded:
            # healthy only when every condition annotated on the slice was graded below
            # min_severity: an ungraded one might be the disease
            labels = (self._healthy(ctx),)
        description = tables.described.get((study, series), "")
        attributes = {
            "source_label": "|".join(dict.fromkeys(r["condition"] for r in rows)),
            "series_description": description,
            LEVELS_ATTRIBUTE: join_levels(r.level for r in found),
            **{f"severity: {k}": v for k, v in sorted(severities.items())},
            **attrs,
        }
        axis = description.split()[0].lower() if description else "unknown"
        return ctx.sample(
            candidate.rel,
            width,
            height,
            key=f"{study}/{series}/{instance}",
            group_id=study,
            slice=SliceRef(axis, int(instance)),
            labels=labels,
            attributes={k: v for k, v in attributes.items() if v != ""},
            regions=tuple(regions),
        )

    def _healthy(self, ctx: ScanContext) -> str:
        """``healthy_label`` through the label map: one the map does not know is the manifest's
        mistake, not the slice's, so it stops the scan instead of quarantining every healthy
        slice."""
        try:
            return ctx.canonical(self.options.healthy_label)
        except LabelProblem as exc:
            raise SourceError(
                f"{ctx.source}: healthy_label: {exc}",
                fix="add the healthy_label to the manifest's label_map",
            ) from None

    def _check_exclusive(self, rows: list[dict[str, str]]) -> None:
        """Raise when the slice carries two conditions of one ``exclusive_conditions`` group at
        the same level (e.g. left and right neural foraminal narrowing on one sagittal slice)."""
        marked: dict[str, set[str]] = {}
        for row in rows:
            marked.setdefault(row["level"].strip(), set()).add(row["condition"].strip())
        for group in self.options.exclusive_conditions:
            for level, conditions in marked.items():
                both = [c for c in group if c in conditions]
                if len(both) > 1:
                    raise LabelProblem(
                        f"{' and '.join(both)} marked on the same slice at {level} "
                        f"(contradictory: a slice shows only one of them)"
                    )

    def _region(self, ctx, row, grade_row, width, height) -> tuple[Region, str | None, str]:
        """The coordinate row's region, its grade (None when the cell is empty: not graded)
        and the grade's column."""
        o = self.options
        level = normalise_level(row["level"])
        if level is None:
            raise LabelProblem(f"unknown level {row['level']!r} in {o.coordinates_table}")
        column = f"{_slug(row['condition'])}_{level.lower().replace('/', '_')}"
        if column not in grade_row:
            raise LabelProblem(f"{o.labels_table} has no column {column!r}")
        severity = grade_row[column]
        if is_missing(severity, self._missing):
            severity = None
        elif severity not in SEVERITIES:  # a grade the competition does not use: contradictory
            raise LabelProblem(
                f"{column} of study {row['study_id']} is {severity!r}, not one of {SEVERITIES}"
            )
        try:
            x, y = float(row["x"]), float(row["y"])
        except ValueError:
            raise ImageProblem(f"non-numeric point ({row['x']!r}, {row['y']!r})") from None
        if not (0 <= x < width and 0 <= y < height):
            raise ImageProblem(f"point ({x:g}, {y:g}) lies outside the {width}x{height} slice")
        label = ctx.canonical(row["condition"])
        return Region(label=label, points=((x, y),), level=level), severity, column
