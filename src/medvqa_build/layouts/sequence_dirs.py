"""Find per-sequence folders (EndoVis ``seq_N`` / ``instrument_dataset_N``) under a source root.

Challenge releases unpack into one or more release folders (``miccai_challenge_release_2/``),
and archive tools add more (``instrument_1_4_training/`` from "Extract all", the
``<name>/<name>/`` wrapper, macOS ``__MACOSX/`` shadow trees of ``._frameNNN.png`` files), so
sequences are looked for at any depth below the root, outside the shadow trees.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import SourceError
from ..records import QuarantineEntry
from ..store.paths import sorted_files
from .base import FileCandidate, ScanContext

# folders an archive tool or a file manager leaves beside the data: never data
NOISE_DIRS = frozenset({"__MACOSX"})


def is_noise_dir(name: str) -> bool:
    """Whether a folder is an archive tool's leftover (``__MACOSX``) or hidden (``.git``)."""
    return name in NOISE_DIRS or name.startswith(".")


def find_sequence_dirs(ctx: ScanContext, sequence_regex: str, images_dir: str) -> list[Path]:
    """Folders named like ``sequence_regex`` that hold ``images_dir``, sorted by relative path.

    ``__MACOSX`` and hidden folders are skipped: the EndoVis 2018 release 1 archive carries a
    ``__MACOSX/`` copy of every ``seq_N/left_frames`` folder holding only ``._frameNNN.png``
    AppleDouble files. Raises :class:`SourceError` naming the expected layout when there is none.
    """
    pattern = re.compile(sequence_regex)
    found: list[Path] = []
    for dirpath, dirnames, _ in os.walk(ctx.root):
        dirnames[:] = sorted(d for d in dirnames if not is_noise_dir(d))
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


def sequence_key(ctx: ScanContext, seq: Path, depth: int | None = None) -> str:
    """The sequence's path below the root, as it goes into sample ids.

    A folder directly inside a folder of the same name (``release_1/release_1/seq_1``, what
    extracting an archive into a folder named after it gives) counts once, and with ``depth``
    only the last ``depth`` folders are kept (``release_1/seq_1`` for 2, ``seq_1`` for 1), so
    sample ids depend neither on the tool that unpacked the archives nor on how far above
    them ROOT was.
    """
    parts: list[str] = []
    for part in seq.relative_to(ctx.root).parts:
        if not parts or parts[-1] != part:
            parts.append(part)
    return "/".join(parts[-depth:] if depth else parts)


class Frame(NamedTuple):
    """One frame candidate of a sequence layout: what its ``read`` needs."""

    sequence: Path  # the sequence folder
    path: Path  # the frame image
    key: str  # sample key: the sequence's key, "/", the frame stem
    tables: Any  # what the layout read once for the whole sequence


def frame_candidates(
    ctx: ScanContext,
    sequences: list[Path],
    images_dir: str,
    key_depth: int | None,
    per_sequence: Callable[[Path], Any],
) -> Iterator[FileCandidate | QuarantineEntry]:
    """Every frame of every sequence, in folder then file order: a :class:`Frame` candidate,
    or a quarantine entry when its key was handed out before (see :class:`SampleKeys`).
    ``per_sequence(seq)`` is read once per sequence, before its frames (it may raise
    :class:`SourceError` for a sequence the layout cannot read at all)."""
    keys = SampleKeys()
    for seq in sequences:
        tables = per_sequence(seq)
        prefix = sequence_key(ctx, seq, key_depth)
        for path in sorted_files(seq / images_dir):
            rel, key = ctx.rel(path), f"{prefix}/{path.stem}"
            if reason := keys.duplicate(key, rel):
                yield ctx.quarantine(rel, reason)
            else:
                yield FileCandidate(rel, Frame(seq, path, key, tables))


class SampleKeys:
    """The sample keys handed out in one scan: a key seen twice is the same frame unpacked
    twice (two copies of a release under ROOT), and the later copy is quarantined."""

    def __init__(self) -> None:
        self._first: dict[str, str] = {}

    def duplicate(self, key: str, image: str) -> str | None:
        """The quarantine reason when ``key`` was handed out before, else None (and claim it)."""
        first = self._first.setdefault(key, image)
        return None if first == image else f"frame {key} is also at {first} (unpacked twice?)"


def frame_number(stem: str) -> int | None:
    """Trailing digits of a frame file stem (``frame042`` -> 42), ``None`` when there are none."""
    match = re.search(r"(\d+)$", stem)
    return int(match.group(1)) if match else None
