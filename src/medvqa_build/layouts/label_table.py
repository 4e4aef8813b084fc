"""``label_table``: a CSV/TSV listing images with a label column (+ group, split, attributes),
optionally with a mask folder beside the images."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from ..errors import SourceError
from ..media.image import ImageProblem, check_image
from ..packed import PackedStrings, SortedStrings
from ..quarantine import QuarantineEntry
from ..records import Sample
from .base import LAYOUTS, LabelProblem, LayoutOptions, ScanContext, walk_files, without_suffix
from .masks import MaskOptions, mask_path_for, regions_from_mask

CHUNK_ROWS = 8192  # label-table rows parsed at a time


class LabelTableOptions(LayoutOptions):
    table: str
    sep: str = ","
    image_column: str
    label_column: str
    image_dir: str = ""
    image_suffix: str = ""
    group_column: str | None = None
    split_column: str | None = None
    attribute_columns: list[str] = []
    masks: MaskOptions | None = None
    report_unlisted: bool = True


@LAYOUTS.register("label_table")
class LabelTable:
    name = "label_table"
    shardable = True
    Options = LabelTableOptions

    def __init__(self, options: LabelTableOptions):
        self.o = options

    def _read_table(self, ctx: ScanContext) -> Iterator[dict]:
        """The table's rows as dicts, read :data:`CHUNK_ROWS` at a time (a label table of 10^6
        rows held whole as a DataFrame and a list of row dicts costs ~1 GiB); the columns are
        checked on the header first."""
        path = ctx.require_file(self.o.table, "label table")
        read = {"sep": self.o.sep, "dtype": str, "keep_default_na": False}
        columns = list(pd.read_csv(path, nrows=0, **read).columns)
        wanted = [self.o.image_column, self.o.label_column, *self.o.attribute_columns]
        wanted += [c for c in (self.o.group_column, self.o.split_column) if c]
        missing = [c for c in wanted if c not in columns]
        if missing:
            raise SourceError(
                f"{ctx.source}: label table lacks column(s) {missing}; it has {columns}",
                where=str(path),
                fix=f"check the separator (manifest says {self.o.sep!r}) and the column names",
            )
        with pd.read_csv(path, chunksize=CHUNK_ROWS, **read) as chunks:
            for chunk in chunks:
                yield from chunk.to_dict("records")

    def scan(self, ctx: ScanContext) -> Iterator[Sample | QuarantineEntry]:
        o = self.o
        rows = self._read_table(ctx)
        first = next(rows, None)  # the columns are checked before anything is yielded
        image_root = ctx.require_dir(o.image_dir or ".", "image")
        listed = PackedStrings()  # every listed path, searched once the table is read
        for row in itertools.chain([first] if first is not None else [], rows):
            rel = (Path(o.image_dir) / f"{row[o.image_column]}{o.image_suffix}").as_posix()
            if o.report_unlisted:
                listed.append(rel)
            yield ctx.defer(self._sample, ctx, rel, row)
        if o.report_unlisted:
            known = SortedStrings(listed)
            del listed
            folder = None
            for dirpath, name in walk_files(image_root):
                if dirpath != folder:
                    folder = dirpath
                    prefix = Path(dirpath).relative_to(ctx.root).as_posix() + "/"
                    prefix = "" if prefix == "./" else prefix
                rel = prefix + name
                if known.index(rel) is None:
                    yield ctx.defer(ctx.quarantine, rel, f"image not listed in {o.table}")

    def _sample(self, ctx: ScanContext, rel: str, row: dict) -> Sample | QuarantineEntry:
        o = self.o
        try:
            width, height = check_image(ctx.safe_path(rel), ctx.verify)
            label = ctx.canonical(row[o.label_column])
            regions: tuple = ()
            if o.masks is not None:
                mask_file = mask_path_for(ctx.root, o.masks, Path(rel).stem)
                if mask_file.is_file():
                    region_label = (
                        label if o.masks.region_label == "sample" else o.masks.region_label
                    )
                    regions = regions_from_mask(
                        mask_file, region_label, width, height, o.masks.min_area_px
                    )
                elif o.masks.required:
                    raise ImageProblem(f"mask {ctx.rel(mask_file)} is missing")
        except (ImageProblem, LabelProblem) as exc:
            return ctx.quarantine(rel, str(exc))
        key = without_suffix(rel)
        return Sample(
            sample_id=ctx.sample_id(key),
            source=ctx.source,
            image=rel,
            width=width,
            height=height,
            modality=ctx.modality,
            scene=ctx.scene,
            labels=(label,),
            attributes={
                "source_label": str(row[o.label_column]),
                **{c: str(row[c]) for c in o.attribute_columns},
            },
            regions=regions,
            group_id=str(row[o.group_column]) if o.group_column else key,
            split=(str(row[o.split_column]) or None) if o.split_column else None,
        )
