"""``corner_point_csv``: images with one header-less CSV each (same stem, same folder), one
row ``x1,y1,x2,y2,flag`` per vertebral endplate in a fixed order (BUU-LSPINE: L1 top, L1
bottom, ... L5 bottom on AP views, plus S1 top on lateral views; ``flag`` 1 marks an endplate
of a slipped segment).

The image label is ``positive_label`` when any flag is 1, else ``negative_label``; a disc level
is a lesion level when the endplates on either side of it carry a flag.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from ..media.image import ImageProblem, check_image
from ..quarantine import QuarantineEntry
from ..records import Region, Sample
from .base import LAYOUTS, LabelProblem, LayoutOptions, ScanContext, sorted_files
from .spine_levels import LEVELS_ATTRIBUTE, join_levels

AP_EDGES = [f"{v}-{end}" for v in ("L1", "L2", "L3", "L4", "L5") for end in ("top", "bottom")]


class CornerPointCsvOptions(LayoutOptions):
    images_dir: str
    image_suffix: str = ".jpg"
    edges: list[str] = AP_EDGES  # row order of the CSV: "<vertebra>-top|bottom"
    positive_label: str = "spondylolisthesis"
    negative_label: str = "normal"
    view: str | None = None  # kept as an attribute (AP / LA)
    group_pattern_strip_digits: int = 1  # "0001-F-037Y0": the last digit is the view


def _disc_levels(flagged: set[str]) -> list[str]:
    """``L4-bottom`` or ``L5-top`` flagged -> ``L4/L5`` (the segment between them)."""
    order = ["L1", "L2", "L3", "L4", "L5", "S1"]
    return [
        f"{a}/{b}"
        for a, b in zip(order, order[1:], strict=False)
        if f"{a}-bottom" in flagged or f"{b}-top" in flagged
    ]


@LAYOUTS.register("corner_point_csv")
class CornerPointCsv:
    name = "corner_point_csv"
    Options = CornerPointCsvOptions

    def __init__(self, options: CornerPointCsvOptions):
        self.o = options

    def scan(self, ctx: ScanContext) -> Iterator[Sample | QuarantineEntry]:
        o = self.o
        folder = ctx.require_dir(o.images_dir, "image")
        for path in sorted_files(folder, (o.image_suffix.lower(),)):
            yield self._image(ctx, path)
        images = {p.stem for p in sorted_files(folder, (o.image_suffix.lower(),))}
        for path in sorted_files(folder, (".csv",)):
            if path.stem not in images:
                reason = f"annotation without an image {path.stem}{o.image_suffix}"
                yield ctx.quarantine(path, reason)

    def _rows(self, ctx, csv_path: Path) -> list[list[str]]:
        if not csv_path.is_file():
            raise LabelProblem(f"annotation {ctx.rel(csv_path)} is missing")
        with csv_path.open(newline="", encoding="utf-8-sig") as fh:
            rows = [[c.strip() for c in r] for r in csv.reader(fh) if any(c.strip() for c in r)]
        if len(rows) != len(self.o.edges):
            raise ImageProblem(
                f"{ctx.rel(csv_path)} has {len(rows)} rows, expected {len(self.o.edges)} "
                f"({', '.join(self.o.edges)})"
            )
        return rows

    def _image(self, ctx, path: Path) -> Sample | QuarantineEntry:
        o = self.o
        rel = ctx.rel(path)
        try:
            rows = self._rows(ctx, path.with_suffix(".csv"))
            width, height = check_image(path, ctx.verify)
            regions, flagged = [], set()
            for line, (edge, row) in enumerate(zip(o.edges, rows, strict=True), start=1):
                if len(row) != 5:
                    raise ImageProblem(f"line {line}: expected x1,y1,x2,y2,flag, got {row}")
                try:
                    x1, y1, x2, y2 = (float(v) for v in row[:4])
                    flag = int(float(row[4]))
                except ValueError:
                    raise ImageProblem(f"line {line}: non-numeric value in {row}") from None
                for x, y in ((x1, y1), (x2, y2)):
                    if not (0 <= x < width and 0 <= y < height):
                        raise ImageProblem(
                            f"line {line}: corner ({x:g}, {y:g}) lies outside "
                            f"the {width}x{height} image"
                        )
                if flag:
                    flagged.add(edge)
                regions.append(Region(label=edge, points=((x1, y1), (x2, y2)), level="point"))
            raw = o.positive_label if flagged else o.negative_label
            label = ctx.canonical(raw)
        except (ImageProblem, LabelProblem) as exc:
            return ctx.quarantine(rel, str(exc))
        key = Path(rel).with_suffix("").as_posix()
        stem = path.stem
        group = stem[: -o.group_pattern_strip_digits] if o.group_pattern_strip_digits else stem
        attrs = {"source_label": raw, LEVELS_ATTRIBUTE: join_levels(_disc_levels(flagged))}
        if o.view:
            attrs["view"] = o.view
        return Sample(
            sample_id=ctx.sample_id(key),
            source=ctx.source,
            image=rel,
            width=width,
            height=height,
            modality=ctx.modality,
            scene=ctx.scene,
            labels=(label,),
            attributes={k: v for k, v in attrs.items() if v},
            regions=tuple(regions),
            group_id=group.split("-")[0] if "-" in group else group,
        )
