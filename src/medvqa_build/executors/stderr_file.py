"""Send what libraries write straight to file descriptor 2 into a log file, while Python's own
``sys.stderr`` (progress bars, logging, the CLI's error line) stays on the terminal.

Ray's C++ core logs its warnings and errors (``core_worker.cc``, ``rpc_client.h``,
``task_manager.cc`` ...) to descriptor 2 of the driver, bypassing Python; a failing cluster
makes dozens of such lines. The same lines also go to Ray's own session logs, so on the
terminal they are only noise.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
from pathlib import Path


class StderrToFile:
    """While open: descriptor 2 writes to ``path`` (appended); ``sys.stderr`` and the logging
    handlers that wrote to it write to the terminal's stderr as before."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._saved_fd: int | None = None
        self._old = self._new = None

    def open(self) -> StderrToFile:
        if self._saved_fd is not None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        sys.stderr.flush()
        log_fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._saved_fd = os.dup(2)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        self._old = sys.stderr
        if not _on_fd2(self._old):  # already captured elsewhere (pytest): leave it there
            self._new = self._old
            return self
        self._new = io.TextIOWrapper(
            io.FileIO(self._saved_fd, "w", closefd=False),
            encoding=getattr(self._old, "encoding", None) or "utf-8",
            errors="backslashreplace",
            line_buffering=True,
            write_through=True,  # nothing waits in a buffer if Ray ends the process
        )
        sys.stderr = self._new
        self._swap(self._old, self._new)
        return self

    def close(self) -> None:
        if self._saved_fd is None:
            return
        if self._new is not self._old:
            self._new.flush()
            self._swap(self._new, self._old)
            if sys.stderr is self._new:
                sys.stderr = self._old
            self._new.close()
        os.dup2(self._saved_fd, 2)
        os.close(self._saved_fd)
        self._saved_fd = None

    @staticmethod
    def _swap(old, new) -> None:
        """Point the logging stream handlers that wrote to ``old`` at ``new``."""
        loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
        for logger in loggers:
            for handler in getattr(logger, "handlers", ()):
                if isinstance(handler, logging.StreamHandler) and handler.stream is old:
                    with contextlib.suppress(AttributeError):  # e.g. lastResort follows sys.stderr
                        handler.setStream(new)


def _on_fd2(stream) -> bool:
    try:
        return stream.fileno() == 2
    except (AttributeError, OSError, ValueError):
        return False
