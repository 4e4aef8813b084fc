"""Atomic file writes, one way for the whole package: a reader sees the old file or the new
one, never half of one, and a killed build leaves only temp files that the next run ignores.
:func:`write_atomic` writes bytes or text at once, :class:`AtomicFile` a file that is streamed,
:func:`atomic_path` a temp path for a writer that opens the file itself (Parquet).

Files get ordinary permissions (0666 less the umask), so a build folder can be shared.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)


def umask() -> int:
    """The process's umask (read without changing it for good)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_path(path: Path) -> Path:
    """A new temp path beside ``path`` for a writer that streams (a Parquet writer); the
    caller renames it over ``path`` when done and unlinks it on failure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o666 & ~umask())
    os.close(fd)
    return Path(tmp)


def write_atomic(path: str | os.PathLike, data: bytes | str, *, fsync: bool = False) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` through ``.<name>.<pid>.tmp`` and a rename.

    The parent folder is made when missing. ``fsync`` flushes the bytes to the disk before
    the rename (for caches shared between builds, which must survive a power cut whole).
    One ``open``, the writes and one ``rename``: cheap enough for the render stage's files.
    """
    path = os.fspath(path)
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")  # one writer a process
    view = memoryview(data.encode("utf-8") if isinstance(data, str) else data).cast("B")
    try:
        fd = os.open(tmp, _WRITE_FLAGS, 0o666)
    except FileNotFoundError:
        os.makedirs(folder or ".", exist_ok=True)
        fd = os.open(tmp, _WRITE_FLAGS, 0o666)
    try:
        while view:
            view = view[os.write(fd, view) :]
        if fsync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)
    return Path(path)


class AtomicFile:
    """A file written in place of ``path`` through a temp file beside it, for a writer that
    streams: :meth:`commit` renames it in, :meth:`abort` removes it; a ``with`` block commits
    when it ends without an error. ``fsync``: as :func:`write_atomic`."""

    def __init__(self, path: str | os.PathLike, mode: str = "wb", *, fsync: bool = False, **kw):
        self.path = Path(path)
        self.tmp = atomic_path(self.path)
        self.fsync = fsync
        # closed by commit() or abort(): the file outlives this call
        self.fh = open(self.tmp, mode, **kw)  # noqa: SIM115

    def commit(self) -> Path:
        try:
            if self.fsync:
                self.fh.flush()
                os.fsync(self.fh.fileno())
            self.fh.close()
            os.replace(self.tmp, self.path)
        finally:
            self.abort()  # a no-op once renamed
        return self.path

    def abort(self) -> None:
        self.fh.close()
        self.tmp.unlink(missing_ok=True)

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


@contextlib.contextmanager
def folder_written_aside(dest: str | os.PathLike) -> Iterator[Path]:
    """A temp folder beside ``dest`` to write a whole tree into; when the block ends without
    an error its files are renamed into ``dest`` (made if missing), else it is deleted. A
    writer that fails (a full disk) so leaves ``dest`` as it was: renames need no space.
    Files of ``dest`` the new tree does not have are kept (``dest`` may be any folder)."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        tmp.chmod(0o777 & ~umask())
        yield tmp
        if not dest.exists():
            os.replace(tmp, dest)
            return
        for path in sorted(tmp.rglob("*")):
            target = dest / path.relative_to(tmp)
            if path.is_dir():
                target.mkdir(exist_ok=True)
            else:
                os.replace(path, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def file_sha256(path: str | os.PathLike) -> str:
    """Hex sha256 of a file, read a MiB at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def crash_point(where: str) -> None:
    """Test hook: ``MEDVQA_CRASH_AT=<where>`` SIGKILLs the build here (a stage name: its
    files are in the temp folder, not yet renamed; ``publish``: an export is half-replaced).
    tests/hardening/test_crash_resume.py uses it to prove a rerun recovers byte-identically."""
    if os.environ.get("MEDVQA_CRASH_AT") == where:
        os.kill(os.getpid(), signal.SIGKILL)
