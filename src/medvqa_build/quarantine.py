"""Per-file problems: one entry (file, reason) each, so nothing is silently dropped."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from .schema import atomic_path


@dataclass(frozen=True)
class QuarantineEntry:
    """A file (relative to the source root) left out of the sample table, and why."""

    file: str
    reason: str
    source: str = ""
    stage: str = "convert"


def write_quarantine(entries: list[QuarantineEntry], path: str | os.PathLike) -> Path:
    """JSON list of ``{file, reason, source, stage}``, sorted, written atomically."""
    path = Path(path)
    rows = sorted((asdict(e) for e in entries), key=lambda r: (r["file"], r["reason"]))
    tmp = atomic_path(path)
    tmp.write_text(json.dumps(rows, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_quarantine(path: str | os.PathLike) -> list[QuarantineEntry]:
    return [QuarantineEntry(**row) for row in json.loads(Path(path).read_text("utf-8"))]
