"""``class_folders``: ``<images_dir>/<parents...>/<class>/<children...>/<image>`` — the class is
one folder level of the image's path (Kvasir, HyperKvasir labeled-images, GastroVision, KID).
By default it is the image's own folder; ``parent_attributes`` names the levels above the class
(HyperKvasir: ``{upper,lower}-gi-tract/<category>/<class>``) and ``child_attributes`` the levels
between the class and the image (bowel-preparation frames ``<score>/<video>/<frame>.jpg``:
``child_attributes: [video]``), so the class may sit at any depth. Every named level is kept as
an attribute. ``group_level`` names one of them whose folder is the image's group (frames of
one video, images of one patient): a split keeps a group whole, so those images cannot leak
across splits. Without it each image is its own group.

An optional ``split_table`` joins a separate file-name -> split CSV (HyperKvasir's official
``2_fold_split.csv``, ``file-name;class-name;split-index``) onto the samples by file name. Its
class column is compared with the folder through the manifest's label map (the owners' split
file spells classes as an earlier release did: ``normal-cecum`` for the folder ``cecum``), and
a split or class cell holding a missing-value marker is no value: the image keeps ``split``
null (counted) or is not cross-checked."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pandas as pd
from pydantic import model_validator

from ..errors import SourceError
from ..media.image import check_image
from ..records import QuarantineEntry, Sample
from ..store.paths import IMAGE_EXTENSIONS, walk_files
from ..store.table_text import check_text_table
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
from .discovery import Alternatives, Expect

log = logging.getLogger(__name__)


class SplitTableOptions(LayoutOptions):
    """A CSV naming each image's split, joined on the image's file name (not its path)."""

    # relative to ROOT; a list names the places a user may have put it: the first present is read
    file: str | list[str]
    sep: str = ","
    file_column: str
    split_column: str
    # when set, the row's class must map (through the label map) to the same canonical label
    # as the image's class folder, else the image is quarantined: a split row for the same
    # file name under another class is a mix-up
    class_column: str | None = None
    split_prefix: str = ""  # Sample.split = prefix + raw value, e.g. "split_" + "0"
    required: bool = False  # False: a missing file leaves split None, with no error
    # a split or class cell holding one of these is no value
    missing_values: list[str] = list(MISSING_MARKERS)

    @property
    def files(self) -> list[str]:
        return [self.file] if isinstance(self.file, str) else list(self.file)


class ClassFoldersOptions(LayoutOptions):
    images_dir: str = "."
    parent_attributes: list[str] = []  # names for the folders above the class, outermost first
    # names for the folders between the class and the image, outermost first
    child_attributes: list[str] = []
    # one of the names above: that folder's name is the image's group (a video, a patient);
    # None: each image is its own group
    group_level: str | None = None
    extensions: list[str] = list(IMAGE_EXTENSIONS)
    split_table: SplitTableOptions | None = None

    @model_validator(mode="after")
    def _levels_named_once(self) -> ClassFoldersOptions:
        names = [*self.parent_attributes, *self.child_attributes]
        twice = sorted({n for n in names if names.count(n) > 1} | ({"source_label"} & set(names)))
        if twice:
            raise ValueError(
                f"folder level name(s) {twice} used twice (source_label is the class folder's)"
            )
        if self.group_level is not None and self.group_level not in names:
            raise ValueError(
                f"group_level {self.group_level!r} names no folder level; name one of "
                f"parent_attributes or child_attributes ({names})"
            )
        return self

    @property
    def levels(self) -> int:
        """Folder levels between ``images_dir`` and the image."""
        return len(self.parent_attributes) + 1 + len(self.child_attributes)

    @property
    def missing_values(self) -> list[str] | None:
        """The markers of the one table this layout reads (the split table), if any."""
        return self.split_table.missing_values if self.split_table else None


SplitRows = dict[str, tuple[str | None, str | None]]  # file name -> (split, class)


class SplitTable(NamedTuple):
    file: str  # as found below the root
    rows: SplitRows


def read_split_table(ctx: ScanContext, o: SplitTableOptions) -> SplitTable | None:
    """The split of each listed file name (None: the row leaves it empty); None when the
    optional file is absent."""
    present = [rel for rel in o.files if (ctx.root / rel).is_file()]
    if not present and not o.required:
        return None
    path = ctx.require_file(present[0] if present else o.files[0], "split table")
    check_text_table(path, "split table", o.sep)
    table = pd.read_csv(path, sep=o.sep, dtype=str, keep_default_na=False)
    ctx.note_table(path, table.columns)
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
        cls = str(row[o.class_column]).strip() if o.class_column else None
        value = (
            None if is_missing(raw, o.missing_values) else f"{o.split_prefix}{raw}",
            None if cls is None or is_missing(cls, o.missing_values) else cls,
        )
        if rows.setdefault(name, value) != value:
            raise SourceError(
                f"{ctx.source}: split table lists {name!r} twice with different values",
                where=str(path),
                fix="use the owners' split file unchanged",
            )
    return SplitTable(ctx.rel(path), rows)


@LAYOUTS.register("class_folders")
class ClassFolders(FileLayout):
    name = "class_folders"
    Options = ClassFoldersOptions

    def expects(self) -> Alternatives:
        folder = self.options.images_dir
        return [[Expect(folder, "dir")]] if folder not in ("", ".") else []

    def provides(self) -> set[str]:
        o = self.options
        return {"labels", "attribute:source_label"} | attribute_caps(
            [*o.parent_attributes, *o.child_attributes]
        )

    def candidates(self, ctx: ScanContext) -> Iterator[FileCandidate]:
        """Every image below ``images_dir``, with its folder, folders below ``images_dir`` and
        the split table (read once)."""
        o = self.options
        base = ctx.require_dir(o.images_dir, "class")
        splits = read_split_table(ctx, o.split_table) if o.split_table else None
        seen: set[str] = set()
        folder = None
        for dirpath, name in walk_files(base, tuple(e.lower() for e in o.extensions)):
            if dirpath != folder:  # per folder, not per file: its path below root and base
                folder = dirpath
                prefix = Path(dirpath).relative_to(ctx.root).as_posix() + "/"
                prefix = "" if prefix == "./" else prefix
                folders = Path(dirpath).relative_to(base).parts
            seen.add(name)
            yield FileCandidate(prefix + name, (dirpath, name, folders, splits))
        if splits:
            _log_unmatched(ctx, splits.file, sorted(set(splits.rows) - seen))

    def read(self, ctx: ScanContext, candidate: FileCandidate) -> Sample | QuarantineEntry:
        o = self.options
        dirpath, name, folders, splits = candidate.info
        if len(folders) != o.levels:
            return ctx.quarantine(
                candidate.rel,
                f"expected {o.levels} folder level(s) below {o.images_dir!r}, found {len(folders)}",
            )
        width, height = check_image(os.path.join(dirpath, name), ctx.verify, ctx.max_pixels)
        at = len(o.parent_attributes)
        cls = folders[at]
        label = ctx.canonical(cls)
        split = self._split(ctx, splits, name, cls, label)
        named = dict(
            zip(
                [*o.parent_attributes, *o.child_attributes],
                folders[:at] + folders[at + 1 :],
                strict=True,
            )
        )
        return ctx.sample(
            candidate.rel,
            width,
            height,
            group_id=named[o.group_level] if o.group_level else None,
            labels=(label,),
            attributes={"source_label": cls, **named},
            split=split,
        )

    def _split(
        self, ctx: ScanContext, splits: SplitTable | None, name: str, folder: str, label: str
    ) -> str | None:
        """The image's split from the split table; an unlisted image keeps None, a listed one
        with an empty split cell too (counted as a label left out)."""
        if splits is None or name not in splits.rows:
            return None
        split, cls = splits.rows[name]
        if cls is not None and cls != folder:
            try:
                same = ctx.canonical(cls) == label
            except LabelProblem:
                raise LabelProblem(
                    f"{splits.file} lists {name} under class {cls!r}, which the manifest's "
                    "label_map does not know"
                ) from None
            if not same:
                raise LabelProblem(
                    f"{splits.file} lists {name} under class {cls!r}, not its folder {folder!r}"
                )
        if split is None:
            ctx.label_missing(self.options.split_table.split_column)
        return split


def _log_unmatched(ctx: ScanContext, file: str, names: list[str]) -> None:
    """Rows naming no image under ROOT are not candidates (a partial download is legitimate):
    they are ignored, and counted in the log so a wrong ROOT or table is still visible."""
    if names:
        log.warning(
            "%s: %d row(s) of %s name no image under ROOT (ignored), e.g. %s",
            ctx.source,
            len(names),
            file,
            ", ".join(names[:3]),
        )
