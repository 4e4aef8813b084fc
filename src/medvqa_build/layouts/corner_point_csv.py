"""``corner_point_csv``: images with one header-less CSV each (same stem, same folder), one
row ``x1,y1,x2,y2,flag`` per vertebral endplate in a fixed order (BUU-LSPINE: L1 top, L1
bottom, ... L5 bottom on AP views, plus S1 top on lateral views; ``flag`` 1 marks an endplate
of a slipped segment).

The image label is ``positive_label`` when any flag is non-zero, else ``negative_label``; a disc
level is a lesion level when the endplates on either side of it carry a flag. Flags are read as
"non-zero = slipped" because the owners' paper grades four kinds of slip (antero-, retro-, left
and right laterolisthesis) and public readers disagree on whether the column holds 0/1 or a
class code; either way a non-zero flag marks a slip.

A cell holding a missing marker (empty, ``nan``) leaves that value out, not the image: empty
corner cells drop that endplate's points, an empty flag leaves that endplate's slip status
unknown (counted), and an image with no flag set and an unknown one gets no label, since the
unknown one might be the slip.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from ..errors import ImageProblem
from ..media.image import check_image
from ..records import QuarantineEntry, Region, Sample
from ..store.paths import sorted_files
from ..store.table_text import check_text_table
from ..vocab import LEVELS_ATTRIBUTE, join_levels
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
from .discovery import Alternatives, Expect

AP_EDGES = [f"{v}-{end}" for v in ("L1", "L2", "L3", "L4", "L5") for end in ("top", "bottom")]


class CornerPointCsvOptions(LayoutOptions):
    images_dir: str
    image_suffix: str = ".jpg"
    edges: list[str] = AP_EDGES  # row order of the CSV: "<vertebra>-top|bottom"
    positive_label: str = "spondylolisthesis"
    negative_label: str = "normal"
    view: str | None = None  # kept as an attribute (AP / LA)
    group_pattern_strip_digits: int = 1  # "0001-F-037Y0": the last digit is the view
    # cells meaning "no value": that corner or flag is left out, not the image
    missing_values: list[str] = list(MISSING_MARKERS)


def _disc_levels(flagged: set[str]) -> list[str]:
    """``L4-bottom`` or ``L5-top`` flagged -> ``L4/L5`` (the segment between them)."""
    order = ["L1", "L2", "L3", "L4", "L5", "S1"]
    return [
        f"{a}/{b}"
        for a, b in zip(order, order[1:], strict=False)
        if f"{a}-bottom" in flagged or f"{b}-top" in flagged
    ]


@LAYOUTS.register("corner_point_csv")
class CornerPointCsv(FileLayout):
    name = "corner_point_csv"
    Options = CornerPointCsvOptions

    def __init__(self, options: CornerPointCsvOptions):
        super().__init__(options)
        self._missing = frozenset(options.missing_values)

    def expects(self) -> Alternatives:
        return [[Expect(self.options.images_dir, "dir")]]

    def provides(self) -> set[str]:
        return {"labels", "points", "attribute:lesion_levels", "attribute:source_label"} | (
            {"attribute:view"} if self.options.view else set()
        )

    def candidates(self, ctx: ScanContext) -> Iterator[FileCandidate | QuarantineEntry]:
        """Every image, then every CSV without an image (quarantined: found = converted +
        quarantined counts the annotations too)."""
        o = self.options
        folder = ctx.require_dir(o.images_dir, "image")
        images = set()
        for path in sorted_files(folder, (o.image_suffix.lower(),)):
            images.add(path.stem)
            yield FileCandidate(ctx.rel(path), path)
        for path in sorted_files(folder, (".csv",)):
            if path.stem not in images:
                reason = f"annotation without an image {path.stem}{o.image_suffix}"
                yield ctx.quarantine(path, reason)

    def read(self, ctx: ScanContext, candidate: FileCandidate) -> Sample:
        """The image's endplates as point regions and its slip label; the cells its CSV leaves
        empty are counted only once the image is known to be kept."""
        o = self.options
        path: Path = candidate.info
        left_out: list[str] = []  # corners and flags the CSV leaves empty, counted if kept
        rows = self._rows(ctx, path.with_suffix(".csv"))
        width, height = check_image(path, ctx.verify, ctx.max_pixels)
        regions, flagged = [], set()
        for line, (edge, row) in enumerate(zip(o.edges, rows, strict=True), start=1):
            region, flag = self._edge(line, edge, row, width, height, left_out)
            if region is not None:
                regions.append(region)
            if flag:
                flagged.add(edge)
        unknown = any(name.endswith(" flag") for name in left_out)
        raw = o.positive_label if flagged else None if unknown else o.negative_label
        label = ctx.canonical(raw) if raw is not None else None
        for name in left_out:
            ctx.label_missing(name)
        stem = path.stem
        group = stem[: -o.group_pattern_strip_digits] if o.group_pattern_strip_digits else stem
        attrs = {"source_label": raw or "", LEVELS_ATTRIBUTE: join_levels(_disc_levels(flagged))}
        if o.view:
            attrs["view"] = o.view
        return ctx.sample(
            candidate.rel,
            width,
            height,
            group_id=group.split("-")[0] if "-" in group else group,
            labels=(label,) if label is not None else (),
            attributes={k: v for k, v in attrs.items() if v},
            regions=tuple(regions),
        )

    def _rows(self, ctx, csv_path: Path) -> list[list[str]]:
        """The CSV's non-empty rows, one per endplate of ``edges``."""
        o = self.options
        if not csv_path.is_file():
            raise LabelProblem(f"annotation {ctx.rel(csv_path)} is missing")
        check_text_table(csv_path, "annotation")
        with csv_path.open(newline="", encoding="utf-8-sig") as fh:
            rows = [[c.strip() for c in r] for r in csv.reader(fh) if any(c.strip() for c in r)]
        if len(rows) != len(o.edges):
            raise ImageProblem(
                f"{ctx.rel(csv_path)} has {len(rows)} rows, expected {len(o.edges)} "
                f"({', '.join(o.edges)})"
            )
        return rows

    def _edge(
        self, line: int, edge: str, row: list[str], width: int, height: int, left_out: list[str]
    ) -> tuple[Region | None, bool]:
        """One CSV row: the endplate's two corners (None when left empty) and whether its flag
        marks a slip (an empty flag is unknown: recorded in ``left_out``, returned False)."""
        if len(row) > 5:
            raise ImageProblem(f"line {line}: expected x1,y1,x2,y2,flag, got {row}")
        cells = row + [""] * (5 - len(row))  # a writer may drop trailing empty cells
        empty = [is_missing(c, self._missing) for c in cells]
        flag = False
        if empty[4]:
            left_out.append(f"{edge} flag")
        else:
            try:
                flag = float(cells[4]) != 0
            except ValueError:
                raise ImageProblem(f"line {line}: non-numeric flag in {row}") from None
        if any(empty[:4]):
            left_out.append(f"{edge} corners")
            return None, flag
        try:
            x1, y1, x2, y2 = (float(v) for v in cells[:4])
        except ValueError:
            raise ImageProblem(f"line {line}: non-numeric value in {row}") from None
        for x, y in ((x1, y1), (x2, y2)):
            if not (0 <= x < width and 0 <= y < height):
                raise ImageProblem(
                    f"line {line}: corner ({x:g}, {y:g}) lies outside the {width}x{height} image"
                )
        return Region(label=edge, points=((x1, y1), (x2, y2)), level="point"), flag
