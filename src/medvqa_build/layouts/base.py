"""What every layout shares: the scan context and the registry of layouts.

A layout's ``scan`` yields, for every candidate file it finds, exactly one
:class:`~medvqa_build.records.Sample` or one
:class:`~medvqa_build.quarantine.QuarantineEntry`, so ``found = converted + quarantined``.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import SourceError
from ..media.image import ImageProblem
from ..pydantic_errors import describe_validation_error
from ..quarantine import QuarantineEntry
from ..records import Sample
from ..registry import Registry

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff")


class LabelProblem(Exception):
    """A raw label string that the manifest's label map does not know."""


@dataclass
class ScanContext:
    """Where and how one layout part is scanned."""

    source: str
    root: Path
    part: str
    modality: str
    scene: str | None
    label_map: dict[str, str] = field(default_factory=dict)
    verify: str = "header"
    # this process handles candidates i with i % shard_count == shard_index (see defer)
    shard_index: int = 0
    shard_count: int = 1
    candidates_seen: int = field(default=0, init=False, repr=False)
    # folders below root found free of symbolic links during this scan (see contained_path)
    _link_free: set[str] = field(default_factory=set, init=False, repr=False)

    def defer(self, fn, *args, **kwargs):
        """Do one candidate's work (``fn(*args)`` -> Sample or QuarantineEntry) here, or return
        None when another shard owns it. Shardable layouts route every yield through this, so
        candidate ``i`` is the ``i``-th call in every process and its owner is ``i % n``."""
        index = self.candidates_seen
        self.candidates_seen += 1
        if self.shard_count > 1 and index % self.shard_count != self.shard_index:
            return None
        return fn(*args, **kwargs)

    def canonical(self, raw: str) -> str:
        """Map a raw label through the manifest's label map (identity when the map is empty)."""
        raw = str(raw).strip()
        if not self.label_map:
            return raw
        if raw in self.label_map:
            return self.label_map[raw]
        raise LabelProblem(f"label {raw!r} is not in the manifest's label_map")

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def safe_path(self, rel: str | Path) -> Path:
        """``root / rel`` for a path read from a table or annotation file.

        A dataset's tables are input, not code: a value that is absolute, climbs out with
        ``..`` or names a symbolic link whose target lies outside the root raises
        :class:`ImageProblem` (so the row is quarantined with that reason).
        """
        return contained_path(self.root, rel, self._link_free)

    def sample_id(self, key: str) -> str:
        return f"{self.source}:{key}"

    def quarantine(self, file: str | Path, reason: str) -> QuarantineEntry:
        if isinstance(file, Path) and file.is_absolute():
            file = self.rel(file) if file.is_relative_to(self.root) else str(file)
        return QuarantineEntry(file=str(file), reason=reason, source=self.source)

    def _manifest_path(self, rel: str, what: str) -> Path:
        """A manifest's folder or file option, refused when it leaves the source root."""
        try:
            return contained_path(self.root, rel)
        except ImageProblem as exc:
            raise SourceError(
                f"{self.source}: the {what} path {rel!r} leaves the source root ({exc})",
                where=str(self.root),
                fix="manifest paths are relative to the source root; remove '..' or the "
                "leading '/'",
            ) from None

    def require_dir(self, rel: str, what: str) -> Path:
        path = self._manifest_path(rel, what)
        if not path.is_dir():
            raise SourceError(
                f"{self.source}: expected the {what} folder {rel!r} under the source root",
                where=str(path),
                fix="point ROOT at the unpacked dataset (see the source's docs page)",
            )
        return path

    def require_file(self, rel: str, what: str) -> Path:
        path = self._manifest_path(rel, what)
        if not path.is_file():
            raise SourceError(
                f"{self.source}: expected the {what} file {rel!r} under the source root",
                where=str(path),
                fix="point ROOT at the unpacked dataset (see the source's docs page)",
            )
        return path


class Layout(Protocol):
    name: ClassVar[str]
    # True when every candidate's work goes through ScanContext.defer (parallel convert)
    shardable: ClassVar[bool]

    def scan(self, ctx: ScanContext) -> Iterator[Sample | QuarantineEntry]: ...


class LayoutOptions(BaseModel):
    """Base of each layout's options: unknown keys are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid")


LAYOUTS: Registry[type] = Registry("layout")


def make_layout(name: str, options: dict[str, Any], where: str) -> Layout:
    cls = LAYOUTS.get(name, where=where)
    try:
        opts = cls.Options.model_validate(options or {})
    except ValidationError as exc:
        raise SourceError(
            f"bad options for layout {name!r}: {describe_validation_error(exc)}", where=where
        ) from None
    return cls(opts)


def contained_path(root: Path, rel: str | Path, link_free: set[str] | None = None) -> Path:
    """``root / rel``, or :class:`ImageProblem` when that would leave ``root`` (see
    :meth:`ScanContext.safe_path`).

    ``link_free`` (one set per scan of one root) remembers the folders found free of symbolic
    links, so a scan checks each folder once and then only each file (one ``lstat``).
    """
    problem, norm = _containment(root, rel, link_free)
    if problem is not None:
        raise ImageProblem(problem)
    return root / norm


def path_problem(root: Path, rel: str | Path, link_free: set[str] | None = None) -> str | None:
    """Why :func:`contained_path` would refuse ``rel`` (its message), or None; no Path is
    built, so a check of every sample's file costs one ``lstat`` with ``link_free``."""
    return _containment(root, rel, link_free)[0]


def _containment(root: Path, rel: str | Path, link_free: set[str] | None) -> tuple[str | None, str]:
    text = str(rel).replace("\\", "/")
    if text.startswith("/") or _DRIVE.match(text):
        return f"path {text!r} is absolute; expected a path inside the source root", text
    norm = posixpath.normpath(text)
    if norm == ".." or norm.startswith("../"):
        return f"path {text!r} leaves the source root through '..'; refused", norm
    if not _has_link_below(str(root), norm, link_free):
        # no symbolic link between root and the file: ``root / norm`` resolves to
        # ``resolve(root) / norm``, inside the root (a missing part ends the walk, as it
        # ends resolve's)
        return None, norm
    try:
        real = (root / norm).resolve()
        real_root = root.resolve()
    except (OSError, RuntimeError):
        return f"path {text!r} is a symbolic link loop", norm
    if not real.is_relative_to(real_root):
        return f"path {text!r} is a symbolic link to a file outside the source root", norm
    return None, norm


_DRIVE = re.compile(r"^[A-Za-z]:")


def _has_link_below(root: str, norm: str, link_free: set[str] | None = None) -> bool:
    """Whether any part of ``root/norm`` below ``root`` is a symbolic link (one ``lstat`` per
    part not yet in ``link_free``; the full ``resolve`` is needed only when one is)."""
    if norm == ".":
        return False
    folder, _, name = norm.rpartition("/")
    if folder and link_free is not None and folder in link_free:
        parts, current = [name], os.path.join(root, folder)
    else:
        parts, current = norm.split("/"), root
    for part in parts:
        current = os.path.join(current, part)
        try:
            mode = os.lstat(current).st_mode
        except OSError:
            return False  # missing (or not a folder): nothing below it can be a link
        if stat.S_ISLNK(mode):
            return True
    if folder and link_free is not None:
        link_free.add(folder)  # every part of it was looked at: none is a link
    return False


def sorted_files(folder: Path, extensions: tuple[str, ...] = IMAGE_EXTENSIONS) -> list[Path]:
    """Files under ``folder`` (recursive) with one of ``extensions``, in a stable order."""
    return [Path(dirpath) / name for dirpath, name in walk_files(folder, extensions)]


def walk_files(
    folder: Path, extensions: tuple[str, ...] = IMAGE_EXTENSIONS
) -> Iterator[tuple[str, str]]:
    """:func:`sorted_files` as ``(folder path, file name)`` strings, same order: a layout that
    scans a million files need not build a :class:`~pathlib.Path` for each."""
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(filenames):
            if name.lower().endswith(extensions) and not name.startswith("."):
                yield dirpath, name


def without_suffix(rel: str) -> str:
    """``Path(rel).with_suffix("").as_posix()`` for a normalised posix ``rel`` (the sample key
    of an image path), without building a Path."""
    slash = rel.rfind("/") + 1
    dot = rel.rfind(".", slash)
    return rel[:dot] if slash < dot < len(rel) - 1 else rel
