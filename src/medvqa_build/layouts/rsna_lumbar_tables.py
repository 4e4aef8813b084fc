"""``rsna_lumbar_tables``: DICOM slices under ``<images>/{study}/{series}/{instance}.dcm`` with
three tables: per-study severities (one column per ``{condition}_{level}``), per-slice label
coordinates and series descriptions (the RSNA 2024 Lumbar Spine competition's data page).

One candidate per labelled slice (a distinct study/series/instance of the coordinates table):
its regions are the coordinate rows (a point, the disc level, the condition), its labels the
conditions graded at least ``min_severity`` there, or ``healthy_label`` when none is.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from pydantic import field_validator

from ..errors import SourceError
from ..media.image import ImageProblem
from ..quarantine import QuarantineEntry
from ..records import Region, Sample, SliceRef
from .base import LAYOUTS, LabelProblem, LayoutOptions, ScanContext
from .dicom_common import check_keywords, dicom_size_and_attributes
from .spine_levels import LEVELS_ATTRIBUTE, join_levels, normalise_level

SEVERITIES = ("Normal/Mild", "Moderate", "Severe")


class RsnaLumbarOptions(LayoutOptions):
    labels_table: str = "train.csv"
    coordinates_table: str = "train_label_coordinates.csv"
    series_table: str = "train_series_descriptions.csv"
    images_dir: str = "train_images"
    min_severity: str = "Moderate"  # grades at or above this make the slice show the condition
    healthy_label: str = "Healthy"
    dicom_attributes: list[str] = []

    _keywords = field_validator("dicom_attributes")(classmethod(lambda cls, v: check_keywords(v)))

    @field_validator("min_severity")
    @classmethod
    def _severity(cls, value: str) -> str:
        if value not in SEVERITIES:
            raise ValueError(f"must be one of {SEVERITIES}")
        return value


def _read(path: Path, wanted: list[str], source: str, what: str) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        columns = list(reader.fieldnames or [])
        missing = [c for c in wanted if c not in columns]
        if missing:
            raise SourceError(
                f"{source}: {what} lacks column(s) {missing}; it has {columns}",
                where=str(path),
                fix="pass the folder of the Kaggle download (train.csv, "
                "train_label_coordinates.csv, train_series_descriptions.csv, train_images/)",
            )
        return [{k: (v or "").strip() for k, v in row.items() if k} for row in reader]


def _slug(text: str) -> str:
    """``"Left Neural Foraminal Narrowing"`` -> ``"left_neural_foraminal_narrowing"``."""
    return "_".join(text.lower().split())


@LAYOUTS.register("rsna_lumbar_tables")
class RsnaLumbarTables:
    name = "rsna_lumbar_tables"
    Options = RsnaLumbarOptions

    def __init__(self, options: RsnaLumbarOptions):
        self.o = options

    def scan(self, ctx: ScanContext) -> Iterator[Sample | QuarantineEntry]:
        o = self.o
        labels = _read(
            ctx.require_file(o.labels_table, "labels table"),
            ["study_id"],
            ctx.source,
            o.labels_table,
        )
        coords = _read(
            ctx.require_file(o.coordinates_table, "label coordinates table"),
            ["study_id", "series_id", "instance_number", "condition", "level", "x", "y"],
            ctx.source,
            o.coordinates_table,
        )
        series = _read(
            ctx.require_file(o.series_table, "series descriptions table"),
            ["study_id", "series_id", "series_description"],
            ctx.source,
            o.series_table,
        )
        ctx.require_dir(o.images_dir, "DICOM image")
        grades = {row["study_id"]: row for row in labels}
        described = {(r["study_id"], r["series_id"]): r["series_description"] for r in series}
        slices: dict[tuple[str, str, str], list[dict[str, str]]] = {}
        for row in coords:
            key = (row["study_id"], row["series_id"], row["instance_number"])
            slices.setdefault(key, []).append(row)
        # numbers in numeric order; a non-numeric id (a damaged row) sorts after, not a crash
        for key in sorted(
            slices, key=lambda k: tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in k)
        ):
            yield self._slice(ctx, key, slices[key], grades, described)

    def _slice(self, ctx, key, rows, grades, described) -> Sample | QuarantineEntry:
        o = self.o
        study, series, instance = key
        rel = f"{Path(o.images_dir).as_posix()}/{study}/{series}/{instance}.dcm"
        try:
            if study not in grades:
                raise LabelProblem(f"study {study} has coordinates but no row in {o.labels_table}")
            width, height, attrs = dicom_size_and_attributes(
                ctx.safe_path(rel), ctx.verify, o.dicom_attributes
            )
            regions, found, severities = [], [], {}
            for row in rows:
                region, severity = self._region(ctx, row, grades[study], width, height)
                regions.append(region)
                severities[f"{row['condition']} {region.level}"] = severity
                if SEVERITIES.index(severity) >= SEVERITIES.index(o.min_severity):
                    found.append(region)
        except (ImageProblem, LabelProblem) as exc:
            return ctx.quarantine(rel, str(exc))
        labels = tuple(dict.fromkeys(r.label for r in found)) or (ctx.canonical(o.healthy_label),)
        description = described.get((study, series), "")
        attributes = {
            "source_label": "|".join(dict.fromkeys(r["condition"] for r in rows)),
            "series_description": description,
            LEVELS_ATTRIBUTE: join_levels(r.level for r in found),
            **{f"severity: {k}": v for k, v in sorted(severities.items())},
            **attrs,
        }
        axis = description.split()[0].lower() if description else "unknown"
        return Sample(
            sample_id=ctx.sample_id(f"{study}/{series}/{instance}"),
            source=ctx.source,
            image=rel,
            slice=SliceRef(axis, int(instance)),
            width=width,
            height=height,
            modality=ctx.modality,
            scene=ctx.scene,
            labels=labels,
            attributes={k: v for k, v in attributes.items() if v != ""},
            regions=tuple(regions),
            group_id=study,
        )

    def _region(self, ctx, row, grade_row, width, height) -> tuple[Region, str]:
        level = normalise_level(row["level"])
        if level is None:
            raise LabelProblem(f"unknown level {row['level']!r} in {self.o.coordinates_table}")
        column = f"{_slug(row['condition'])}_{level.lower().replace('/', '_')}"
        if column not in grade_row:
            raise LabelProblem(f"{self.o.labels_table} has no column {column!r}")
        severity = grade_row[column]
        if severity not in SEVERITIES:
            # the data page: "Some entries have incomplete labels" (empty grade)
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
        return Region(label=label, points=((x, y),), level=level), severity
