"""A predictions workbook (``.xlsx``) checked from its zip directory before openpyxl parses it.

An ``.xlsx`` is a zip of XML parts. A 400 kB file can hold one shared string of 400 MiB (it
compresses a thousand to one), which openpyxl would build whole, for minutes. So the sizes the
zip declares are checked against ``max_xlsx_unpacked_bytes`` first, then every XML part is
streamed once, never held, to find its longest text between two tags, checked against
``max_cell_chars`` (as bytes: at most :data:`BYTES_PER_CHAR` for one character, an XML
character reference); no spreadsheet cell (Excel stops at 32,767 characters) is near it.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from ..errors import UsageError
from ..store.limits import read_limits

CHUNK = 1 << 20  # bytes of a part decompressed at a time
BYTES_PER_CHAR = 10  # the longest XML spelling of one character (&#x10FFFF;)


def _longest_text(stream, stop: int) -> int:
    """The longest run of bytes between two ``<`` in ``stream``, read until it passes
    ``stop`` (the answer is then only known to be larger)."""
    run = longest = 0
    while block := stream.read(CHUNK):
        pieces = block.split(b"<")
        run += len(pieces[0])
        if len(pieces) > 1:
            longest = max(longest, run, *(len(p) for p in pieces[1:-1]))
            run = len(pieces[-1])
        if max(longest, run) > stop:
            return max(longest, run)
    return max(longest, run)


def check_workbook(path: Path) -> None:
    """Raise a one-line :class:`UsageError` when the workbook at ``path`` is not a zip, would
    unpack to more than the limit, or holds a cell longer than any spreadsheet allows."""
    limits = read_limits()
    fix = "pass VLMEvalKit's .csv result instead, or raise the limit in MEDVQA_LIMITS"
    try:
        book = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise UsageError(
            f"{path.name} is not an .xlsx workbook ({exc})",
            where=str(path),
            fix="pass the .xlsx as VLMEvalKit wrote it, or its .csv result",
        ) from None
    with book:
        parts = book.infolist()
        declared = sum(p.file_size for p in parts)
        if declared > limits.max_xlsx_unpacked_bytes:
            raise UsageError(
                f"{path.name} declares {declared:,} bytes unpacked, over max_xlsx_unpacked_bytes"
                f"={limits.max_xlsx_unpacked_bytes:,}",
                where=str(path),
                fix=fix,
            )
        stop = BYTES_PER_CHAR * limits.max_cell_chars
        for part in parts:
            if not part.filename.endswith(".xml"):
                continue
            with book.open(part) as stream:
                longest = _longest_text(stream, stop)
            if longest > stop:
                raise UsageError(
                    f"{path.name} holds a text of more than {stop:,} bytes in {part.filename} "
                    f"(which unpacks to {part.file_size:,} bytes); a cell holds at most "
                    f"max_cell_chars={limits.max_cell_chars:,} characters",
                    where=str(path),
                    fix=fix,
                )
