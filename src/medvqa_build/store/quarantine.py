"""Quarantine files: one JSON entry (file, reason, source, stage) per thing left out."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

from ..records import QuarantineEntry
from .atomic import write_atomic


def write_quarantine(entries: list[QuarantineEntry], path: str | os.PathLike) -> Path:
    """JSON list of ``{file, reason, source, stage}``, sorted, written atomically."""
    rows = sorted((asdict(e) for e in entries), key=lambda r: (r["file"], r["reason"]))
    return write_atomic(path, json.dumps(rows, indent=2, ensure_ascii=False) + "\n")


def read_quarantine(path: str | os.PathLike) -> list[QuarantineEntry]:
    return [QuarantineEntry(**row) for row in json.loads(Path(path).read_text("utf-8"))]
