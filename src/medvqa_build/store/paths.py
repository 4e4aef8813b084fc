"""Paths inside a source root: containment checks for paths read from a dataset's own
tables, and sorted, stable walks of its folders."""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
import stat
from collections.abc import Iterator
from pathlib import Path

from ..errors import ImageProblem

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff")


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


def not_a_file(path: str | os.PathLike) -> str:
    """Why ``path`` is not a regular file, as a quarantine reason: missing, a FIFO, a device,
    a socket, a folder or a broken link (reading a FIFO or a device would block or never end,
    so none is opened)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return "file not found"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if stat.S_ISLNK(mode):
        try:
            mode = os.stat(path).st_mode
        except OSError:
            return "broken symbolic link (dangling, or a link loop)"
    kinds = (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    )
    kind = next((name for test, name in kinds if test(mode)), "not a regular file")
    return f"is {kind}, not a regular file; refused without opening it"


def linked_folders_outside(root: Path, depth: int = 4) -> list[str]:
    """Folders (``rel`` paths) down to ``depth`` levels below ``root`` that are symbolic links
    to a folder outside it. A walk does not follow folder links, so their files would be
    skipped without a word: the scan reports each as a quarantine entry instead. Links that
    stay inside the root (a loop back to a parent) are not reported: their files are walked
    where they really are."""
    real_root = root.resolve()
    found: list[str] = []
    level = [root]
    for _ in range(depth):
        below = []
        for folder in level:
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                if entry.is_symlink():
                    try:
                        target = Path(entry.path).resolve()
                    except (OSError, RuntimeError):
                        continue  # a loop: not followed, nothing outside to report
                    if target.is_dir() and not target.is_relative_to(real_root):
                        found.append(Path(entry.path).relative_to(root).as_posix())
                elif entry.is_dir(follow_symlinks=False):
                    below.append(Path(entry.path))
        level = below
    return found


LINKED_FOLDER_REASON = (
    "folder is a symbolic link to a folder outside the source root; not followed, so its "
    "files are not read: copy the data into the root (cp -rL) or pass the real folder"
)


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


def undecodable_name(text: str) -> str | None:
    """``text`` with its undecodable bytes written as ``\\xff`` escapes when it holds any, else
    None. A file name is bytes: one that is not UTF-8 comes out of ``os.walk`` with surrogate
    characters (``os.fsdecode``), which no Parquet or UTF-8 file can hold."""
    try:
        text.encode("utf-8")
        return None
    except UnicodeEncodeError:
        return escaped_name(text)


def escaped_name(text: str) -> str:
    """``text`` as printable UTF-8: the raw bytes of a name ``os.fsdecode`` could not decode
    become backslash escapes (``b'bad\\xff.jpg'`` -> ``'bad\\xff.jpg'``)."""
    raw = text.encode("utf-8", "surrogateescape" if _only_escapes(text) else "backslashreplace")
    return raw.decode("utf-8", "backslashreplace")


def _only_escapes(text: str) -> bool:
    """Whether every surrogate in ``text`` is one ``surrogateescape`` made (U+DC80..U+DCFF)."""
    return all(not 0xD800 <= ord(c) <= 0xDFFF or 0xDC80 <= ord(c) <= 0xDCFF for c in text)


def without_suffix(rel: str) -> str:
    """``Path(rel).with_suffix("").as_posix()`` for a normalised posix ``rel`` (the sample key
    of an image path), without building a Path."""
    slash = rel.rfind("/") + 1
    dot = rel.rfind(".", slash)
    return rel[:dot] if slash < dot < len(rel) - 1 else rel


def tree_fingerprint(root: Path) -> str:
    """Cheap content proxy of a folder: relative paths, sizes and mtimes of every file.

    The hash of ``json.dumps`` of the list of ``(path below root, size, mtime_ns)`` in walk
    order, fed to the hash an entry at a time: the list is never held (at 10^6 files it was
    hundreds of MB in the build process) and a path is built once per folder, not once per
    file (issue 35: the convert stage's address is computed for every build, the second
    folder's too). An entry whose path ``json.dumps`` leaves as it is (printable ASCII, no
    quote or backslash) is written out directly, and the hash is fed a folder at a time: the
    same bytes, at half the CPU."""
    digest = hashlib.sha256(b"[")
    separator = ""  # json.dumps puts ", " between the list's entries
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        if not filenames:
            continue
        folder = Path(dirpath).relative_to(root).as_posix()
        prefix = "" if folder == "." else folder + "/"
        pieces = []
        for name in sorted(filenames):
            st = os.stat(os.path.join(dirpath, name))
            rel = prefix + name
            if _json_plain(rel):
                pieces.append(f'{separator}["{rel}", {st.st_size}, {st.st_mtime_ns}]')
            else:
                pieces.append(separator + json.dumps([rel, st.st_size, st.st_mtime_ns]))
            separator = ", "
        digest.update("".join(pieces).encode())
    digest.update(b"]")
    return digest.hexdigest()


def _json_plain(text: str) -> bool:
    """Whether ``json.dumps`` writes ``text`` as itself between quotes (every character from
    space to ``~``, none of them a quote or a backslash)."""
    return text.isascii() and text.isprintable() and '"' not in text and "\\" not in text
