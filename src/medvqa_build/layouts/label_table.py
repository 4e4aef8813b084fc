"""``label_table``: a CSV/TSV listing images with a label column (+ group, split, attributes),
optionally with a mask folder beside the images."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ImageProblem, SourceError
from ..media.image import check_image
from ..records import QuarantineEntry, Sample
from ..store.packed import PackedStrings, SortedStrings
from ..store.paths import walk_files
from ..store.table_text import check_text_table
from .base import (
    LAYOUTS,
    MISSING_MARKERS,
    FileCandidate,
    FileLayout,
    LayoutOptions,
    ScanContext,
    attribute_caps,
    is_missing,
)
from .discovery import Alternatives, expect_paths
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
    # cells meaning "no value": an empty label or attribute drops that value, not the image
    missing_values: list[str] = list(MISSING_MARKERS)


@LAYOUTS.register("label_table")
class LabelTable(FileLayout):
    name = "label_table"
    Options = LabelTableOptions

    def __init__(self, options: LabelTableOptions):
        super().__init__(options)
        self._missing = frozenset(options.missing_values)

    def _read_table(self, ctx: ScanContext) -> Iterator[dict]:
        """The table's rows as dicts, read :data:`CHUNK_ROWS` at a time (a label table of 10^6
        rows held whole as a DataFrame and a list of row dicts costs ~1 GiB); the columns are
        checked on the header first."""
        o = self.options
        path = ctx.require_file(o.table, "label table")
        read = {"sep": o.sep, "dtype": str, "keep_default_na": False}
        check_text_table(path, "label table", o.sep)
        columns = list(pd.read_csv(path, nrows=0, **read).columns)
        ctx.note_table(path, columns)
        wanted = [o.image_column, o.label_column, *o.attribute_columns]
        wanted += [c for c in (o.group_column, o.split_column) if c]
        missing = [c for c in wanted if c not in columns]
        if missing:
            raise SourceError(
                f"{ctx.source}: label table lacks column(s) {missing}; it has {columns}",
                where=str(path),
                fix=f"check the separator (manifest says {o.sep!r}) and the column names",
            )
        with pd.read_csv(path, chunksize=CHUNK_ROWS, **read) as chunks:
            for chunk in chunks:
                # the rows of ``chunk.to_dict("records")`` (the same str cells, NaN where one
                # is null), built from each column's list: a sixth of its cost, which every
                # convert shard pays for every row of the table
                names = list(chunk.columns)
                cells = [chunk.iloc[:, i].tolist() for i in range(len(names))]
                for values in zip(*cells, strict=True):
                    yield dict(zip(names, values, strict=True))

    def expects(self) -> Alternatives:
        o = self.options
        return [expect_paths(o.table, kind="file") + expect_paths(o.image_dir, kind="dir")]

    def provides(self) -> set[str]:
        out = {"labels"} | attribute_caps(self.options.attribute_columns)
        return out | ({"regions", "masks"} if self.options.masks else set())

    def candidates(self, ctx: ScanContext) -> Iterator[FileCandidate | QuarantineEntry]:
        """Every table row, in table order (the row is the candidate's info), then each image
        under ``image_dir`` that no row lists (quarantined, when ``report_unlisted``)."""
        o = self.options
        rows = self._read_table(ctx)
        first = next(rows, None)  # the columns are checked before anything is yielded
        image_root = ctx.require_dir(o.image_dir or ".", "image")
        listed = PackedStrings()  # every listed path, searched once the table is read
        join = path_joiner(o.image_dir)
        for row in itertools.chain([first] if first is not None else [], rows):
            rel = join(f"{row[o.image_column]}{o.image_suffix}")
            if o.report_unlisted:
                listed.append(rel)
            yield FileCandidate(rel, row)
        if o.report_unlisted:
            known = SortedStrings(listed)
            del listed
            yield from _unlisted(ctx, image_root, known, f"image not listed in {o.table}")

    def read(self, ctx: ScanContext, candidate: FileCandidate) -> Sample:
        o = self.options
        rel, row = candidate.rel, candidate.info
        missing = {c: is_missing(row[c], self._missing) for c in row}
        width, height = check_image(ctx.safe_path(rel), ctx.verify, ctx.max_pixels)
        label = None if missing[o.label_column] else ctx.canonical(row[o.label_column])
        regions = self._regions(ctx, rel, label, width, height)
        for column in (o.label_column, *o.attribute_columns):
            if missing[column]:
                ctx.label_missing(column)
        return ctx.sample(
            rel,
            width,
            height,
            labels=(label,) if label is not None else (),
            attributes=self._attributes(row, label is not None, missing),
            regions=regions,
            group_id=str(row[o.group_column])
            if o.group_column and not missing[o.group_column]
            else None,
            split=str(row[o.split_column])
            if o.split_column and not missing[o.split_column]
            else None,
        )

    def _regions(
        self, ctx: ScanContext, rel: str, label: str | None, width: int, height: int
    ) -> tuple:
        """The regions of the image's mask, when the table comes with a mask folder: labelled
        with the row's label (an unlabelled row has none) or the masks' own label."""
        masks = self.options.masks
        if masks is None or (label is None and masks.region_label == "sample"):
            return ()
        mask_file = mask_path_for(ctx.root, masks, Path(rel).stem)
        if mask_file.is_file():
            region_label = label if masks.region_label == "sample" else masks.region_label
            return regions_from_mask(mask_file, region_label, width, height, masks.min_area_px)
        if masks.required:
            raise ImageProblem(f"mask {ctx.rel(mask_file)} is missing")
        return ()

    def _attributes(self, row: dict, labelled: bool, missing: dict[str, bool]) -> dict[str, str]:
        """The raw label and the attribute columns, each left out when its cell is empty."""
        o = self.options
        out = {"source_label": str(row[o.label_column])} if labelled else {}
        out.update({c: str(row[c]) for c in o.attribute_columns if not missing[c]})
        return out


def path_joiner(folder: str) -> Callable[[str], str]:
    """``name -> (Path(folder) / name).as_posix()``, for one folder and every row of a table:
    the folder's part is made once and a plain file name (no ``/``, not ``""`` or ``"."``) is
    appended as text, 15 times cheaper than pathlib (each convert shard lists every row, so
    this is paid once per row and core); any other name goes through pathlib as before."""
    base = Path(folder)
    prefix = (base / "a").as_posix()[:-1]  # pathlib's own folder part ("" for "." or "")
    plain = os.name == "posix"  # elsewhere "\\" and drive letters are pathlib's to read

    def join(name: str) -> str:
        if plain and name not in ("", ".") and "/" not in name:
            return prefix + name
        return (base / name).as_posix()

    return join


def _unlisted(
    ctx: ScanContext, image_root: Path, known: SortedStrings, reason: str
) -> Iterator[QuarantineEntry]:
    """A quarantine entry for each image under ``image_root`` whose path below the root is not
    in ``known``: a file the table does not describe is found but not converted. The paths are
    looked up :data:`LOOKUP_BATCH` at a time, in one binary search each batch (every convert
    shard walks the whole folder)."""
    folder = None
    batch: list[str] = []
    for dirpath, name in walk_files(image_root):
        if dirpath != folder:  # per folder, not per file: its path below the root
            folder = dirpath
            prefix = Path(dirpath).relative_to(ctx.root).as_posix() + "/"
            prefix = "" if prefix == "./" else prefix
        batch.append(prefix + name)
        if len(batch) >= LOOKUP_BATCH:
            yield from (ctx.quarantine(rel, reason) for rel in _not_in(known, batch))
            batch = []
    yield from (ctx.quarantine(rel, reason) for rel in _not_in(known, batch))


LOOKUP_BATCH = 4096


def _not_in(known: SortedStrings, texts: list[str]) -> Iterator[str]:
    """The strings of ``texts`` that ``known`` lacks (``known.index(t) is None``), in order."""
    if not texts:
        return
    try:
        keys = np.array([t.encode() for t in texts], dtype=bytes)
    except UnicodeEncodeError:  # a name that is not UTF-8: one at a time, as index() does
        yield from (t for t in texts if known.index(t) is None)
        return
    found = np.zeros(len(texts), bool)
    if len(known.keys):
        pos = np.searchsorted(known.keys, keys)
        inside = pos < len(known.keys)
        found[inside] = known.keys[pos[inside]] == keys[inside]
    yield from (texts[i] for i in np.flatnonzero(~found).tolist())
