"""The convert stage: one source root -> sample table + quarantine report, with counts."""

from __future__ import annotations

import json
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from .layouts.base import contained_path
from .media.image import ImageProblem
from .quarantine import QuarantineEntry, write_quarantine
from .records import Sample
from .schema import atomic_path, write_samples
from .sources import get_source


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


def _scan_shard(args: tuple[str, Path, str, int, int]) -> list:
    source_id, root, verify, k, n = args
    return list(get_source(source_id).scan_indexed(root, verify, shard=(k, n)))


def _entries(source, root: Path, verify: str, workers: int):
    """Every entry in scan order; with ``workers`` > 1 shards scan in parallel processes and
    are merged back into the same order, so the result does not depend on ``workers``."""
    if workers <= 1:
        yield from source.scan(root, verify=verify)
        return
    jobs = [(source.id, root, verify, k, workers) for k in range(workers)]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        parts = list(pool.map(_scan_shard, jobs))
    merged = sorted((e for part in parts for e in part), key=lambda e: (e[0], e[1]))
    for _, _, entry in merged:
        yield entry


def scan_source(
    source_id: str,
    root: str | os.PathLike,
    verify: str = "header",
    progress: bool = True,
    workers: int = 1,
) -> ConvertResult:
    """Scan a source root into a :class:`ConvertResult` (nothing written); ``workers`` > 1
    shards the per-file work of shardable layouts over processes (same result)."""
    source = get_source(source_id)
    root = source.check_root(root)  # fail with one line before any progress bar is drawn
    result = ConvertResult(source_id)
    seen: set[str] = set()
    bar = tqdm(desc=f"convert {source_id}", unit="file", disable=not progress, leave=False)
    for entry in _entries(source, root, verify, workers):
        bar.update()
        if isinstance(entry, QuarantineEntry):
            result.quarantined.append(entry)
        elif (escape := _escapes(root, entry.image)) is not None:
            result.quarantined.append(QuarantineEntry(entry.image, escape, source_id))
        elif entry.sample_id in seen:
            result.quarantined.append(
                QuarantineEntry(entry.image, f"duplicate sample id {entry.sample_id}", source_id)
            )
        else:
            seen.add(entry.sample_id)
            result.samples.append(entry)
    bar.close()
    result.samples.sort(key=lambda s: s.sample_id)
    return result


def _escapes(root: Path, rel: str) -> str | None:
    """Why a sample's file would leave the source root (a symbolic link to a file outside,
    an absolute path, a ``..``), or None: whatever the layout, no build reads outside it."""
    try:
        contained_path(root, rel)
    except ImageProblem as exc:
        return str(exc)
    return None


def quarantine_path_for(samples_path: Path) -> Path:
    return samples_path.with_name(samples_path.stem + ".quarantine.json")


def write_convert_result(result: ConvertResult, out: str | os.PathLike) -> dict:
    """Write ``out`` (Parquet), ``<out>.quarantine.json`` and ``<out>.counts.json``."""
    out = Path(out)
    write_samples(result.samples, out)
    write_quarantine(result.quarantined, quarantine_path_for(out))
    counts = {"source": result.source, **result.counts()}
    counts_path = out.with_name(out.stem + ".counts.json")
    tmp = atomic_path(counts_path)
    tmp.write_text(json.dumps(counts, indent=2) + "\n")
    os.replace(tmp, counts_path)
    return counts


def convert_source(
    source_id: str,
    root: str | os.PathLike,
    out: str | os.PathLike,
    verify: str = "header",
    progress: bool = True,
) -> dict:
    """Scan and write; returns the counts ``{source, found, converted, quarantined}``."""
    result = scan_source(source_id, root, verify=verify, progress=progress)
    return write_convert_result(result, out)


def summarize_quarantine(entries: list[QuarantineEntry], limit: int = 5) -> list[str]:
    return [f"{e.file}: {e.reason}" for e in entries[:limit]]


__all__ = ["ConvertResult", "scan_source", "convert_source", "write_convert_result", "asdict"]
