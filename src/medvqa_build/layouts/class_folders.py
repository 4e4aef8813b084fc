"""``class_folders``: ``<images_dir>/.../<class>/<image>`` — the class is the image's folder
(Kvasir, HyperKvasir labeled-images, GastroVision, KID). Parent folders above the class can be
kept as attributes (HyperKvasir: ``{upper,lower}-gi-tract/<category>/<class>``).

An optional ``split_table`` joins a separate file-name -> split CSV (HyperKvasir's official
``2_fold_split.csv``, ``file-name;class-name;split-index``) onto the samples by file name."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from ..errors import SourceError
from ..media.image import ImageProblem, check_image
from ..quarantine import QuarantineEntry
from ..records import Sample
from .base import (
    IMAGE_EXTENSIONS,
    LAYOUTS,
    LabelProblem,
    LayoutOptions,
    ScanContext,
    walk_files,
    without_suffix,
)

log = logging.getLogger(__name__)


class SplitTableOptions(LayoutOptions):
    """A CSV naming each image's split, joined on the image's file name (not its path)."""

    file: str  # relative to ROOT
    sep: str = ","
    file_column: str
    split_column: str
    # when set, the row's class must equal the image's class folder (else the image is
    # quarantined): a split row for the same file name under another class is a mix-up
    class_column: str | None = None
    split_prefix: str = ""  # Sample.split = prefix + raw value, e.g. "split_" + "0"
    required: bool = False  # False: a missing file leaves split None, with no error


class ClassFoldersOptions(LayoutOptions):
    images_dir: str = "."
    parent_attributes: list[str] = []  # names for the folders above the class, outermost first
    extensions: list[str] = list(IMAGE_EXTENSIONS)
    split_table: SplitTableOptions | None = None


SplitRows = dict[str, tuple[str | None, str | None]]  # file name -> (split, class)


def read_split_table(ctx: ScanContext, o: SplitTableOptions) -> SplitRows | None:
    """The split of each listed file name; None when the optional file is absent."""
    if not (ctx.root / o.file).is_file() and not o.required:
        return None
    path = ctx.require_file(o.file, "split table")
    table = pd.read_csv(path, sep=o.sep, dtype=str, keep_default_na=False)
    wanted = [c for c in (o.file_column, o.split_column, o.class_column) if c]
    missing = [c for c in wanted if c not in table.columns]
    if missing:
        raise SourceError(
            f"{ctx.source}: split table lacks column(s) {missing}; it has {list(table.columns)}",
            where=str(path),
            fix=f"check the separator (manifest says {o.sep!r}) and the column names",
        )
    rows: SplitRows = {}
    for row in table.to_dict("records"):
        name = Path(str(row[o.file_column]).strip()).name
        raw = str(row[o.split_column]).strip()
        value = (
            f"{o.split_prefix}{raw}" if raw else None,
            str(row[o.class_column]).strip() if o.class_column else None,
        )
        if rows.setdefault(name, value) != value:
            raise SourceError(
                f"{ctx.source}: split table lists {name!r} twice with different values",
                where=str(path),
                fix="use the owners' split file unchanged",
            )
    return rows


@LAYOUTS.register("class_folders")
class ClassFolders:
    name = "class_folders"
    shardable = True
    Options = ClassFoldersOptions

    def __init__(self, options: ClassFoldersOptions):
        self.o = options

    def scan(self, ctx: ScanContext) -> Iterator[Sample | QuarantineEntry]:
        base = ctx.require_dir(self.o.images_dir, "class")
        depth = len(self.o.parent_attributes) + 1
        splits = read_split_table(ctx, self.o.split_table) if self.o.split_table else None
        seen: set[str] = set()
        folder = None
        for dirpath, name in walk_files(base, tuple(e.lower() for e in self.o.extensions)):
            if dirpath != folder:  # per folder, not per file: its path below root and base
                folder = dirpath
                prefix = Path(dirpath).relative_to(ctx.root).as_posix() + "/"
                prefix = "" if prefix == "./" else prefix
                folders = Path(dirpath).relative_to(base).parts
            seen.add(name)
            yield ctx.defer(self._sample, ctx, dirpath, prefix, folders, name, depth, splits)
        if splits:
            _log_unmatched(ctx, self.o.split_table, sorted(set(splits) - seen))

    def _sample(
        self, ctx: ScanContext, dirpath: str, prefix: str, folders, name: str, depth: int, splits
    ) -> Sample | QuarantineEntry:
        rel = prefix + name
        if len(folders) != depth:
            return ctx.quarantine(
                rel,
                f"expected {depth} folder level(s) below {self.o.images_dir!r}, "
                f"found {len(folders)}",
            )
        try:
            width, height = check_image(os.path.join(dirpath, name), ctx.verify)
            label = ctx.canonical(folders[-1])
            split = self._split(splits, name, folders[-1])
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
                "source_label": folders[-1],
                **dict(zip(self.o.parent_attributes, folders[:-1], strict=True)),
            },
            group_id=key,
            split=split,
        )

    def _split(self, splits: SplitRows | None, name: str, folder: str) -> str | None:
        """The image's split from the split table; an unlisted image keeps None."""
        if splits is None or name not in splits:
            return None
        split, cls = splits[name]
        if cls is not None and cls != folder:
            raise LabelProblem(
                f"{self.o.split_table.file} lists {name} under class {cls!r}, "
                f"not its folder {folder!r}"
            )
        return split


def _log_unmatched(ctx: ScanContext, o: SplitTableOptions, names: list[str]) -> None:
    """Rows naming no image under ROOT are not candidates (a partial download is legitimate):
    they are ignored, and counted in the log so a wrong ROOT or table is still visible."""
    if names:
        log.warning(
            "%s: %d row(s) of %s name no image under ROOT (ignored), e.g. %s",
            ctx.source,
            len(names),
            o.file,
            ", ".join(names[:3]),
        )
