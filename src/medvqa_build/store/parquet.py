"""Parquet files of the Sample and Item tables: written deterministically (fixed writer
options, so equal tables give equal bytes) and atomically, read a batch at a time."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import DamagedFile
from ..records import Item, Sample
from ..schema import ITEM_SCHEMA, SAMPLE_SCHEMA
from .atomic import atomic_path
from .damaged import damaged_fix


def samples_to_table(samples: Iterable[Sample]) -> pa.Table:
    return pa.Table.from_pylist([s.to_row() for s in samples], schema=SAMPLE_SCHEMA)


def items_to_table(items: Iterable[Item]) -> pa.Table:
    return pa.Table.from_pylist([i.to_row() for i in items], schema=ITEM_SCHEMA)


def write_table(table: pa.Table, path: str | os.PathLike) -> Path:
    """Write Parquet atomically with fixed options so equal tables give equal bytes."""
    path = Path(path)
    tmp = atomic_path(path)
    try:
        pq.write_table(table, tmp, compression="zstd", write_statistics=True, use_dictionary=True)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


class TableWriter:
    """Write a Parquet file batch by batch (same options as :func:`write_table`), atomically:
    the file appears under its name only when the ``with`` block ends without an error."""

    def __init__(self, path: str | os.PathLike, schema: pa.Schema):
        self.path = Path(path)
        self.schema = schema
        self._tmp = atomic_path(self.path)
        self._writer = pq.ParquetWriter(
            self._tmp, schema, compression="zstd", write_statistics=True, use_dictionary=True
        )

    def write_table(self, table: pa.Table) -> None:
        if table.num_rows:
            self._writer.write_table(table)

    def __enter__(self) -> TableWriter:
        return self

    def __exit__(self, exc_type, *rest) -> None:
        self._writer.close()
        if exc_type is None:
            os.replace(self._tmp, self.path)
        else:
            self._tmp.unlink(missing_ok=True)


# Parquet key-value metadata of a converted sample table: the folder its ``image`` paths are
# relative to (discovery may move from the ROOT given to the folder holding the data)
ROOT_KEY = "medvqa_build.root"
GIVEN_KEY = "medvqa_build.root_given"


class SampleWriter(TableWriter):
    """Streams samples (or sample tables) into a Parquet file of :data:`SAMPLE_SCHEMA`;
    ``metadata`` goes into the file's key-value metadata (see :data:`ROOT_KEY`)."""

    def __init__(self, path: str | os.PathLike, metadata: dict[str, str] | None = None):
        schema = SAMPLE_SCHEMA.with_metadata(metadata) if metadata else SAMPLE_SCHEMA
        super().__init__(path, schema)

    def write(self, samples: Sequence[Sample]) -> None:
        self.write_table(samples_to_table(samples))


BATCH_ROWS = 4096


ENCODE_ROWS = 256  # items turned into Arrow at a time: a contour item is ~50 kB as objects
# rows per row group of an item file: Parquet encodes a whole row group in memory, and a
# rendered contour's polygon is hundreds of nested (x, y) lists (4096 rows cost the render
# stage ~60 MiB more than 1024 at 64k items)
ITEM_GROUP_ROWS = 1024


class ItemWriter(TableWriter):
    """Streams items into a Parquet file of :data:`ITEM_SCHEMA`, :data:`ITEM_GROUP_ROWS` rows
    per row group. Items are turned into (compact) Arrow rows every :data:`ENCODE_ROWS`, so the
    writer never holds thousands of item objects."""

    def __init__(self, path: str | os.PathLike):
        super().__init__(path, ITEM_SCHEMA)
        self._pending: list[Item] = []
        self._encoded: list[pa.Table] = []
        self._rows = 0

    def add(self, item: Item) -> None:
        self._pending.append(item)
        if len(self._pending) >= ENCODE_ROWS:
            self._encode()
            if self._rows >= ITEM_GROUP_ROWS:
                self.flush()

    def _encode(self) -> None:
        if self._pending:
            self._encoded.append(items_to_table(self._pending))
            self._rows += len(self._pending)
            self._pending.clear()

    def flush(self) -> None:
        self._encode()
        if self._encoded:
            self.write_table(pa.concat_tables(self._encoded).combine_chunks())
        self._encoded.clear()
        self._rows = 0

    def __exit__(self, exc_type, *rest) -> None:
        if exc_type is None:
            self.flush()
        super().__exit__(exc_type, *rest)


def write_samples(samples: Sequence[Sample], path: str | os.PathLike) -> Path:
    with SampleWriter(path) as writer:
        for start in range(0, len(samples), BATCH_ROWS):
            writer.write(samples[start : start + BATCH_ROWS])
    return Path(path)


def damaged(path: str | os.PathLike | None, why: str) -> DamagedFile:
    """The error for a Parquet file that cannot be read, with :func:`damaged_fix`."""
    path = Path(path) if path is not None else None
    fix = damaged_fix(path)
    first = str(why).strip().splitlines()[0] if str(why).strip() else "unreadable"
    return DamagedFile(f"damaged Parquet file ({first})", where=str(path or ""), fix=fix)


def open_parquet(path: str | os.PathLike, schema: pa.Schema | None = None) -> pq.ParquetFile:
    """``path`` opened for reading (its footer read), with every column of ``schema``, or a
    :class:`DamagedFile` error naming it: never a pyarrow traceback."""
    try:
        pf = pq.ParquetFile(path)
    except pa.ArrowException as exc:
        raise damaged(path, str(exc)) from None
    if schema is not None:
        missing = [n for n in schema.names if n not in pf.schema_arrow.names]
        if missing:
            raise damaged(path, f"{len(missing)} column(s) missing, first {missing[0]!r}")
    return pf


def iter_batches(source, batch_rows: int, columns=None):
    """Record batches of a Parquet file (a path or a ``pq.ParquetFile``), read one row group
    at a time on the calling thread. pyarrow's reader over the whole file, with its decode
    threads, holds more the larger the file: iterating 60k samples in 1,024-row batches
    peaked at +50 MiB (+70 with threads), a row group at a time at +30, as fast. A file that
    cannot be read is a :class:`DamagedFile` error naming it."""
    path = None if isinstance(source, pq.ParquetFile) else source
    pf = source if path is None else open_parquet(path)
    try:
        for group in range(pf.num_row_groups):
            yield from pf.iter_batches(
                batch_size=batch_rows, row_groups=[group], columns=columns, use_threads=False
            )
    except pa.ArrowException as exc:
        raise damaged(path, str(exc)) from None


def iter_samples(path: str | os.PathLike, batch_rows: int = 256):
    """The samples of a Parquet file, decoded batch by batch (never the whole table at once)."""
    for batch in iter_batches(path, batch_rows):
        table = pa.Table.from_batches([batch]).cast(SAMPLE_SCHEMA)
        yield from (Sample.from_row(r) for r in table.to_pylist())


def write_items(items: Sequence[Item], path: str | os.PathLike) -> Path:
    """Items in row groups of :data:`ITEM_GROUP_ROWS` (never the whole table as Python rows)."""
    with TableWriter(path, ITEM_SCHEMA) as writer:
        for start in range(0, len(items), ITEM_GROUP_ROWS):
            writer.write_table(items_to_table(items[start : start + ITEM_GROUP_ROWS]))
    return Path(path)


ITEM_READ_ROWS = 256  # items decoded at a time: a rendered contour item is ~50 kB as objects


def iter_items(path: str | os.PathLike, batch_rows: int = ITEM_READ_ROWS):
    """The items of a Parquet file, decoded batch by batch."""
    for batch in iter_batches(path, batch_rows):
        table = pa.Table.from_batches([batch]).cast(ITEM_SCHEMA)
        yield from (Item.from_row(r) for r in table.to_pylist())


def read_samples(path: str | os.PathLike) -> list[Sample]:
    return list(iter_samples(path))


def table_root(path: str | os.PathLike) -> Path | None:
    """The folder a converted sample table's ``image`` paths are relative to (recorded by
    ``convert``), or None for a table written without it."""
    metadata = pq.read_schema(path).metadata or {}
    root = metadata.get(ROOT_KEY.encode())
    return Path(root.decode("utf-8")) if root else None


def read_items(path: str | os.PathLike) -> list[Item]:
    return list(iter_items(path))
