"""``dicom_box_table``: one DICOM file per image id in a folder, and a CSV with one row per
box (or one box-less row for an image-level label such as "No finding"), possibly from several
readers (VinDr-SpineXR ``annotations/{train,test}.csv`` beside ``{train,test}_images/``).
Columns are found by name, not position (VinDr-SpineXR's order is ``study_id, series_id,
image_id, rad_id, lesion_type, xmin, ymin, xmax, ymax``).

Every DICOM file in the folder and every image id of the table without a file is a candidate,
so ``found = converted + quarantined``; an image's labels are its rows' labels, its regions
their boxes (x2/y2 exclusive pixel edges, as the table gives them).
"""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import field_validator

from ..geometry import box_problem
from ..media.dicom import DICOM_EXTENSIONS
from ..media.image import ImageProblem
from ..quarantine import QuarantineEntry
from ..records import Region, Sample
from .base import LAYOUTS, LabelProblem, LayoutOptions, ScanContext, sorted_files
from .dicom_common import check_keywords, dicom_size_and_attributes
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

    _keywords = field_validator("dicom_attributes")(classmethod(lambda cls, v: check_keywords(v)))

    @field_validator("box_columns")
    @classmethod
    def _four(cls, value: list[str]) -> list[str]:
        if len(value) != 4:
            raise ValueError("box_columns names x1, y1, x2, y2")
        return value


@LAYOUTS.register("dicom_box_table")
class DicomBoxTable:
    name = "dicom_box_table"
    Options = DicomBoxTableOptions

    def __init__(self, options: DicomBoxTableOptions):
        self.o = options

    def scan(self, ctx: ScanContext) -> Iterator[Sample | QuarantineEntry]:
        o = self.o
        wanted = [o.image_column, o.label_column, *o.box_columns, *o.attribute_columns]
        wanted += [o.group_column] if o.group_column else []
        rows = read_rows(ctx.require_file(o.table, "annotation table"), ",", wanted, ctx.source)
        folder = ctx.require_dir(o.images_dir, "DICOM image")
        by_image: dict[str, list[dict[str, str]]] = {}
        for row in rows:
            by_image.setdefault(row[o.image_column], []).append(row)
        seen: set[str] = set()
        suffixes = tuple({o.image_suffix.lower(), *DICOM_EXTENSIONS})
        for path in sorted_files(folder, suffixes):
            image_id = path.name[: -len(path.suffix)]
            seen.add(image_id)
            yield self._image(ctx, ctx.rel(path), image_id, by_image.get(image_id, []))
        for image_id in sorted(set(by_image) - seen):
            yield ctx.quarantine(
                f"{o.images_dir}/{image_id}{o.image_suffix}",
                f"listed in {o.table} but no such file under {o.images_dir!r}",
            )

    def _image(self, ctx, rel: str, image_id: str, rows) -> Sample | QuarantineEntry:
        o = self.o
        try:
            if not rows:
                raise LabelProblem(f"image not listed in {o.table}")
            width, height, attrs = dicom_size_and_attributes(
                ctx.root / rel, ctx.verify, o.dicom_attributes
            )
            labels = tuple(dict.fromkeys(ctx.canonical(r[o.label_column]) for r in rows))
            regions = tuple(
                reg for r in rows if (reg := self._box(ctx, r, width, height)) is not None
            )
        except (ImageProblem, LabelProblem) as exc:
            return ctx.quarantine(rel, str(exc))
        first = rows[0]
        return Sample(
            sample_id=ctx.sample_id(image_id),
            source=ctx.source,
            image=rel,
            width=width,
            height=height,
            modality=ctx.modality,
            scene=ctx.scene,
            labels=labels,
            attributes={
                "source_label": "|".join(dict.fromkeys(r[o.label_column] for r in rows)),
                **{c: first[c] for c in o.attribute_columns},
                **attrs,
            },
            regions=regions,
            group_id=first[o.group_column] if o.group_column else image_id,
            split=o.split,
        )

    def _box(self, ctx, row, width, height) -> Region | None:
        values = [row[c] for c in self.o.box_columns]
        if not any(values):
            return None
        if not all(values):
            raise ImageProblem(f"incomplete box {values} in {self.o.table}")
        try:
            box = tuple(float(v) for v in values)
        except ValueError:
            raise ImageProblem(f"non-numeric box {values} in {self.o.table}") from None
        problem = box_problem(box, width, height)
        if problem:
            raise ImageProblem(problem)
        return Region(label=ctx.canonical(row[self.o.label_column]), bbox=box, level="box")
