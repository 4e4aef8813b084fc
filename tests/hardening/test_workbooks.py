"""Issue 33, point 1 for workbooks: a dataset's own ``.xlsx`` table (CSXA's ``datasets.xlsx``)
is checked like a predictions workbook, by one check (``store/workbook.py``), before openpyxl
parses it: a shared string of 400 MiB in a 400 kB file, a sheet declaring or referencing
1,048,576 rows x 16,384 columns, a file that is not a zip. Each is one ``error:`` line naming
the file and the limit (the whole source needs the table), under the hostile corpus's
memory and time ceilings (:mod:`.bounded_cli`).
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from .bounded_cli import bounded_cli

Change = Callable[[bytes, object], None]
SHARED_STRINGS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings"
STRINGS_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"


def _rewrite(book: Path, changes: dict[str, Change]) -> None:
    """Copy ``book`` with each part named in ``changes`` written by ``change(data, stream)``
    (a part the book lacks is added, from ``b""``)."""
    copy = book.with_suffix(".tmp")
    with (
        zipfile.ZipFile(book) as src,
        zipfile.ZipFile(copy, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as dst,
    ):
        names = [info.filename for info in src.infolist()]
        for name in [*names, *(n for n in changes if n not in names)]:
            data = src.read(name) if name in names else b""
            if name not in changes:
                dst.writestr(name, data)
                continue
            with dst.open(name, "w", force_zip64=True) as stream:
                changes[name](data, stream)
    copy.replace(book)


def _shared_string_bomb(book: Path) -> None:
    """The title cell (A1) becomes a reference to a shared string of 400 MiB of one letter,
    deflated a thousand to one, listed where Excel lists it (content types, workbook rels)."""

    def strings(_: bytes, stream) -> None:
        stream.write(b'<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" ')
        stream.write(b'count="1" uniqueCount="1"><si><t>')
        block = b"A" * (1 << 20)
        for _ in range(400):
            stream.write(block)
        stream.write(b"</t></si></sst>")

    def sheet(data: bytes, stream) -> None:
        title = rb'<c r="A1" t="inlineStr"><is><t>[^<]*</t></is></c>'
        changed, n = re.subn(title, b'<c r="A1" t="s"><v>0</v></c>', data)
        assert n == 1
        stream.write(changed)

    def rels(data: bytes, stream) -> None:
        rel = f'<Relationship Id="rIdS" Type="{SHARED_STRINGS}" Target="sharedStrings.xml"/>'
        stream.write(data.replace(b"</Relationships>", rel.encode() + b"</Relationships>"))

    def types(data: bytes, stream) -> None:
        part = f'<Override PartName="/xl/sharedStrings.xml" ContentType="{STRINGS_TYPE}"/>'
        stream.write(data.replace(b"</Types>", part.encode() + b"</Types>"))

    _rewrite(
        book,
        {
            "xl/sharedStrings.xml": strings,
            "xl/worksheets/sheet1.xml": sheet,
            "xl/_rels/workbook.xml.rels": rels,
            "[Content_Types].xml": types,
        },
    )


ROWS = 100_000  # rows a bomb adds: each padded to 16,384 cells by openpyxl's row reader


def _many_rows(column: str) -> bytes:
    return b"".join(
        b'<row r="%d"><c r="%s%d"><v>1</v></c></row>' % (n, column.encode(), n)
        for n in range(10, 10 + ROWS)
    )


def _whole_sheet_dimension(book: Path) -> None:
    """The sheet declares the whole of Excel's grid and holds 100,000 rows of one cell:
    openpyxl pads each row to the declared 16,384 columns (1.6 billion cells)."""

    def sheet(data: bytes, stream) -> None:
        changed, n = re.subn(rb'<dimension ref="[^"]*"', b'<dimension ref="A1:XFD1048576"', data)
        assert n == 1
        stream.write(changed.replace(b"</sheetData>", _many_rows("A") + b"</sheetData>"))

    _rewrite(book, {"xl/worksheets/sheet1.xml": sheet})


def _far_cells(book: Path) -> None:
    """No dimension, and 100,000 rows each holding one cell in the last column (XFD):
    openpyxl pads each of them to 16,384 cells all the same."""

    def sheet(data: bytes, stream) -> None:
        data = re.sub(rb"<dimension [^>]*/>", b"", data)
        stream.write(data.replace(b"</sheetData>", _many_rows("XFD") + b"</sheetData>"))

    _rewrite(book, {"xl/worksheets/sheet1.xml": sheet})


def _not_a_zip(book: Path) -> None:
    book.write_text("Number,Curvature\n1,1\n")


@pytest.mark.parametrize(
    "damage, words",
    [
        (
            _shared_string_bomb,
            [
                "datasets.xlsx holds a text of more than 655,360 bytes in xl/sharedStrings.xml",
                "max_cell_chars=65,536",
            ],
        ),
        (
            _whole_sheet_dimension,
            [
                "the sheet xl/worksheets/sheet1.xml spans 1,048,576 rows x 16,384 columns",
                "over max_sheet_cells=50,000,000",
            ],
        ),
        (_far_cells, ["spans 100,009 rows x 16,384 columns", "max_sheet_cells=50,000,000"]),
        (_not_a_zip, ["datasets.xlsx is not an .xlsx workbook"]),
    ],
    ids=["shared-string-bomb", "sheet-dimension", "far-cell", "not-a-zip"],
)
def test_a_hostile_dataset_workbook_is_one_line(tmp_path, damage, words):
    from ..fixtures.sources import csxa

    root = csxa.write(tmp_path / "csxa")
    book = root / "datasets.xlsx"
    damage(book)
    assert book.stat().st_size < 2_000_000  # a small download, whatever it claims
    proc = bounded_cli("convert", "csxa", root, "-o", tmp_path / "s.parquet", "-q")
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.error_lines()
    for word in words:
        assert word in line, line
    assert not (tmp_path / "s.parquet").exists()


def test_a_genuine_workbook_still_converts_and_a_lowered_limit_is_obeyed(tmp_path):
    from ..fixtures.sources import csxa

    root = csxa.write(tmp_path / "csxa")
    out = tmp_path / "s.parquet"
    proc = bounded_cli("convert", "csxa", root, "-o", out, "-q")
    assert proc.returncode == 0, proc.stderr
    proc = bounded_cli(
        "convert", "csxa", root, "-o", out, "-q", env={"MEDVQA_LIMITS": "max_sheet_cells=10"}
    )
    assert proc.returncode == 2
    (line,) = proc.error_lines()
    assert "the sheet xl/worksheets/sheet1.xml spans 9 rows x 2 columns = 18 cells" in line
    assert "over max_sheet_cells=10" in line
