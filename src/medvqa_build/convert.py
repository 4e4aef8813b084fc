"""The convert stage: one source root -> sample table + quarantine report, with counts.

The stage streams: the source's candidates are split into ``n`` shards (candidate *i* to
shard *i mod n*, see :class:`~medvqa_build.layouts.base.ScanContext`), each shard task writes
its samples to a Parquet shard in batches of :data:`BATCH_ROWS` rows, and the shards are merged
back in scan order into ``samples.parquet``. No step holds a whole source in memory, the
tasks run on any :mod:`executor <medvqa_build.executors>`, and the output does not depend on
``n`` or on where the tasks ran.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from .layouts.base import path_problem
from .quarantine import QuarantineEntry, write_quarantine
from .records import Sample
from .schema import (
    SAMPLE_SCHEMA,
    SampleWriter,
    atomic_path,
    iter_batches,
    use_returning_memory_pool,
    write_samples,
)
from .sources import get_source

BATCH_ROWS = 1024  # rows per Parquet batch: the most samples a convert task holds
MERGE_ROWS = 4096  # rows per batch of the merged table
_KEYS = [("_part", pa.int32()), ("_index", pa.int64())]
SHARD_SCHEMA = pa.schema(list(SAMPLE_SCHEMA) + [pa.field(n, t) for n, t in _KEYS])


@dataclass
class ConvertResult:
    """Samples and quarantine entries of one source, with counts that add up."""

    source: str
    samples: list[Sample] = field(default_factory=list)
    quarantined: list[QuarantineEntry] = field(default_factory=list)

    @property
    def found(self) -> int:
        return len(self.samples) + len(self.quarantined)

    def counts(self) -> dict[str, int]:
        return {
            "found": self.found,
            "converted": len(self.samples),
            "quarantined": len(self.quarantined),
        }

    def to_pandas(self):
        """The sample table as a pandas DataFrame (for notebooks)."""
        from .schema import samples_to_table

        return samples_to_table(self.samples).to_pandas()


def _checked_entries(
    source_id: str, root: Path, verify: str, shard: tuple[int, int]
) -> Iterator[tuple[int, int, Sample | QuarantineEntry]]:
    """``(part, index, entry)`` of one shard; a sample whose file would leave the source root
    (a symbolic link to a file outside, an absolute path, a ``..``) becomes a quarantine entry
    here, whatever the layout, so no build reads outside the root."""
    link_free: set[str] = set()  # folders already seen to hold no symbolic link
    for part, index, entry in get_source(source_id).scan_indexed(root, verify, shard=shard):
        if isinstance(entry, Sample) and (why := path_problem(root, entry.image, link_free)):
            entry = QuarantineEntry(entry.image, why, source_id)
        yield part, index, entry


# -- one shard ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShardTask:
    """Shard ``k`` of ``n`` of one source, written into ``out`` (picklable, for executors)."""

    source_id: str
    root: Path
    verify: str
    k: int
    n: int
    out: Path
    progress: bool = False


def shard_paths(out: Path, k: int) -> tuple[Path, Path]:
    return out / f"shard-{k:05d}.parquet", out / f"shard-{k:05d}.quarantine.json"


def convert_shard(task: ShardTask) -> dict[str, int]:
    """Scan one shard and stream it to ``shard-k.parquet`` (with its scan keys) and
    ``shard-k.quarantine.json``; returns ``{samples, quarantined}``."""
    parquet, quarantine_json = shard_paths(task.out, task.k)
    rows: list[dict] = []
    bad: list[tuple[int, int, dict]] = []
    n_samples = 0
    bar = tqdm(desc=f"convert {task.source_id}", unit="file", disable=not task.progress)
    with pq.ParquetWriter(parquet, SHARD_SCHEMA, compression="zstd") as writer:

        def flush() -> None:
            writer.write_table(pa.Table.from_pylist(rows, schema=SHARD_SCHEMA))
            rows.clear()

        for part, index, entry in _checked_entries(
            task.source_id, task.root, task.verify, (task.k, task.n)
        ):
            bar.update()
            if isinstance(entry, QuarantineEntry):
                bad.append((part, index, asdict(entry)))
                continue
            rows.append({**entry.to_row(), "_part": part, "_index": index})
            n_samples += 1
            if len(rows) >= BATCH_ROWS:
                flush()
        if rows:
            flush()
    bar.close()
    quarantine_json.write_text(json.dumps(bad) + "\n", encoding="utf-8")
    return {"samples": n_samples, "quarantined": len(bad)}


# -- merge -------------------------------------------------------------------------------------


class _ShardReader:
    """Hands out the next ``m`` rows of one shard file, reading it batch by batch."""

    def __init__(self, path: Path):
        self._batches = iter_batches(path, BATCH_ROWS)
        self._buffer: pa.Table | None = None

    def take(self, m: int) -> pa.Table:
        parts = []
        while m > 0:
            if self._buffer is None or self._buffer.num_rows == 0:
                self._buffer = pa.Table.from_batches([next(self._batches)])
            piece = self._buffer.slice(0, m)
            self._buffer = self._buffer.slice(piece.num_rows)
            parts.append(piece)
            m -= piece.num_rows
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def _scan_order(files: list[Path]) -> tuple[np.ndarray, set[str]]:
    """Shard number of every sample in scan order, and the sample ids found more than once
    (read from the key and id columns only, as Arrow arrays: a few bytes a sample)."""
    keys = [pq.read_table(f, columns=["_part", "_index", "sample_id"]) for f in files]
    part = np.concatenate([t.column("_part").to_numpy() for t in keys])
    index = np.concatenate([t.column("_index").to_numpy() for t in keys])
    shard = np.concatenate([np.full(t.num_rows, k, np.int32) for k, t in enumerate(keys)])
    ids = pa.chunked_array([c for t in keys for c in t.column("sample_id").chunks], pa.string())
    counts = pc.value_counts(ids) if len(ids) else None
    repeated = (
        set()
        if counts is None
        else set(counts.field("values").filter(pc.greater(counts.field("counts"), 1)).to_pylist())
    )
    return shard[np.lexsort((index, part))], repeated


def merge_shards(shard_dir: Path, n: int, source_id: str, out: Path) -> dict[str, int]:
    """Merge the ``n`` shards in scan order into ``out`` (+ quarantine and counts files).

    A sample id seen before is quarantined as a duplicate; the keys columns are dropped.
    """
    files = [shard_paths(shard_dir, k)[0] for k in range(n)]
    bad: list[tuple[int, int, dict]] = []
    for k in range(n):
        bad += [tuple(e) for e in json.loads(shard_paths(shard_dir, k)[1].read_text("utf-8"))]
    order, repeated = _scan_order(files)
    readers = [_ShardReader(f) for f in files]
    seen: set[str] = set()  # only ids that occur more than once
    converted = 0
    with SampleWriter(out) as writer:
        for start in range(0, len(order), MERGE_ROWS):
            chunk = order[start : start + MERGE_ROWS]
            sizes = np.bincount(chunk, minlength=n)
            combined = pa.concat_tables([readers[k].take(int(m)) for k, m in enumerate(sizes) if m])
            # rows of ``combined`` are grouped by shard; put them back in scan order
            grouped = np.argsort(chunk, kind="stable")
            inverse = np.empty_like(grouped)
            inverse[grouped] = np.arange(len(grouped))
            table = combined.take(pa.array(inverse))
            if repeated:
                keep = []
                for i, sid in enumerate(table.column("sample_id").to_pylist()):
                    first = sid not in repeated or sid not in seen
                    keep.append(first)
                    if sid in repeated and first:
                        seen.add(sid)
                    elif not first:
                        row = table.slice(i, 1).to_pylist()[0]
                        entry = QuarantineEntry(
                            row["image"], f"duplicate sample id {sid}", source_id
                        )
                        bad.append((row["_part"], row["_index"], asdict(entry)))
                table = table.filter(pa.array(keep))
            table = table.drop_columns([name for name, _ in _KEYS])
            writer.write_table(table.cast(SAMPLE_SCHEMA))
            converted += table.num_rows
    entries = [QuarantineEntry(**e) for _, _, e in sorted(bad, key=lambda b: (b[0], b[1]))]
    write_quarantine(entries, quarantine_path_for(out))
    counts = {
        "source": source_id,
        "found": converted + len(entries),
        "converted": converted,
        "quarantined": len(entries),
    }
    _write_counts(out, counts)
    return counts


# -- the stage ---------------------------------------------------------------------------------


def convert_to(
    source_id: str,
    root: str | os.PathLike,
    out: str | os.PathLike,
    verify: str = "header",
    progress: bool = True,
    workers: int = 1,
    executor=None,
    shards: int | None = None,
) -> dict:
    """Convert a source into ``out`` (Parquet) + ``<out>.quarantine.json`` + ``.counts.json``.

    ``shards`` (default: the executor's workers) tasks run on ``executor`` (default: a local
    pool of ``workers`` processes); returns ``{source, found, converted, quarantined}``.
    """
    from .executors import make_executor

    use_returning_memory_pool()
    source = get_source(source_id)
    root = source.check_root(root)  # fail with one line before any progress bar is drawn
    out = Path(out)
    own = executor is None
    executor = make_executor("local", workers) if own else executor
    n = max(1, shards or executor.workers)
    shard_dir = out.with_name(f".{out.name}.shards")
    shutil.rmtree(shard_dir, ignore_errors=True)
    shard_dir.mkdir(parents=True)
    try:
        tasks = [
            ShardTask(source_id, root, verify, k, n, shard_dir, progress and n == 1)
            for k in range(n)
        ]
        bar = tqdm(total=n, desc=f"convert {source_id} shards", disable=not progress or n == 1)
        for _ in executor.map(convert_shard, tasks):
            bar.update()
        bar.close()
        return merge_shards(shard_dir, n, source_id, out)
    finally:
        if own:
            executor.close()
        shutil.rmtree(shard_dir, ignore_errors=True)


def scan_source(
    source_id: str,
    root: str | os.PathLike,
    verify: str = "header",
    progress: bool = True,
    workers: int = 1,
) -> ConvertResult:
    """A source as an in-memory :class:`ConvertResult`, for notebooks and tests: the stage's
    output (:func:`convert_to` into a temporary folder) read back, so values are exactly what
    a build sees (e.g. coordinates as float32)."""
    import tempfile

    from .quarantine import read_quarantine
    from .schema import read_samples

    root = get_source(source_id).check_root(root)
    with tempfile.TemporaryDirectory(prefix="medvqa-convert-") as tmp:
        out = Path(tmp) / "samples.parquet"
        convert_to(source_id, root, out, verify, progress, workers=workers)
        return ConvertResult(
            source_id, read_samples(out), read_quarantine(quarantine_path_for(out))
        )


def quarantine_path_for(samples_path: Path) -> Path:
    return samples_path.with_name(samples_path.stem + ".quarantine.json")


def _write_counts(out: Path, counts: dict) -> None:
    counts_path = out.with_name(out.stem + ".counts.json")
    tmp = atomic_path(counts_path)
    tmp.write_text(json.dumps(counts, indent=2) + "\n")
    os.replace(tmp, counts_path)


def write_convert_result(result: ConvertResult, out: str | os.PathLike) -> dict:
    """Write an in-memory result: ``out`` (Parquet), ``<out>.quarantine.json``, ``.counts.json``."""
    out = Path(out)
    write_samples(result.samples, out)
    write_quarantine(result.quarantined, quarantine_path_for(out))
    counts = {"source": result.source, **result.counts()}
    _write_counts(out, counts)
    return counts


def convert_source(
    source_id: str,
    root: str | os.PathLike,
    out: str | os.PathLike,
    verify: str = "header",
    progress: bool = True,
    workers: int = 1,
) -> dict:
    """Convert and write; returns the counts ``{source, found, converted, quarantined}``."""
    return convert_to(source_id, root, out, verify, progress, workers=workers)


def summarize_quarantine(entries: list[QuarantineEntry], limit: int = 5) -> list[str]:
    return [f"{e.file}: {e.reason}" for e in entries[:limit]]


__all__ = [
    "ConvertResult",
    "convert_shard",
    "convert_source",
    "convert_to",
    "merge_shards",
    "scan_source",
    "write_convert_result",
]
