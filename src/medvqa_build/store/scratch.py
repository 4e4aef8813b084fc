"""An unlinked temporary file read and written at byte offsets: where :class:`RowFile`
(vectors) and :class:`SampleSpill` (a task's pool) keep what would not fit the memory goal.

The file lives in ``dir`` (default: Python's temporary directory, ``TMPDIR``), never appears
under a name where the OS allows it, and is removed when closed or collected. Reads and
writes at an offset are ``pread``/``pwrite`` (thread-safe without a lock); where those are
missing (Windows) a lock guards seek + read/write.
"""

from __future__ import annotations

import os
import tempfile
import threading

from ..errors import RecipeError

_POSITIONAL = hasattr(os, "preadv") and hasattr(os, "pwrite")


class ScratchFile:
    """``size`` bytes (sparse: unwritten bytes read 0), growing as it is written past."""

    def __init__(self, what: str, fix: str, dir: str | os.PathLike | None = None, size: int = 0):
        self._lock = threading.Lock()
        try:
            # unlinked at once where the OS allows; closed by close() or on collection
            self._file = tempfile.TemporaryFile(dir=dir)  # noqa: SIM115
            self._fd = self._file.fileno()
            if size:
                os.ftruncate(self._fd, size)
        except OSError as exc:
            folder = dir if dir is not None else tempfile.gettempdir()
            raise RecipeError(
                f"cannot keep {what} on disk: {exc}", where=str(folder), fix=fix
            ) from exc

    def write_at(self, offset: int, data) -> None:
        """Write ``data`` (bytes-like) at byte ``offset``."""
        view = memoryview(data).cast("B")
        if not _POSITIONAL:
            with self._lock:
                self._file.seek(offset)
                self._file.write(view)
                self._file.flush()
            return
        while view:
            done = os.pwrite(self._fd, view, offset)
            view, offset = view[done:], offset + done

    def readinto_at(self, offset: int, out) -> None:
        """Fill ``out`` (a writable buffer) from byte ``offset``; an OSError if the file ends
        first."""
        view = memoryview(out).cast("B")
        if not _POSITIONAL:
            with self._lock:
                self._file.seek(offset)
                got = self._file.readinto(view)
            if got != len(view):
                raise OSError(f"scratch file ended early at byte {offset + got}")
            return
        while view:
            got = os.preadv(self._fd, [view], offset)
            if got == 0:
                raise OSError(f"scratch file ended early at byte {offset}")
            view, offset = view[got:], offset + got

    def read_at(self, offset: int, n: int) -> bytearray:
        out = bytearray(n)
        self.readinto_at(offset, out)
        return out

    def close(self) -> None:
        self._file.close()

    def __del__(self) -> None:
        file = getattr(self, "_file", None)
        if file is not None:
            file.close()
