"""The one place that turns a damaged state no typed error names into one line and exit 2.

Typed errors (:class:`~medvqa_build.errors.MedvqaError`) already say what, where and how to
fix. What is left are states the code meets through a library: a full disk (``ENOSPC``,
``EDQUOT``) or a read-only folder while a file is written, a Parquet file pyarrow cannot read,
a value nested beyond Python's recursion limit, memory running out. Every command's
failure goes through :func:`describe`, so each of them gets the same line; anything else is a
bug and keeps its traceback. ``-v`` prints the traceback of a translated failure too.

A command that writes a folder calls :func:`claim` before it writes: when it then fails, a
folder it created is removed (:func:`undo`), so a failed command leaves no new output behind.
A build folder that already holds finished stages is kept: the rerun reuses them.
"""

from __future__ import annotations

import argparse
import errno
import os
import re
import shutil
from pathlib import Path

from ..store.damaged import damaged_fix

MAX_LINE = 1000  # characters of one error line; the rest is cut and counted
DISK_FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
NOT_WRITABLE = {errno.EACCES, errno.EPERM, errno.EROFS}


def one_line(text: str, limit: int = MAX_LINE) -> str:
    """``text`` on one line of at most ``limit`` characters (what was cut is counted)."""
    line = " ".join(str(text).split())
    if len(line) <= limit:
        return line
    return f"{line[: limit - 40]}... ({len(line) - limit + 40:,} characters more)"


def _from_pyarrow(exc: BaseException) -> bool:
    """An error pyarrow raised (told by its class's module: importing pyarrow here would
    slow every ``--help``)."""
    return any(c.__module__.split(".")[0] == "pyarrow" for c in type(exc).__mro__)


def _folder_of(exc: OSError, args: argparse.Namespace) -> str:
    """The folder a failed write went to: the file the error names, else the command's."""
    name = exc.filename if isinstance(exc.filename, str | bytes | os.PathLike) else None
    if name is not None:
        return str(Path(os.fsdecode(name)).parent)
    claimed = getattr(args, "_claimed", None)
    return str(claimed[0]) if claimed else "the output folder"


_QUOTED_PATH = re.compile(r"'(/[^']+)'")


def _parquet_line(message: str) -> str:
    """The line for a pyarrow error: the file it names, and the stage folder to delete when
    the file is a build's (a finished stage is reused while its folder is there)."""
    first = message.strip().splitlines()[0] if message.strip() else "unreadable"
    found = _QUOTED_PATH.search(first)
    path = Path(found.group(1)) if found else None
    return f"damaged Parquet file ({first}) — fix: {damaged_fix(path)}"


def describe(exc: BaseException, args: argparse.Namespace) -> str | None:
    """The one line for ``exc``, or None when it is not a damaged state but a bug."""
    if isinstance(exc, OSError) and exc.errno in DISK_FULL:
        code = errno.errorcode.get(exc.errno, str(exc.errno))
        return (
            f"the disk is full ({code}: {os.strerror(exc.errno)}) while writing into "
            f"{_folder_of(exc, args)} — fix: free space on that disk (or write elsewhere with "
            "-o), then rerun; no file was left half-written under its final name"
        )
    if isinstance(exc, OSError) and exc.errno in NOT_WRITABLE and exc.filename:
        return (
            f"{os.strerror(exc.errno).lower()}: {os.fsdecode(exc.filename)} — fix: give your "
            "user access to it and its folder, or write elsewhere with -o"
        )
    if isinstance(exc, MemoryError):  # pyarrow's too (ArrowMemoryError), not a damaged file
        return (
            "ran out of memory — fix: lower --workers, or lower the limits in MEDVQA_LIMITS "
            "(max_worker_bytes, max_decode_bytes: docs/reliability.md, Limits) so a file that "
            "claims that much is refused"
        )
    if _from_pyarrow(exc):
        return _parquet_line(str(exc))
    if isinstance(exc, RecursionError):
        return (
            "an input is nested too deeply to read (Python's recursion limit) — fix: pass a "
            "file as the tool that made it wrote it"
        )
    return None


def claim(args: argparse.Namespace, path: str | os.PathLike) -> Path:
    """Note that the command is about to write the folder ``path`` (and whether it exists
    already), for :func:`undo` and for the disk-full line. Returns ``path`` as a Path."""
    path = Path(path)
    args._claimed = (path, path.exists())
    return path


def _finished_stages(folder: Path) -> int:
    return sum(1 for _ in folder.glob("stages/*/*/_SUCCESS.json"))


def undo(args: argparse.Namespace) -> str | None:
    """After a failure: remove the folder the command created; a note saying what was kept
    or removed, or None when there was nothing to do."""
    claimed = getattr(args, "_claimed", None)
    if not claimed or claimed[1] or not claimed[0].is_dir():
        return None
    folder = claimed[0]
    finished = _finished_stages(folder)
    if finished:
        return f"kept {folder}: its {finished} finished stage(s) are reused by the next run"
    shutil.rmtree(folder, ignore_errors=True)
    return None
