"""Issue 33, inputs: names that are bytes, headers and tables that lie about their size,
reasons that say what happened. Every case runs the CLI as a subprocess under a memory and a
time ceiling (:mod:`.bounded_cli`): a damaged file is one quarantine entry and the rest
converts, a damaged part is one error line, never a traceback or a ``MemoryError``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
from PIL import Image

from .bounded_cli import bounded_cli


def converted(out: Path) -> tuple[dict, list[dict]]:
    """The counts and quarantine entries of ``convert -o out``."""
    counts = json.loads(out.with_name(out.stem + ".counts.json").read_text("utf-8"))
    entries = json.loads(out.with_name(out.stem + ".quarantine.json").read_text("utf-8"))
    assert counts["found"] == counts["converted"] + counts["quarantined"]
    return counts, entries


def kvasir_polyps(root: Path, n: int = 3) -> Path:
    """``n`` good JPEGs in a Kvasir class folder; returns the folder."""
    polyps = root / "kvasir-dataset-v2" / "polyps"
    polyps.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for k in range(n):
        pixels = rng.integers(0, 255, (40 + k, 50, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(polyps / f"good{k}.jpg", quality=90)
    return polyps


def test_a_file_name_that_is_not_utf8_is_quarantined_escaped(tmp_path):
    polyps = kvasir_polyps(tmp_path / "kvasir")
    bad = os.fsencode(polyps) + b"/bad\xff\xfe.jpg"
    with open(bad, "wb") as handle:
        handle.write((polyps / "good0.jpg").read_bytes())
    out = tmp_path / "samples.parquet"
    proc = bounded_cli("convert", "kvasir", tmp_path / "kvasir", "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    counts, (entry,) = converted(out)
    assert (counts["converted"], counts["quarantined"]) == (3, 1)
    assert entry["file"] == "kvasir-dataset-v2/polyps/bad\\xff\\xfe.jpg"
    assert "not valid UTF-8" in entry["reason"]
