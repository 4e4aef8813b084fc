"""The convert stage: one source root -> sample table + quarantine report, with counts.

The stage streams: the source's candidates are split into ``n`` shards (candidate *i* to
shard *i mod n*, see :class:`~medvqa_build.layouts.base.ScanContext`), each shard task writes
its samples to an Arrow IPC shard file in batches of :data:`BATCH_ROWS` rows (lz4: written
and read back at a tenth of Parquet's cost, which would encode and decode every value a
second time), and the shards are merged
back in scan order into ``samples.parquet``. No step holds a whole source in memory, the
tasks run on any :mod:`executor <medvqa_build.executors>`, and the output does not depend on
``n`` or on where the tasks ran.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
from tqdm.auto import tqdm

from ..errors import ImageProblem, SourceError
from ..executors import make_executor
from ..layouts.discovery import RootResolution
from ..media.image import DEFAULT_MAX_PIXELS, pixel_limit
from ..records import QuarantineEntry, Sample
from ..schema import SAMPLE_SCHEMA
from ..sources import ScanStats, get_source
from ..store.atomic import write_atomic
from ..store.limits import read_limits
from ..store.memory import use_returning_memory_pool, worker_budget
from ..store.parquet import (
    GIVEN_KEY,
    ROOT_KEY,
    SampleWriter,
    read_samples,
    samples_to_table,
    table_root,
)
from ..store.paths import (
    contained_path,
    path_problem,
    tree_fingerprint,
)
from ..store.quarantine import read_quarantine, write_quarantine
from ..store.tables import SampleTable
from .base import BuildContext, Stage, StageResult

BATCH_ROWS = 1024  # rows per Parquet batch: the most samples a convert task holds
PARALLEL_FROM = 2000  # files under a root from which convert uses every core by default
MERGE_ROWS = 4096  # rows per batch of the merged table
_KEYS = [("_part", pa.int32()), ("_index", pa.int64())]
SHARD_SCHEMA = pa.schema(list(SAMPLE_SCHEMA) + [pa.field(n, t) for n, t in _KEYS])
# one thread: Arrow's pool would start threads to compress and decompress the buffers, and a
# thread that cannot get its thread-local data under the worker's memory budget (RLIMIT_DATA,
# max_worker_bytes) aborts the process instead of raising
_SHARD_IPC = ipc.IpcWriteOptions(compression="lz4", use_threads=False)
_SHARD_READ = ipc.IpcReadOptions(use_threads=False)


@dataclass
class ConvertResult:
    """Samples and quarantine entries of one source, with counts that add up."""

    source: str
    samples: list[Sample] = field(default_factory=list)
    quarantined: list[QuarantineEntry] = field(default_factory=list)
    # the counts file of the conversion (per part, labels left out, parts missing)
    counts_detail: dict = field(default_factory=dict)
    resolution: RootResolution | None = None
    # the recorded root of a table read back from disk (no resolution was made here)
    table_root: Path | None = None

    @property
    def root(self) -> Path | None:
        """The folder the samples' ``image`` paths are relative to (found from the ROOT given,
        or recorded in the table read back)."""
        return self.resolution.root if self.resolution is not None else self.table_root

    def image_path(self, sample: Sample | str) -> Path:
        """The file of ``sample`` (or of an ``image`` value) under :attr:`root`; refused
        (:class:`ImageProblem`) when the path would leave it."""
        if self.root is None:
            raise ImageProblem("the table records no root; convert it again")
        return contained_path(self.root, sample.image if isinstance(sample, Sample) else sample)

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
        return samples_to_table(self.samples).to_pandas()


def _checked_entries(
    source_id: str,
    root: Path,
    verify: str,
    shard: tuple[int, int],
    stats: ScanStats,
    max_pixels: int | None = DEFAULT_MAX_PIXELS,
) -> Iterator[tuple[int, int, Sample | QuarantineEntry]]:
    """``(part, index, entry)`` of one shard; a sample whose file would leave the source root
    (a symbolic link to a file outside, an absolute path, a ``..``) becomes a quarantine entry
    here, whatever the layout, so no build reads outside the root; so does one whose size is
    over ``max_pixels`` (a layout that reads sizes from somewhere other than an image header).
    One whose file name is not UTF-8 was quarantined by the scan itself
    (:meth:`~medvqa_build.sources.Source.scan_part`)."""
    link_free: set[str] = set()  # folders already seen to hold no symbolic link
    scan = get_source(source_id).scan_indexed(
        root, verify, shard=shard, stats=stats, max_pixels=max_pixels
    )
    for part, index, entry in scan:
        if isinstance(entry, Sample):
            why = path_problem(root, entry.image, link_free)
            if why is None:
                try:
                    pixel_limit(entry.width, entry.height, max_pixels)
                except ImageProblem as exc:
                    why = str(exc)
            if why:
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
    max_pixels: int | None = DEFAULT_MAX_PIXELS


def shard_paths(out: Path, k: int) -> tuple[Path, Path]:
    return out / f"shard-{k:05d}.arrow", out / f"shard-{k:05d}.quarantine.json"


def _stats_path(out: Path, k: int) -> Path:
    return out / f"shard-{k:05d}.stats.json"


def convert_shard(task: ShardTask) -> dict[str, int]:
    """Scan one shard and stream it to ``shard-k.arrow`` (with its scan keys),
    ``shard-k.quarantine.json`` and ``shard-k.stats.json``; returns ``{samples, quarantined}``.

    The progress bar appears with the first candidate, so a layout that stops on a bad
    table first prints its one-line error alone."""
    # each worker (a pool process, or this process for workers=1) converts under the memory
    # budget: a decode past it is that file's quarantine entry (layouts.base), not the machine's
    with worker_budget(read_limits().max_worker_bytes):
        return _convert_shard(task)


def _convert_shard(task: ShardTask) -> dict[str, int]:
    arrow, quarantine_json = shard_paths(task.out, task.k)
    rows: list[dict] = []
    bad: list[tuple[int, int, dict]] = []
    n_samples = 0
    stats = ScanStats()
    bar = None
    with ipc.new_file(arrow, SHARD_SCHEMA, options=_SHARD_IPC) as writer:

        def flush() -> None:
            writer.write_table(pa.Table.from_pylist(rows, schema=SHARD_SCHEMA))
            rows.clear()

        for part, index, entry in _checked_entries(
            task.source_id, task.root, task.verify, (task.k, task.n), stats, task.max_pixels
        ):
            if bar is None:
                bar = tqdm(desc=f"convert {task.source_id}", unit="file", disable=not task.progress)
            bar.update()
            if isinstance(entry, QuarantineEntry):
                bad.append((part, index, asdict(entry)))
                continue
            rows.append({**entry.to_row(arrays=True), "_part": part, "_index": index})
            n_samples += 1
            if len(rows) >= BATCH_ROWS:
                flush()
        if rows:
            flush()
    if bar is not None:
        bar.close()
    quarantine_json.write_text(json.dumps(bad) + "\n", encoding="utf-8")
    _stats_path(task.out, task.k).write_text(json.dumps(stats.to_dict()) + "\n", encoding="utf-8")
    return {"samples": n_samples, "quarantined": len(bad)}


# -- merge -------------------------------------------------------------------------------------


class _ShardReader:
    """Hands out the next ``m`` rows of one shard file, reading it batch by batch."""

    def __init__(self, path: Path):
        self._batches = _shard_batches(path)
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


def _shard_batches(path: Path, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
    """The record batches of one shard file (of :data:`BATCH_ROWS` rows), one at a time."""
    with pa.OSFile(str(path)) as f:
        reader = ipc.open_file(f, options=_SHARD_READ)
        for i in range(reader.num_record_batches):
            batch = reader.get_batch(i)
            yield batch.select(columns) if columns is not None else batch


def _scan_order(files: list[Path]) -> tuple[np.ndarray, set[str]]:
    """Shard number of every sample in scan order, and the sample ids found more than once
    (read from the key and id columns only, as Arrow arrays: a few bytes a sample)."""
    columns = ["_part", "_index", "sample_id"]
    keys = [
        pa.Table.from_batches(
            list(_shard_batches(f, columns)), pa.schema([SHARD_SCHEMA.field(c) for c in columns])
        )
        for f in files
    ]
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


def _root_metadata(resolution: RootResolution | None) -> dict[str, str] | None:
    """The Parquet metadata naming the folder the table's image paths are relative to."""
    if resolution is None:
        return None
    return {ROOT_KEY: str(resolution.root), GIVEN_KEY: str(resolution.given)}


def merge_shards(
    shard_dir: Path, n: int, source_id: str, out: Path, resolution: RootResolution | None = None
) -> dict:
    """Merge the ``n`` shards in scan order into ``out`` (+ quarantine and counts files).

    A sample id seen before is quarantined as a duplicate; the keys columns are dropped. The
    counts add up per source and per part: ``found = converted + quarantined``; labels left
    out of kept samples are counted beside them.
    """
    files = [shard_paths(shard_dir, k)[0] for k in range(n)]
    bad: list[tuple[int, int, dict]] = []
    stats = ScanStats()
    for k in range(n):
        bad += [tuple(e) for e in json.loads(shard_paths(shard_dir, k)[1].read_text("utf-8"))]
        stats.add(json.loads(_stats_path(shard_dir, k).read_text("utf-8")))
    part_names = [p.name for p in get_source(source_id).manifest.parts]
    converted_per_part = Counter()
    order, repeated = _scan_order(files)
    readers = [_ShardReader(f) for f in files]
    seen: set[str] = set()  # only ids that occur more than once
    converted = 0
    with SampleWriter(out, _root_metadata(resolution)) as writer:
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
            converted_per_part.update(table.column("_part").to_pylist())
            table = table.drop_columns([name for name, _ in _KEYS])
            writer.write_table(table.cast(SAMPLE_SCHEMA))
            converted += table.num_rows
    bad.sort(key=lambda b: (b[0], b[1]))
    entries = [QuarantineEntry(**e) for _, _, e in bad]
    write_quarantine(entries, quarantine_path_for(out))
    quarantined_per_part = Counter(part for part, _, _ in bad)
    found_parts = resolution.found if resolution is not None else part_names
    counts = {
        "source": source_id,
        "found": converted + len(entries),
        "converted": converted,
        "quarantined": len(entries),
        **stats.to_dict(),
        "parts": {
            name: {
                "found": converted_per_part[k] + quarantined_per_part[k],
                "converted": converted_per_part[k],
                "quarantined": quarantined_per_part[k],
            }
            for k, name in enumerate(part_names)
            if name in found_parts
        },
        "parts_missing": resolution.missing if resolution is not None else {},
        # what the table's image paths are relative to
        **({"root": str(resolution.root)} if resolution is not None else {}),
    }
    if counts["parts_missing"]:
        lost = get_source(source_id).lost_capabilities(list(counts["parts_missing"]))
        counts["loses"] = sorted(lost)
    _write_counts(out, counts)
    return counts


# -- the stage ---------------------------------------------------------------------------------


def convert_source(
    source_id: str,
    root: str | os.PathLike,
    out: str | os.PathLike,
    verify: str = "header",
    progress: bool = True,
    *,
    workers: int | None = None,
    executor=None,
    shards: int | None = None,
    max_pixels: int | None = DEFAULT_MAX_PIXELS,
) -> dict:
    """Convert a source into ``out`` (Parquet) + ``<out>.quarantine.json`` + ``.counts.json``
    (``medvqa-build convert``).

    ``shards`` (default: the executor's workers) tasks run on ``executor`` (default: a local
    pool of ``workers`` processes, by default every core for a root of
    :data:`PARALLEL_FROM` files or more, see :func:`default_workers`); returns ``{source,
    found, converted, quarantined}``. An image whose header claims more than ``max_pixels``
    is quarantined without being decoded.
    """
    use_returning_memory_pool()
    source = get_source(source_id)
    resolution = source.resolve(root)  # fail with one line before any progress bar is drawn
    root = resolution.root
    out = Path(out)
    own = executor is None
    if own:
        executor = make_executor("local", workers if workers else default_workers(root))
    n = max(1, shards or executor.workers)
    shard_dir = out.with_name(f".{out.name}.shards")
    shutil.rmtree(shard_dir, ignore_errors=True)
    shard_dir.mkdir(parents=True)
    try:
        tasks = [
            ShardTask(source_id, root, verify, k, n, shard_dir, progress and n == 1, max_pixels)
            for k in range(n)
        ]
        bar = None  # drawn once a shard is done: an error before that prints alone
        for _ in executor.map(convert_shard, tasks):
            if bar is None:
                bar = tqdm(
                    total=n, desc=f"convert {source_id} shards", disable=not progress or n == 1
                )
            bar.update()
        if bar is not None:
            bar.close()
        return merge_shards(shard_dir, n, source_id, out, resolution)
    finally:
        if own:
            executor.close()
        shutil.rmtree(shard_dir, ignore_errors=True)


def default_workers(root: Path) -> int:
    """Every core this process may use when ``root`` holds :data:`PARALLEL_FROM` files or
    more, else 1 (a small source converts faster than a process pool starts). The shards'
    output is merged in scan order, so the table is the same bytes either way."""
    if cores() <= 1:
        return 1
    n = 0
    for _, _, files in os.walk(root):
        n += len(files)
        if n >= PARALLEL_FROM:
            return cores()
    return 1


def cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def scan_source(
    source_id: str,
    root: str | os.PathLike,
    verify: str = "header",
    progress: bool = True,
    workers: int = 1,
) -> ConvertResult:
    """A source as an in-memory :class:`ConvertResult`, for notebooks and tests: the stage's
    output (:func:`convert_source` into a temporary folder) read back, so values are exactly what
    a build sees (e.g. coordinates as float32)."""
    import tempfile

    resolution = get_source(source_id).resolve(root)
    with tempfile.TemporaryDirectory(prefix="medvqa-convert-") as tmp:
        out = Path(tmp) / "samples.parquet"
        counts = convert_source(source_id, resolution.root, out, verify, progress, workers=workers)
        return ConvertResult(
            source_id,
            read_samples(out),
            read_quarantine(quarantine_path_for(out)),
            counts,
            resolution,
        )


def nothing_converted(source_id: str, counts: dict, entries: list[QuarantineEntry]) -> SourceError:
    """The one line of a conversion that kept no sample: the most common reasons, and what
    the source's layout expects (``medvqa-build convert`` exits 2 with it)."""
    reasons = Counter(e.reason for e in entries).most_common(3)
    shown = "; ".join(f"{n} x {reason[:200]}" for reason, n in reasons) or "no candidate files"
    expected = _first_sentence(" ".join(get_source(source_id).manifest.layout.split()))
    return SourceError(
        f"{source_id}: converted 0 of {counts['found']} files found ({shown})",
        where=str(quarantine_path_for(Path(counts.get("out", "samples.parquet")))),
        fix=f"the source expects: {expected} (docs/sources/{source_id}.md)",
    )


def _first_sentence(text: str, most: int = 400) -> str:
    end = text.find(". ")
    if 0 < end < most:
        return text[:end]
    return text if len(text) <= most else text[: text.rfind(" ", 0, most)] + " ..."


def open_samples(samples_path: str | os.PathLike, source_id: str = "") -> ConvertResult:
    """A table ``convert`` wrote, read back with its quarantine, counts and recorded root (so
    :meth:`ConvertResult.image_path` finds each file whatever folder ROOT named)."""
    path = Path(samples_path)
    counts_path = path.with_name(path.stem + ".counts.json")
    counts = json.loads(counts_path.read_text("utf-8")) if counts_path.is_file() else {}
    quarantine = quarantine_path_for(path)
    return ConvertResult(
        counts.get("source", source_id),
        read_samples(path),
        read_quarantine(quarantine) if quarantine.is_file() else [],
        counts,
        table_root=table_root(path),
    )


def quarantine_path_for(samples_path: Path) -> Path:
    return samples_path.with_name(samples_path.stem + ".quarantine.json")


def _write_counts(out: Path, counts: dict) -> None:
    write_atomic(out.with_name(out.stem + ".counts.json"), json.dumps(counts, indent=2) + "\n")


class Convert(Stage):
    """Each present source into ``stages/convert/<id>-<fp>/samples.parquet`` (+ quarantine
    and counts), addressed by its manifest, its root's files (names, sizes, times) and the
    verify mode."""

    name = "convert"
    version = 2
    shared_cache = True  # a second build folder over the same download reuses the tables

    def keys(self, ctx: BuildContext) -> list[str]:
        return [spec.id for spec in ctx.recipe.sources]

    def inputs(self, ctx: BuildContext, key: str) -> Any:
        spec = next(s for s in ctx.recipe.sources if s.id == key)
        return {
            "manifest": get_source(key).path.read_text(encoding="utf-8"),
            "tree": tree_fingerprint(ctx.roots[key]),
            "root": str(Path(ctx.roots[key]).resolve()),  # the table records it
            "verify": spec.verify,
            "max_pixels": ctx.recipe.max_pixels,
        }

    def plugins(self, ctx: BuildContext, key: str) -> list[str]:
        """The layouts of the source's parts."""
        return [type(layout).__module__ for _, layout in get_source(key).layouts]

    def run(self, ctx: BuildContext, key: str, out: Path) -> dict[str, Any]:
        spec = next(s for s in ctx.recipe.sources if s.id == key)
        return convert_source(
            key,
            ctx.roots[key],
            out / "samples.parquet",
            verify=spec.verify,
            progress=ctx.progress,
            # no --workers given: a pool of every core for a large source (default_workers)
            executor=None if ctx.default_workers else ctx.executor,
            max_pixels=ctx.recipe.max_pixels,
        )

    def finish(self, ctx: BuildContext, results: list[StageResult]) -> None:
        for key, result in zip(self.keys(ctx), results, strict=True):
            ctx.quarantine += read_quarantine(result.path / "samples.quarantine.json")
            ctx.source_counts[key] = source_counts(result.stats)
        write_quarantine(ctx.quarantine, ctx.out / "quarantine.json")
        # on disk, read a batch at a time by each stage: never every sample in memory
        ctx.samples = SampleTable([r.path / "samples.parquet" for r in results])


_COUNT_KEYS = (
    "found",
    "converted",
    "quarantined",
    "labels_missing",
    "samples_missing_labels",
    "parts",
    "parts_missing",
)


def source_counts(stats: dict) -> dict:
    """A source's counts for the report: found = converted + quarantined, labels left out of
    kept samples, the parts found and missing, and what the missing ones cost."""
    counts = {
        k: stats.get(k, {} if k in ("labels_missing", "parts", "parts_missing") else 0)
        for k in _COUNT_KEYS
    }
    if stats.get("loses"):
        counts["loses"] = stats["loses"]
    if stats.get("notes"):
        counts["notes"] = stats["notes"]
    return counts


__all__ = [
    "ConvertResult",
    "convert_shard",
    "Convert",
    "convert_source",
    "merge_shards",
    "open_samples",
    "scan_source",
]
