"""Fixed-width numeric rows kept in an unlinked temporary file instead of memory.

A visual sampler over 10^6 pool images of a 512-d embedder would hold 2 GiB of vectors and
another ~0.8 GiB of precomputed neighbour lists. A :class:`RowFile` holds such a matrix on
disk and is read and written with ``pread``/``pwrite`` into numpy buffers: only the rows asked
for are ever in memory, and no mapped pages count towards the process (``np.memmap`` would
keep every page it touched resident). It is indexed like a 2-D array by a row number, a slice
or an array of row numbers, so code written for an array reads it unchanged.

The file lives in ``dir`` (default: Python's temporary directory, ``TMPDIR``) and is removed
when the object is closed or collected; it never appears under a name.
"""

from __future__ import annotations

import os

import numpy as np

from .scratch import ScratchFile


class RowFile:
    """``n`` rows of ``width`` values of ``dtype`` on disk; writes and reads whole rows."""

    def __init__(self, n: int, width: int, dtype=np.float32, dir: str | os.PathLike | None = None):
        self.dtype = np.dtype(dtype)
        self.n, self.width = int(n), int(width)
        self.row_bytes = self.width * self.dtype.itemsize
        self.dir = dir
        self._scratch = ScratchFile(
            f"{self.n * self.row_bytes / 2**20:.0f} MiB of rows",
            fix="point spill_dir (the sampler's params) or TMPDIR at a writable folder with "
            "room for them",
            dir=dir,
            size=self.n * self.row_bytes,
        )

    # -- array-like ---------------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.width)

    ndim = 2

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, key) -> np.ndarray:
        if isinstance(key, int | np.integer):
            k = int(key) + (self.n if key < 0 else 0)
            if not 0 <= k < self.n:
                raise IndexError(f"row {key} out of range for {self.n} rows")
            return self.read(k, k + 1)[0]
        if isinstance(key, slice):
            start, stop, step = key.indices(self.n)
            if step != 1:
                return self.take(np.arange(start, stop, step))
            return self.read(start, max(start, stop))
        return self.take(np.asarray(key))

    # -- I/O ----------------------------------------------------------------------------------

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` (contiguous on disk: one read)."""
        out = np.empty((stop - start, self.width), self.dtype)
        self._pread(out, start)
        return out

    def take(self, rows: np.ndarray) -> np.ndarray:
        """Rows in the order given; runs of consecutive rows are read in one call each."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        out = np.empty((len(rows), self.width), self.dtype)
        if not len(rows):
            return out
        if rows.min() < 0 or rows.max() >= self.n:
            raise IndexError(f"rows out of range for {self.n} rows")
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        starts = np.concatenate(([0], breaks)).tolist()
        ends = np.concatenate((breaks, [len(rows)])).tolist()
        first = rows[starts].tolist()
        for a, b, r in zip(starts, ends, first, strict=True):
            self._pread(out[a:b], r)
        return out

    def write(self, start: int, block: np.ndarray) -> None:
        """Write ``block`` (rows of this width) at row ``start``."""
        block = np.ascontiguousarray(block, dtype=self.dtype).reshape(-1, self.width)
        if start < 0 or start + len(block) > self.n:
            raise IndexError(f"rows {start}..{start + len(block)} out of range for {self.n} rows")
        self._scratch.write_at(start * self.row_bytes, block)

    def write_rows(self, rows: np.ndarray, block: np.ndarray) -> None:
        """Write row ``block[j]`` at row ``rows[j]`` (runs of consecutive rows at once); safe
        from several threads for rows that do not overlap."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        if not len(rows):
            return
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        starts = np.concatenate(([0], breaks)).tolist()
        ends = np.concatenate((breaks, [len(rows)])).tolist()
        for a, b, r in zip(starts, ends, rows[starts].tolist(), strict=True):
            self.write(r, block[a:b])

    def _pread(self, out: np.ndarray, start: int) -> None:
        self._scratch.readinto_at(start * self.row_bytes, out)

    def close(self) -> None:
        self._scratch.close()
