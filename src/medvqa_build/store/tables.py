"""Samples and items left on disk and read a batch at a time, so a build of 10^6 images never
holds them all: what the pipeline hands from stage to stage instead of Python lists.

Both tables are re-iterable (each ``for`` starts a fresh read) and know their length from the
Parquet footer. A stage that needs a few samples by id asks :meth:`SampleTable.get`, which
reads only the row groups holding them. Lists still work wherever a table is accepted: the
functions that take one only iterate, take ``len`` and look samples up through
:func:`sample_lookup`.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..records import Item, Sample
from ..schema import ITEM_SCHEMA, SAMPLE_SCHEMA
from ..view import summary_html
from .parquet import BATCH_ROWS, ITEM_READ_ROWS, iter_batches, open_parquet

SHOWN = 4  # items an ItemTable shows in a notebook
DECODE_ROWS = 256  # Arrow rows turned into Python dicts at a time (a mask's runs as ints
# are ~10x their packed size: a whole 4096-row batch of dicts would be the peak)


def _rows(table: pa.Table, schema: pa.Schema) -> Iterator[dict]:
    table = table.cast(schema)
    for start in range(0, table.num_rows, DECODE_ROWS):
        yield from table.slice(start, DECODE_ROWS).to_pylist()


class SampleTable:
    """The samples of one or more Parquet files (the convert stage's outputs, in order),
    less the ids in ``exclude`` (e.g. removed by curation)."""

    def __init__(
        self, paths: Iterable[str | os.PathLike], exclude: Iterable[str] = (), batch_rows: int = 0
    ):
        self.paths = [Path(p) for p in paths]
        self.exclude = frozenset(exclude)
        self.batch_rows = batch_rows or BATCH_ROWS
        self._len: int | None = None
        self._index: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        if self._len is None:
            if self.exclude:
                self._len = sum(1 for sid in self.ids() if sid not in self.exclude)
            else:
                self._len = sum(open_parquet(p).metadata.num_rows for p in self.paths)
        return self._len

    def __iter__(self) -> Iterator[Sample]:
        for batch in self.batches():
            yield from batch

    def __bool__(self) -> bool:
        return len(self) > 0

    def batches(self) -> Iterator[list[Sample]]:
        """Lists of at most ``batch_rows`` samples, in table order."""
        for batch in self.numbered_batches():
            yield [s for _, s in batch]

    def numbered_batches(self) -> Iterator[list[tuple[int, Sample]]]:
        """Like :meth:`batches`, each sample with its row number (for :meth:`take`)."""
        offset = 0
        for table in self._tables():
            yield [
                (offset + k, Sample.from_row(r))
                for k, r in enumerate(_rows(table, SAMPLE_SCHEMA))
                if r["sample_id"] not in self.exclude
            ]
            offset += table.num_rows

    def take(self, rows: Iterable[int]) -> dict[int, Sample]:
        """The samples at these row numbers (from :meth:`numbered_batches`), reading each
        Parquet row group that holds one of them once."""
        return self._at_rows(rows, None)

    def take_fields(self, rows: Iterable[int], columns: Sequence[str]) -> dict[int, dict]:
        """Like :meth:`take`, only ``columns`` of each (a dict per sample), reading just
        those columns of the row groups."""
        return self._at_rows(rows, list(columns))

    def _at_rows(self, rows: Iterable[int], columns: list[str] | None) -> dict:
        wanted = np.unique(np.fromiter(rows, dtype=np.int64))
        out: dict = {}
        start = 0
        for path in self.paths:
            n = pq.ParquetFile(path).metadata.num_rows
            mine = wanted[(wanted >= start) & (wanted < start + n)]
            if len(mine):
                got = _read_rows(path, mine - start, columns)
                out.update((int(r), s) for r, s in zip(mine, got, strict=True))
            start += n
        return out

    def _tables(self, columns: Sequence[str] | None = None) -> Iterator[pa.Table]:
        for path in self.paths:
            for batch in iter_batches(path, self.batch_rows, columns):
                yield pa.Table.from_batches([batch])

    def to_arrow(self) -> pa.Table:
        """The whole table in Arrow (columnar, compact), e.g. for pandas."""
        tables = [pq.read_table(p).cast(SAMPLE_SCHEMA) for p in self.paths]
        table = pa.concat_tables(tables) if tables else SAMPLE_SCHEMA.empty_table()
        if self.exclude:
            keep = pc.invert(pc.is_in(table.column("sample_id"), pa.array(sorted(self.exclude))))
            table = table.filter(keep)
        return table

    def ids(self) -> Iterator[str]:
        """Every sample id, in order (one column read; the excluded ones included)."""
        for table in self._tables(["sample_id"]):
            yield from table.column("sample_id").to_pylist()

    def _build_index(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sorted ids with their (file, row) — a few bytes a sample, built on first lookup."""
        keys, files, rows = [], [], []
        for f, path in enumerate(self.paths):
            n = 0
            # a row group at a time: a Python object per id lives only for its group
            for batch in iter_batches(path, self.batch_rows, ["sample_id"]):
                col = batch.column(0).cast(pa.binary())
                keys.append(np.array(col.to_numpy(zero_copy_only=False), dtype=bytes))
                n += len(col)
            files.append(np.full(n, f, dtype=np.int32))
            rows.append(np.arange(n, dtype=np.int64))
        # fixed-width UTF-8 bytes: no Python object per id, a byte a character
        encoded = np.concatenate(keys) if keys else np.array([], dtype=bytes)
        del keys
        order = np.argsort(encoded, kind="stable")
        return (
            encoded[order],
            np.concatenate(files)[order] if files else np.array([], np.int32),
            np.concatenate(rows)[order] if rows else np.array([], np.int64),
        )

    def get(self, sample_ids: Iterable[str]) -> dict[str, Sample]:
        """The samples with these ids (absent or excluded ids are left out), reading only the
        row groups that hold them."""
        return {s.sample_id: s for s in self._by_ids(sample_ids, None)}

    def get_fields(self, sample_ids: Iterable[str], columns: Sequence[str]) -> dict[str, dict]:
        """Like :meth:`get`, only ``columns`` of each (a dict per sample, ``sample_id``
        always among them): the row groups holding them are read for those columns only
        (a sample's regions and masks are most of a row group)."""
        columns = list(dict.fromkeys(["sample_id", *columns]))
        return {r["sample_id"]: r for r in self._by_ids(sample_ids, columns)}

    def _by_ids(self, sample_ids: Iterable[str], columns: list[str] | None) -> list:
        wanted = sorted({s for s in sample_ids if s not in self.exclude})
        if not wanted:
            return []
        if self._index is None:
            self._index = self._build_index()
        keys, files, rows = self._index
        q = np.array([w.encode() for w in wanted], dtype=bytes)
        pos = np.searchsorted(keys, q)
        pos = np.minimum(pos, max(len(keys) - 1, 0))
        hit = (keys[pos] == q) if len(keys) else np.zeros(len(q), bool)
        out: list = []
        for f in np.unique(files[pos[hit]]) if hit.any() else ():
            wanted_rows = np.sort(rows[pos[hit]][files[pos[hit]] == f])
            out += _read_rows(self.paths[int(f)], wanted_rows, columns)
        return out

    def __repr__(self) -> str:
        return f"SampleTable({[str(p) for p in self.paths]}, {len(self)} samples)"


def _read_rows(path: Path, rows: np.ndarray, columns: list[str] | None = None) -> list:
    """Samples at sorted, distinct row numbers of one file, in that order: each row group
    that holds one is read once; with ``columns``, only those columns, as dicts."""
    pf = pq.ParquetFile(path)
    starts = np.cumsum([0] + [pf.metadata.row_group(i).num_rows for i in range(pf.num_row_groups)])
    out: list = []
    groups = np.searchsorted(starts, rows, side="right") - 1
    for g in np.unique(groups):
        local = rows[groups == g] - starts[g]
        table = pf.read_row_group(int(g), columns=columns).take(pa.array(local))
        if columns is None:
            out += [Sample.from_row(r) for r in _rows(table, SAMPLE_SCHEMA)]
        else:
            out += table.to_pylist()
    return out


class ItemTable:
    """The items of one Parquet file, read :data:`ITEM_READ_ROWS` at a time on each pass."""

    def __init__(self, path: str | os.PathLike, batch_rows: int = 0):
        self.path = Path(path)
        self.batch_rows = batch_rows or ITEM_READ_ROWS
        self._len: int | None = None

    def __len__(self) -> int:
        if self._len is None:
            self._len = open_parquet(self.path, ITEM_SCHEMA).metadata.num_rows
        return self._len

    def __bool__(self) -> bool:
        return len(self) > 0

    def __iter__(self) -> Iterator[Item]:
        for batch in self.batches():
            yield from batch

    def batches(self) -> Iterator[list[Item]]:
        """Lists of at most ``batch_rows`` items, in file order."""
        for batch in iter_batches(self.path, self.batch_rows):
            yield [Item.from_row(r) for r in _rows(pa.Table.from_batches([batch]), ITEM_SCHEMA)]

    def rows(self, wanted: Iterable[int]) -> Iterator[list[Item]]:
        """The items at these row numbers, in file order, in lists of at most ``batch_rows``:
        only they are turned into objects (a sample of a large build is read in one pass
        without decoding the rest)."""
        want = np.unique(np.fromiter(wanted, dtype=np.int64))
        start = 0
        for batch in iter_batches(self.path, self.batch_rows):
            end = start + batch.num_rows
            lo, hi = np.searchsorted(want, (start, end))
            if hi > lo:
                table = pa.Table.from_batches([batch.take(pa.array(want[lo:hi] - start))])
                yield [Item.from_row(r) for r in _rows(table, ITEM_SCHEMA)]
            start = end

    def to_arrow(self) -> pa.Table:
        """The whole table in Arrow (columnar, compact), e.g. for pandas."""
        return pq.read_table(self.path).cast(ITEM_SCHEMA)

    def column(self, name: str) -> list:
        """One column of every item (cheap: read without decoding the rest)."""
        return pq.read_table(self.path, columns=[name]).column(name).to_pylist()

    def distinct(self, name: str) -> list:
        """The values one column takes, sorted (a column read, no Python object per row)."""
        return sorted(pc.unique(pq.read_table(self.path, columns=[name]).column(name)).to_pylist())

    def shape_kinds(self, prompt_level: str) -> list[str]:
        """The kinds of the shapes planned on the items of one prompt level, sorted (two
        columns read, no Python object per row)."""
        table = pq.read_table(
            self.path,
            columns=["prompt_level", "prompt_geometry"],
            filters=[("prompt_level", "=", prompt_level)],
        )
        shapes = pc.list_flatten(table.column("prompt_geometry"))
        return sorted(k for k in pc.unique(pc.struct_field(shapes, "kind")).to_pylist() if k)

    def where(self, column: str, value) -> Iterator[Item]:
        """The items whose ``column`` equals ``value`` (a filtered read, batch by batch)."""
        for batch in iter_batches(self.path, self.batch_rows):
            table = pa.Table.from_batches([batch])
            table = table.filter(pc.equal(table.column(column), value))
            yield from (Item.from_row(r) for r in _rows(table, ITEM_SCHEMA))

    def __repr__(self) -> str:
        return f"ItemTable({str(self.path)!r}, {len(self)} items)"

    def _repr_html_(self) -> str:
        """A notebook's view: the item count per task and the first :data:`SHOWN` items."""
        tasks = Counter(self.column("task")) if len(self) else Counter()
        rows = [("file", str(self.path)), ("items", len(self))]
        rows += [(f"task: {t}", n) for t, n in sorted(tasks.items())]
        first = next(self.rows(range(min(SHOWN, len(self)))), [])
        return summary_html("ItemTable", rows, first)


def batched(items: Iterable, size: int = BATCH_ROWS) -> Iterator[list]:
    """Consecutive lists of at most ``size`` elements (a table's batches, or a list cut up)."""
    if hasattr(items, "batches") and getattr(items, "batch_rows", None) == size:
        yield from items.batches()
        return
    chunk: list = []
    for x in items:
        chunk.append(x)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class SampleList:
    """A list of samples behind :class:`SampleTable`'s reading interface (for callers that
    already hold their samples: tests, notebooks)."""

    def __init__(self, samples: Iterable[Sample], batch_rows: int = BATCH_ROWS):
        self.samples = list(samples)
        self.batch_rows = batch_rows
        self._by_id: dict[str, Sample] | None = None

    def __len__(self) -> int:
        return len(self.samples)

    def __iter__(self) -> Iterator[Sample]:
        return iter(self.samples)

    def numbered_batches(self) -> Iterator[list[tuple[int, Sample]]]:
        for start in range(0, len(self.samples), self.batch_rows):
            chunk = self.samples[start : start + self.batch_rows]
            yield list(enumerate(chunk, start))

    def take(self, rows: Iterable[int]) -> dict[int, Sample]:
        return {int(r): self.samples[r] for r in rows}

    def get(self, sample_ids: Iterable[str]) -> dict[str, Sample]:
        if self._by_id is None:
            self._by_id = {s.sample_id: s for s in self.samples}
        return {i: self._by_id[i] for i in sample_ids if i in self._by_id}

    def take_fields(self, rows: Iterable[int], columns: Sequence[str]) -> dict[int, dict]:
        return {r: _fields(s, columns) for r, s in self.take(rows).items()}

    def get_fields(self, sample_ids: Iterable[str], columns: Sequence[str]) -> dict[str, dict]:
        columns = list(dict.fromkeys(["sample_id", *columns]))
        return {i: _fields(s, columns) for i, s in self.get(sample_ids).items()}


def _fields(sample: Sample, columns: Sequence[str]) -> dict:
    """``columns`` of a sample as a table row holds them."""
    row = sample.to_row()
    return {c: row[c] for c in columns}


def as_sample_source(samples) -> SampleTable | SampleList:
    """A :class:`SampleTable` as it is; anything else (a list, an iterator) as a SampleList."""
    return samples if isinstance(samples, SampleTable | SampleList) else SampleList(samples)


SampleLookup = Callable[[Iterable[str]], Mapping[str, Sample]]


def sample_lookup(samples: SampleTable | Mapping[str, Sample] | Iterable[Sample]) -> SampleLookup:
    """``ids -> {id: Sample}`` over a table (reads only what is asked), a dict or a list."""
    if isinstance(samples, SampleTable):
        return samples.get
    if not isinstance(samples, Mapping):
        samples = {s.sample_id: s for s in samples}
    return lambda ids: {i: samples[i] for i in ids if i in samples}
