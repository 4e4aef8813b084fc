"""Arrow schemas and Hugging Face ``Features`` of the Sample and Item tables (a contract).

The Parquet files between stages use these schemas exactly; :func:`write_table` writes
deterministically (sorted input, fixed writer options) and atomically.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .records import Item, Sample

_f32 = pa.float32()
_point = pa.list_(_f32)

MASK_TYPE = pa.struct(
    [
        ("path", pa.string()),
        ("value", pa.int32()),
        ("size", pa.list_(pa.int32())),
        ("counts", pa.list_(pa.int32())),
    ]
)

REGION_TYPE = pa.struct(
    [
        ("label", pa.string()),
        ("bbox", pa.list_(_f32, 4)),
        ("mask", MASK_TYPE),
        ("polygon", pa.list_(_point)),
        ("points", pa.list_(_point)),
        ("level", pa.string()),
    ]
)

SAMPLE_SCHEMA = pa.schema(
    [
        ("sample_id", pa.string()),
        ("source", pa.string()),
        ("image", pa.string()),
        ("frame", pa.int32()),
        ("slice", pa.struct([("axis", pa.string()), ("index", pa.int32())])),
        ("width", pa.int32()),
        ("height", pa.int32()),
        ("modality", pa.string()),
        ("scene", pa.string()),
        ("labels", pa.list_(pa.string())),
        ("attributes", pa.map_(pa.string(), pa.string())),
        ("regions", pa.list_(REGION_TYPE)),
        ("group_id", pa.string()),
        ("split", pa.string()),
    ]
)

DRAWN_SHAPE_TYPE = pa.struct(
    [
        ("image_index", pa.int32()),
        ("kind", pa.string()),
        ("label", pa.string()),
        ("color", pa.string()),
        ("bbox", pa.list_(_f32, 4)),
        ("polygon", pa.list_(_point)),
        ("point", pa.list_(_f32, 2)),
        ("mask", MASK_TYPE),
        ("thickness_px", pa.int32()),
    ]
)

NEGATIVES_TYPE = pa.struct(
    [
        ("strategy", pa.string()),
        ("candidates", pa.list_(pa.string())),
        ("scores", pa.list_(_f32)),
        ("pool_size", pa.int32()),
    ]
)

ITEM_SCHEMA = pa.schema(
    [
        ("item_id", pa.string()),
        ("benchmark", pa.string()),
        ("category", pa.string()),
        ("task", pa.string()),
        ("subtask", pa.string()),
        ("scene", pa.string()),
        ("source", pa.string()),
        ("sample_ids", pa.list_(pa.string())),
        ("images", pa.list_(pa.string())),
        ("question", pa.string()),
        ("options", pa.list_(pa.string())),
        ("answer", pa.string()),
        ("gt", pa.string()),
        ("answer_bbox", pa.list_(_f32, 4)),
        ("coord_format", pa.string()),
        ("prompt_level", pa.string()),
        ("prompt_geometry", pa.list_(DRAWN_SHAPE_TYPE)),
        ("negatives", NEGATIVES_TYPE),
        ("template_id", pa.string()),
        ("split", pa.string()),
        ("licence", pa.string()),
    ]
)


def _hf_features(schema: pa.Schema):
    """HF ``Features`` of a schema. HF has no map type, so a map becomes a key/value list."""
    from datasets import Features

    fields = []
    for f in schema:
        if pa.types.is_map(f.type):
            kv = pa.struct([("key", f.type.key_type), ("value", f.type.item_type)])
            fields.append(pa.field(f.name, pa.list_(kv)))
        else:
            fields.append(f)
    return Features.from_arrow_schema(pa.schema(fields))


def sample_features():
    """HF ``Features`` of the Sample table (``attributes`` as a list of key/value structs)."""
    return _hf_features(SAMPLE_SCHEMA)


def item_features():
    """HF ``Features`` of the Item table (image references as strings)."""
    return _hf_features(ITEM_SCHEMA)


def samples_to_table(samples: Iterable[Sample]) -> pa.Table:
    return pa.Table.from_pylist([s.to_row() for s in samples], schema=SAMPLE_SCHEMA)


def items_to_table(items: Iterable[Item]) -> pa.Table:
    return pa.Table.from_pylist([i.to_row() for i in items], schema=ITEM_SCHEMA)


def table_to_samples(table: pa.Table) -> list[Sample]:
    return [Sample.from_row(r) for r in table.to_pylist()]


def table_to_items(table: pa.Table) -> list[Item]:
    return [Item.from_row(r) for r in table.to_pylist()]


def use_returning_memory_pool() -> None:
    """Let Arrow give freed memory back to the system.

    Arrow's default pool (mimalloc) keeps freed pages, so the resident memory of a stage
    that streams batch after batch creeps up with the data (measured: convert of 20k samples
    148 MiB above the interpreter with mimalloc, 87 MiB with the system allocator). Left
    alone when the user chose a pool with ``ARROW_DEFAULT_MEMORY_POOL``.
    """
    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
        pa.set_memory_pool(pa.system_memory_pool())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_path(path: Path):
    """A temp path in the same directory; the caller renames it over ``path`` when done.

    The file gets ordinary permissions (0666 less the umask), not mkstemp's private 0600,
    so a build can be shared.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o666 & ~_umask())
    os.close(fd)
    return Path(tmp)


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


class SampleWriter(TableWriter):
    """Streams samples (or sample tables) into a Parquet file of :data:`SAMPLE_SCHEMA`."""

    def __init__(self, path: str | os.PathLike):
        super().__init__(path, SAMPLE_SCHEMA)

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


def iter_batches(source, batch_rows: int, columns=None):
    """Record batches of a Parquet file (a path or a ``pq.ParquetFile``), read one row group
    at a time on the calling thread. pyarrow's reader over the whole file, with its decode
    threads, holds more the larger the file: iterating 60k samples in 1,024-row batches
    peaked at +50 MiB (+70 with threads), a row group at a time at +30, as fast."""
    pf = source if isinstance(source, pq.ParquetFile) else pq.ParquetFile(source)
    for group in range(pf.num_row_groups):
        yield from pf.iter_batches(
            batch_size=batch_rows, row_groups=[group], columns=columns, use_threads=False
        )


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


def read_items(path: str | os.PathLike) -> list[Item]:
    return list(iter_items(path))
