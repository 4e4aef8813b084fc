"""A task's pool of samples kept on disk instead of memory.

MedSG's cross-modal and referring tasks draw partners and fillers from their whole pool, so
they held every pool sample (~2 kB each as objects: ~200 MiB for 10^5 slices). A
:class:`SampleSpill` takes the pool as it streams past, pickled into an unlinked temporary
file, and is indexed and iterated like the tuple of its samples: 8 bytes a sample stay in
memory (its offset), a sample is unpickled when asked for (~40 µs), the last ``cache`` kept.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import threading
from array import array
from collections.abc import Iterator, Sequence

from .errors import RecipeError
from .records import Sample

_POSITIONAL = hasattr(os, "pread")  # thread-safe reads without a lock (not on Windows)


class SampleSpill(Sequence):
    """Samples appended once (:meth:`append`), then read by position."""

    def __init__(self, dir: str | os.PathLike | None = None, cache: int = 1024):
        self.cache = cache
        self._offsets = array("q", [0])
        self._recent: dict[int, Sample] = {}
        self._lock = threading.Lock()
        self._unflushed = False
        try:
            self._file = tempfile.TemporaryFile(dir=dir)  # noqa: SIM115 (closed by close())
        except OSError as exc:
            folder = dir if dir is not None else tempfile.gettempdir()
            raise RecipeError(
                f"cannot keep a task's pool on disk: {exc}",
                where=str(folder),
                fix="point TMPDIR at a writable folder with room for it",
            ) from exc

    def append(self, sample: Sample) -> None:
        data = pickle.dumps(sample, protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            self._file.seek(0, os.SEEK_END)
            self._file.write(data)
            self._unflushed = True
        self._offsets.append(self._offsets[-1] + len(data))

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def _read(self, i: int) -> Sample:
        start, end = self._offsets[i], self._offsets[i + 1]
        with self._lock:
            if self._unflushed:
                self._file.flush()
                self._unflushed = False
            if not _POSITIONAL:
                self._file.seek(start)
                data = self._file.read(end - start)
        if _POSITIONAL:
            data = os.pread(self._file.fileno(), end - start, start)
        if len(data) != end - start:
            raise OSError(f"sample spill file ended early at byte {start + len(data)}")
        return pickle.loads(data)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        i = range(len(self))[i]  # negative positions; IndexError out of range
        s = self._recent.pop(i, None)
        if s is None:
            s = self._read(i)
            if len(self._recent) >= self.cache:
                del self._recent[next(iter(self._recent))]  # the least recently used
        self._recent[i] = s
        return s

    def __iter__(self) -> Iterator[Sample]:
        return (self._read(i) for i in range(len(self)))

    def close(self) -> None:
        self._file.close()

    def __del__(self) -> None:
        file = getattr(self, "_file", None)
        if file is not None:
            file.close()
