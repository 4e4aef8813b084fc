"""``dicom_box_table``: one DICOM file per image id in a folder, and a CSV with one row per
box (or one box-less row for an image-level label such as "No finding"), possibly from several
readers (VinDr-SpineXR ``annotations/{train,test}.csv`` beside ``{train,test}_images/``).
Columns are found by name, not position (VinDr-SpineXR's order is ``study_id, series_id,
image_id, rad_id, lesion_type, xmin, ymin, xmax, ymax``).

Every DICOM file in the folder and every image id of the table without a file is a candidate,
so ``found = converted + quarantined``; an image's labels are its rows' labels, its regions
their boxes (x2/y2 exclusive pixel edges, as the table gives them).

Missing values drop one value, not the image: a row whose label cell is empty loses its label
and box; a box whose four cells are all empty is an image-level row ("No finding"); a box with
some cells empty, or of zero width or height (the owners' loader drops such "empty" boxes,
vinbigdata-medical/vindr-spinexr ``spine/dataset_dict.py``), is left out and counted. A box
outside the image or with x2 < x1 contradicts the image and is quarantined.
"""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import field_validator

from ..errors import ImageProblem
from ..geometry import box_problem
from ..media.dicom import DICOM_EXTENSIONS
from ..records import QuarantineEntry, Region, Sample
from ..store.paths import sorted_files
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
from .dicom_common import check_keywords, dicom_size_and_attributes
from .discovery import Alternatives, expect_paths
from .metadata_table import read_rows


class DicomBoxTableOptions(LayoutOptions):
    table: str
    images_dir: str
    image_column: str = "image_id"
    image_suffix: str = ".dicom"
    label_column: str
    box_columns: list[str] = ["xmin", "ymin", "xmax", "ymax"]  # x1, y1, x2, y2
    group_column: str | None = None
    attribute_columns: list[str] = []
    split: str | None = None
    dicom_attributes: list[str] = []
    # cells meaning "no value": an empty label or box cell drops that value, not the image
    missing_values: list[str] = list(MISSING_MARKERS)
    # a box narrower or shorter than this (pixels) is "empty" and left out, as the owners'
    # loader does (1e-3 there)
    min_box_side_px: float = 1e-3

    _keywords = field_validator("dicom_attributes")(classmethod(lambda cls, v: check_keywords(v)))

    @field_validator("box_columns")
    @classmethod
    def _four(cls, value: list[str]) -> list[str]:
        if len(value) != 4:
            raise ValueError("box_columns names x1, y1, x2, y2")
        return value


Rows = list[dict[str, str]]  # the table's rows of one image id


@LAYOUTS.register("dicom_box_table")
class DicomBoxTable(FileLayout):
    name = "dicom_box_table"
    Options = DicomBoxTableOptions

    def __init__(self, options: DicomBoxTableOptions):
        super().__init__(options)
        self._missing = frozenset(options.missing_values)

    def expects(self) -> Alternatives:
        o = self.options
        return [expect_paths(o.table, kind="file") + expect_paths(o.images_dir, kind="dir")]

    def provides(self) -> set[str]:
        return {"labels", "regions", "attribute:source_label"} | attribute_caps(
            self.options.attribute_columns
        )

    def candidates(self, ctx: ScanContext) -> Iterator[FileCandidate | QuarantineEntry]:
        """Every DICOM file with its rows (the table read once), then every image id the
        table lists without a file (quarantined under the path it would have)."""
        o = self.options
        wanted = [o.image_column, o.label_column, *o.box_columns, *o.attribute_columns]
        wanted += [o.group_column] if o.group_column else []
        table = ctx.require_file(o.table, "annotation table")
        rows = read_rows(table, ",", wanted, ctx.source)
        ctx.note_table(table, rows[0].keys() if rows else wanted)
        folder = ctx.require_dir(o.images_dir, "DICOM image")
        by_image: dict[str, Rows] = {}
        for row in rows:
            by_image.setdefault(row[o.image_column], []).append(row)
        seen: set[str] = set()
        suffixes = tuple({o.image_suffix.lower(), *DICOM_EXTENSIONS})
        for path in sorted_files(folder, suffixes):
            image_id = path.name[: -len(path.suffix)]
            seen.add(image_id)
            yield FileCandidate(ctx.rel(path), (image_id, by_image.get(image_id, [])))
        for image_id in sorted(set(by_image) - seen):
            rel = f"{o.images_dir}/{image_id}{o.image_suffix}"
            why = ctx.why_absent(rel, o.images_dir)
            yield ctx.quarantine(rel, f"listed in {o.table} but {why}")

    def read(self, ctx: ScanContext, candidate: FileCandidate) -> Sample:
        """The image's labels and boxes from its rows; the labels and boxes they leave empty
        are counted only once the image is known to be kept."""
        o = self.options
        image_id, rows = candidate.info
        left_out: list[str] = []  # labels and boxes the table leaves empty, counted if kept
        if not rows:
            raise LabelProblem(f"image not listed in {o.table}")
        width, height, attrs = dicom_size_and_attributes(
            ctx.root / candidate.rel, ctx.verify, o.dicom_attributes, ctx.max_pixels
        )
        labelled = []
        for row in rows:
            if is_missing(row[o.label_column], self._missing):
                left_out.append(o.label_column)
            else:
                labelled.append(row)
        labels = tuple(dict.fromkeys(ctx.canonical(r[o.label_column]) for r in labelled))
        regions = tuple(
            reg for r in labelled if (reg := self._box(ctx, r, width, height, left_out)) is not None
        )
        for name in left_out:
            ctx.label_missing(name)
        first = rows[0]
        group = first[o.group_column] if o.group_column else ""
        attributes = {
            "source_label": "|".join(dict.fromkeys(r[o.label_column] for r in labelled)),
            **{c: first[c] for c in o.attribute_columns},
            **attrs,
        }
        return ctx.sample(
            candidate.rel,
            width,
            height,
            key=image_id,
            group_id=image_id if is_missing(group, self._missing) else group,
            labels=labels,
            attributes={k: v for k, v in attributes.items() if not is_missing(v, self._missing)},
            regions=regions,
            split=o.split,
        )

    def _box(self, ctx, row, width, height, left_out: list[str]) -> Region | None:
        """The row's box; None for an image-level row (no box cells) or a box left out."""
        o = self.options
        values = [row[c] for c in o.box_columns]
        empty = [is_missing(v, self._missing) for v in values]
        if all(empty):
            return None
        if any(empty):  # part of the box not given: the box is left out, the label kept
            left_out.append("box")
            return None
        try:
            box = tuple(float(v) for v in values)
        except ValueError:
            raise ImageProblem(f"non-numeric box {values} in {o.table}") from None
        x1, y1, x2, y2 = box
        if abs(x2 - x1) < o.min_box_side_px or abs(y2 - y1) < o.min_box_side_px:
            left_out.append("box (zero width or height)")
            return None
        problem = box_problem(box, width, height)
        if problem:
            raise ImageProblem(problem)
        return Region(label=ctx.canonical(row[o.label_column]), bbox=box, level="box")
