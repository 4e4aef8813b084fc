"""A task's pool of samples kept on disk instead of memory.

MedSG's cross-modal and referring tasks draw partners and fillers from their whole pool, so
they held every pool sample (~2.7 kB each as objects: ~270 MiB for 10^5 slices). A
:class:`SampleSpill` takes the pool as it streams past and appends it, 64 samples at a time,
to an unlinked temporary file as Arrow record batches of the sample table's schema (the rows
a build's Parquet tables hold; nothing is ever deserialised as Python objects). It is indexed
and iterated like the tuple of its samples: ~1 byte a sample stays in memory, a sample is
decoded from its batch when asked for, the last ``cache`` of them kept.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_right
from collections.abc import Iterator, Sequence

import pyarrow as pa

from ..records import Sample
from ..schema import SAMPLE_SCHEMA
from .scratch import ScratchFile

BATCH = 64  # samples an Arrow batch: what one lookup decodes


class SampleSpill(Sequence):
    """Samples appended (:meth:`append`), then read by position."""

    def __init__(self, dir: str | os.PathLike | None = None, cache: int = 1024):
        self.cache = cache
        self._starts = array("q")  # first position of each written batch
        self._offsets = array("q", [0])  # byte range of each written batch
        self._pending: list[dict] = []  # rows not yet written
        self._count = 0
        self._recent: dict[int, Sample] = {}
        self._scratch = ScratchFile(
            "a task's pool", fix="point TMPDIR at a writable folder with room for it", dir=dir
        )

    def append(self, sample: Sample) -> None:
        self._pending.append(sample.to_row())
        self._count += 1
        if len(self._pending) == BATCH:
            self._write()

    def _write(self) -> None:
        """Append the pending rows as one record batch."""
        if not self._pending:
            return
        data = pa.RecordBatch.from_pylist(self._pending, schema=SAMPLE_SCHEMA).serialize()
        self._scratch.write_at(self._offsets[-1], data)
        self._starts.append(self._count - len(self._pending))
        self._offsets.append(self._offsets[-1] + data.size)
        self._pending = []

    def __len__(self) -> int:
        return self._count

    def _batch(self, b: int) -> pa.RecordBatch:
        start, end = self._offsets[b], self._offsets[b + 1]
        data = self._scratch.read_at(start, end - start)
        return pa.ipc.read_record_batch(pa.py_buffer(data), SAMPLE_SCHEMA)

    def _read(self, i: int) -> Sample:
        if self._pending:
            self._write()
        b = bisect_right(self._starts, i) - 1
        row = self._batch(b).slice(i - self._starts[b], 1).to_pylist()[0]
        return Sample.from_row(row)

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
        if self._pending:
            self._write()
        for b in range(len(self._starts)):
            yield from (Sample.from_row(r) for r in self._batch(b).to_pylist())

    def close(self) -> None:
        self._scratch.close()
