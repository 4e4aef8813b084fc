"""Find per-sequence folders (EndoVis ``seq_N`` / ``instrument_dataset_N``) under a source root.

Challenge releases unpack into one or more wrapper folders (``miccai_challenge_release_2/``,
``instrument_1_4_training/``), so sequences are looked for at any depth below the root.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import SourceError
from .base import ScanContext


def find_sequence_dirs(ctx: ScanContext, sequence_regex: str, images_dir: str) -> list[Path]:
    """Folders named like ``sequence_regex`` that hold ``images_dir``, sorted by relative path.

    Raises :class:`SourceError` naming the expected layout when there is none.
    """
    pattern = re.compile(sequence_regex)
    found: list[Path] = []
    for dirpath, dirnames, _ in os.walk(ctx.root):
        dirnames.sort()
        here = Path(dirpath)
        if here != ctx.root and pattern.search(here.name) and (here / images_dir).is_dir():
            found.append(here)
            dirnames[:] = []  # a sequence does not nest another sequence
    if not found:
        raise SourceError(
            f"{ctx.source}: expected sequence folders matching {sequence_regex!r} with an "
            f"{images_dir!r} folder inside, under the source root; found none",
            where=str(ctx.root),
            fix="point ROOT at the unpacked dataset (see the source's docs page)",
        )
    return sorted(found, key=lambda p: p.relative_to(ctx.root).as_posix())


def frame_number(stem: str) -> int | None:
    """Trailing digits of a frame file stem (``frame042`` -> 42), ``None`` when there are none."""
    match = re.search(r"(\d+)$", stem)
    return int(match.group(1)) if match else None
