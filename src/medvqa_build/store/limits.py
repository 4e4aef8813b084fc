"""Every size a file may declare, named in one place (docs/reliability.md, "Limits").

A header, a table or a workbook can claim any size. Each reader checks the size a file declares
against these limits, and against the file's real size on disk, before it allocates anything,
so a 5 kB file that claims gigabytes is one quarantine entry or one error line, never a
``MemoryError``. The defaults fit every public dataset the project reads; a genuine file that is
larger raises the named limit (``MEDVQA_LIMITS="max_voxels=2e9,max_table_bytes=8e9"``).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, fields
from functools import lru_cache

from ..errors import UsageError

ENV = "MEDVQA_LIMITS"


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """The limits; each is a count of the unit its name says."""

    max_pixels: int = 200_000_000  # pixels of one 2-D image or frame (recipe key max_pixels)
    max_decode_bytes: int = 1 << 30  # bytes one decode may allocate (per worker)
    # bytes a convert worker may allocate above what it held when its shard began
    # (store.memory.worker_budget: RLIMIT_DATA, and the accounting of decode_problem)
    max_worker_bytes: int = 8 << 30
    max_voxels: int = 1_000_000_000  # voxels of one volume
    max_frames: int = 1_000_000  # frames of one video
    max_table_bytes: int = 2 << 30  # bytes of one label table or predictions file
    max_line_chars: int = 1 << 20  # characters of one line of a text table
    max_cell_chars: int = 1 << 16  # characters of one cell (CSV or workbook)
    max_json_bytes: int = 1 << 30  # bytes of one JSON annotation or decisions file
    max_json_depth: int = 64  # nesting levels of one JSON value
    max_xlsx_unpacked_bytes: int = 1 << 30  # bytes a workbook's XML parts unpack to
    max_sheet_cells: int = 50_000_000  # rows x columns one worksheet spans (store/workbook.py)
    max_boxes_per_image: int = 10_000  # boxes one per-image box file lists (YOLO txt, ...)

    def replace(self, **changes: int) -> ReadLimits:
        """These limits with ``changes`` (names as the fields)."""
        return dataclasses.replace(self, **changes)


def _parse(text: str) -> dict[str, int]:
    """``name=value,name=value`` (values may be written ``2e9`` or ``2_000_000_000``)."""
    names = {f.name for f in fields(ReadLimits)}
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in names:
            raise UsageError(
                f"{ENV}: {part!r} is not name=value",
                fix=f"use names among {', '.join(sorted(names))}",
            )
        try:
            number = int(float(value.replace("_", "")))
        except ValueError:
            raise UsageError(f"{ENV}: {name}={value!r} is not a number", fix="e.g. 2e9") from None
        if number < 1:
            raise UsageError(f"{ENV}: {name}={value!r} is below 1", fix="a limit is at least 1")
        out[name] = number
    return out


def decode_problem(need: int, what: str, peak: int | None = None) -> str | None:
    """Why a decode of ``what`` may not run, or None: the ``need`` bytes it hands on against
    ``max_decode_bytes``, and the ``peak`` bytes it holds at once (default ``need``: its
    input, temporaries and output) against the worker budget ``max_worker_bytes``. Checked on
    a header's shape x item size, before anything is allocated."""
    limits = read_limits()
    if need > limits.max_decode_bytes:
        return (
            f"{what} needs about {need:,} bytes, over the max_decode_bytes limit of "
            f"{limits.max_decode_bytes:,} per worker; raise it "
            "(MEDVQA_LIMITS=max_decode_bytes=...) if the file is genuine"
        )
    peak = need if peak is None else peak
    if peak > limits.max_worker_bytes:
        return (
            f"{what} needs about {peak:,} bytes at once, over the worker memory budget "
            f"max_worker_bytes of {limits.max_worker_bytes:,}; raise it "
            "(MEDVQA_LIMITS=max_worker_bytes=...) if the file is genuine and the machine has "
            "the memory"
        )
    return None


def box_count_problem(n: int, what: str) -> str | None:
    """Why ``what`` (a box file, or an image's entry of a shared annotation file) listing ``n``
    boxes for one image may not be read, or None: ``n`` against ``max_boxes_per_image``."""
    limit = read_limits().max_boxes_per_image
    if n <= limit:
        return None
    return (
        f"{what} lists more than {limit:,} boxes for one image, over the max_boxes_per_image "
        f"limit of {limit:,}: a damaged or padded file (download it again) or, if genuine, raise "
        f"the limit ({ENV}=max_boxes_per_image=...)"
    )


def read_limits() -> ReadLimits:
    """The defaults, with what ``$MEDVQA_LIMITS`` raises or lowers (the variable is read on
    each call, so a worker process sees what its parent set; its text is parsed once)."""
    return _limits_for(os.environ.get(ENV, ""))


@lru_cache(maxsize=16)
def _limits_for(text: str) -> ReadLimits:
    """The limits one ``$MEDVQA_LIMITS`` text sets (checked every image header: parsed once;
    a bad text raises each time, errors are not cached)."""
    return ReadLimits(**_parse(text))
