"""``class_folders``: ``<images_dir>/<parents...>/<class>/<children...>/<image>`` — the class is
one folder level of the image's path (Kvasir, HyperKvasir labeled-images, GastroVision, KID), or
part of its file name (``class_pattern``, below).
By default it is the image's own folder; ``parent_attributes`` names the levels above the class
(HyperKvasir: ``{upper,lower}-gi-tract/<category>/<class>``) and ``child_attributes`` the levels
between the class and the image (bowel-preparation frames ``<score>/<video>/<frame>.jpg``:
``child_attributes: [video]``), so the class may sit at any depth. Every named level is kept as
an attribute. ``group_level`` names one of them whose folder is the image's group (frames of
one video, images of one patient): a split keeps a group whole, so those images cannot leak
across splits. Without it each image is its own group. ``split_level`` names one whose folder
is the image's official split (``<split>/<class>/<image>``, ImageNet style: ``train``, ``val``,
``test``; ``curate.split.use_official`` keeps it).

When the class is in the file name rather than a folder (``<patient>/<view>/<label>_<n>.jpg``),
``class_pattern`` is a regular expression searched in the file name whose named group
``label`` is the class; every folder level is then named by ``parent_attributes``, and the
pattern's other named groups are attributes too (``group_level`` and ``split_level`` may name
them). A file name the pattern does not match is quarantined with the pattern named.

An optional ``split_table`` joins a separate file-name -> split CSV (HyperKvasir's official
``2_fold_split.csv``, ``file-name;class-name;split-index``) onto the samples by file name. Its
class column is compared with the folder through the manifest's label map (the owners' split
file spells classes as an earlier release did: ``normal-cecum`` for the folder ``cecum``), and
a split or class cell holding a missing-value marker is no value: the image keeps ``split``
null (counted) or is not cross-checked."""

from __future__ import annotations

import logging
import os
import re
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
    # one of the names above: that folder's name is the image's split (``train/<class>/...``);
    # not with split_table
    split_level: str | None = None
    # a regular expression searched in the file name, with a named group ``label``: the class
    # comes from the file name and no folder is the class (parent_attributes names them all);
    # its other named groups are attributes too. None: the class is a folder
    class_pattern: str | None = None
    extensions: list[str] = list(IMAGE_EXTENSIONS)
    split_table: SplitTableOptions | None = None

    @model_validator(mode="after")
    def _levels_named_once(self) -> ClassFoldersOptions:
        if self.class_pattern is not None:
            try:
                groups = re.compile(self.class_pattern).groupindex
            except re.error as e:
                raise ValueError(
                    f"class_pattern {self.class_pattern!r} is no regular expression: {e}"
                ) from None
            if "label" not in groups:
                raise ValueError(
                    f"class_pattern {self.class_pattern!r} has no named group 'label' "
                    "(write (?P<label>...) around the class)"
                )
            if self.child_attributes:
                raise ValueError(
                    "with class_pattern no folder is the class: name every folder level in "
                    "parent_attributes, not child_attributes"
                )
        names = self.level_names
        twice = sorted({n for n in names if names.count(n) > 1} | ({"source_label"} & set(names)))
        if twice:
            raise ValueError(
                f"folder level name(s) {twice} used twice (source_label is the class folder's)"
            )
        for key in ("group_level", "split_level"):
            value = getattr(self, key)
            if value is not None and value not in names:
                raise ValueError(
                    f"{key} {value!r} names no folder level; name one of parent_attributes, "
                    f"child_attributes or class_pattern's groups ({names})"
                )
        if self.split_level is not None and self.split_table is not None:
            raise ValueError("split_level and split_table both give the split: keep one")
        return self

    @property
    def pattern_groups(self) -> list[str]:
        """The named groups of ``class_pattern`` other than ``label``, in pattern order."""
        if self.class_pattern is None:
            return []
        return [g for g in re.compile(self.class_pattern).groupindex if g != "label"]

    @property
    def level_names(self) -> list[str]:
        """Every named level, kept as an attribute: folders, then the pattern's groups."""
        return [*self.parent_attributes, *self.child_attributes, *self.pattern_groups]

    @property
    def levels(self) -> int:
        """Folder levels between ``images_dir`` and the image."""
        class_folder = 0 if self.class_pattern is not None else 1
        return len(self.parent_attributes) + class_folder + len(self.child_attributes)

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
        return {"labels", "attribute:source_label"} | attribute_caps(o.level_names)

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
        if o.class_pattern is None:
            at = len(o.parent_attributes)
            cls = folders[at]
            levels = [*o.parent_attributes, *o.child_attributes]
            named = dict(zip(levels, folders[:at] + folders[at + 1 :], strict=True))
        else:
            match = re.search(o.class_pattern, name)
            if match is None:
                raise LabelProblem(f"file name does not match class_pattern {o.class_pattern!r}")
            cls = match.group("label")
            named = dict(zip(o.parent_attributes, folders, strict=True))
            named.update((g, v) for g in o.pattern_groups if (v := match.group(g)) is not None)
        width, height = check_image(os.path.join(dirpath, name), ctx.verify, ctx.max_pixels)
        label = ctx.canonical(cls)
        if o.split_level is not None:
            split = named.get(o.split_level)
        else:
            split = self._split(ctx, splits, name, cls, label)
        return ctx.sample(
            candidate.rel,
            width,
            height,
            group_id=named.get(o.group_level) if o.group_level else None,
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
