"""An ``.xlsx`` workbook checked from its zip directory and its XML, before openpyxl parses it:
the one check for every workbook the project reads (``score``'s predictions, a dataset's own
tables such as CSXA's ``datasets.xlsx``).

An ``.xlsx`` is a zip of XML parts. A 400 kB file can hold one shared string of 400 MiB (it
compresses a thousand to one), which openpyxl would build whole, for minutes; a sheet can
declare ``<dimension ref="A1:XFD1048576"/>``, or hold one cell at ``XFD1048576``, and openpyxl's
row reader then pads every row to 16,384 cells and yields a million empty rows. So:

1. the sizes the zip declares are checked against ``max_xlsx_unpacked_bytes`` (a part cannot
   unpack to more than it declares: ``zipfile`` stops there and fails its CRC);
2. every XML part is streamed once, never held, for its longest text between two tags,
   checked against ``max_cell_chars`` (as bytes: at most :data:`BYTES_PER_CHAR` for one
   character, an XML character reference; no spreadsheet cell, 32,767 characters in Excel,
   is near it);
3. in the same pass each worksheet's extent, the larger of its ``<dimension>`` and its rows'
   and cells' references, is checked against ``max_sheet_cells`` (rows x columns).

A problem is a :class:`WorkbookProblem` naming the file, the part and the limit; each reader
turns it into its own one-line error with its own fix.
"""

from __future__ import annotations

import re
import zipfile
import zlib
from pathlib import Path

from .limits import read_limits

CHUNK = 1 << 20  # bytes of a part decompressed at a time
BYTES_PER_CHAR = 10  # the longest XML spelling of one character (&#x10FFFF;)
_OVERLAP = 512  # bytes carried into the next chunk, so a tag cut by a chunk is seen whole
_DIMENSION = re.compile(rb"<(?:\w+:)?dimension\s[^>]*?\bref=\"([^\"]*)\"")
_ROW = re.compile(rb"<(?:\w+:)?row\s[^>]*?\br=\"(\d{1,12})\"")
_CELL = re.compile(rb"<(?:\w+:)?c\s[^>]*?\br=\"([A-Za-z]{1,8})(\d{1,12})\"")
_REF = re.compile(r"\$?([A-Za-z]{1,8})\$?(\d{1,12})")


class WorkbookProblem(ValueError):
    """A workbook that is not one, or over a limit (the message names file, part and limit)."""


def column_number(letters: str) -> int:
    """``A`` -> 1, ``Z`` -> 26, ``AA`` -> 27, ``XFD`` -> 16384."""
    n = 0
    for ch in letters.upper():
        n = n * 26 + ord(ch) - 64
    return n


class _PartScan:
    """What one streamed XML part holds: its longest text between two tags, and (for a
    worksheet) the last row and column its dimension and references name."""

    def __init__(self, stop: int):
        self.stop = stop
        self.run = self.longest = 0
        self.rows = self.columns = 0

    @property
    def text(self) -> int:
        return max(self.longest, self.run)

    def feed_text(self, block: bytes) -> None:
        pieces = block.split(b"<")
        self.run += len(pieces[0])
        if len(pieces) > 1:
            self.longest = max(self.longest, self.run, *(len(p) for p in pieces[1:-1]))
            self.run = len(pieces[-1])

    def feed_refs(self, window: bytes) -> None:
        for m in _DIMENSION.finditer(window):
            for letters, digits in _REF.findall(m.group(1).decode("ascii", "replace")):
                self.columns = max(self.columns, column_number(letters))
                self.rows = max(self.rows, int(digits))
        for m in _ROW.finditer(window):
            self.rows = max(self.rows, int(m.group(1)))
        for m in _CELL.finditer(window):
            self.columns = max(self.columns, column_number(m.group(1).decode("ascii")))
            self.rows = max(self.rows, int(m.group(2)))


def _scan_part(stream, stop: int, sheet: bool) -> _PartScan:
    """Stream one part: its longest text, read until it passes ``stop`` (the answer is then
    only known to be larger), and for a ``sheet`` its extent."""
    scan = _PartScan(stop)
    tail = b""
    while block := stream.read(CHUNK):
        scan.feed_text(block)
        if scan.text > stop:
            return scan
        if sheet:  # maxima: a tag seen twice (in the overlap) counts once
            window = tail + block
            scan.feed_refs(window)
            tail = window[-_OVERLAP:]
    return scan


def check_workbook(path: str | Path) -> None:
    """Raise :class:`WorkbookProblem` when the workbook at ``path`` is not a zip, would unpack
    to more than ``max_xlsx_unpacked_bytes``, holds a text longer than any spreadsheet cell
    (``max_cell_chars``) or a sheet spanning more than ``max_sheet_cells``."""
    path = Path(path)
    limits = read_limits()
    try:
        book = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise WorkbookProblem(f"{path.name} is not an .xlsx workbook ({exc})") from None
    with book:
        parts = book.infolist()
        declared = sum(p.file_size for p in parts)
        if declared > limits.max_xlsx_unpacked_bytes:
            raise WorkbookProblem(
                f"{path.name} declares {declared:,} bytes unpacked, over max_xlsx_unpacked_bytes"
                f"={limits.max_xlsx_unpacked_bytes:,}"
            )
        stop = BYTES_PER_CHAR * limits.max_cell_chars
        for part in parts:
            if not part.filename.endswith(".xml"):
                continue
            sheet = part.filename.startswith("xl/worksheets/")
            try:
                with book.open(part) as stream:
                    scan = _scan_part(stream, stop, sheet)
            except (zipfile.BadZipFile, OSError, EOFError, zlib.error, NotImplementedError) as exc:
                raise WorkbookProblem(
                    f"{path.name}: its part {part.filename} does not unpack ({exc})"
                ) from None
            if scan.text > stop:
                raise WorkbookProblem(
                    f"{path.name} holds a text of more than {stop:,} bytes in {part.filename} "
                    f"(which unpacks to {part.file_size:,} bytes); a cell holds at most "
                    f"max_cell_chars={limits.max_cell_chars:,} characters"
                )
            cells = scan.rows * scan.columns
            if cells > limits.max_sheet_cells:
                raise WorkbookProblem(
                    f"{path.name}: the sheet {part.filename} spans {scan.rows:,} rows x "
                    f"{scan.columns:,} columns = {cells:,} cells (its dimension or its cells' "
                    f"references), over max_sheet_cells={limits.max_sheet_cells:,}"
                )
