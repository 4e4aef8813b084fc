"""store.workbook: the one check of an .xlsx before openpyxl parses it (score's predictions and
a dataset's own tables alike); the hostile cases through the CLI are in
tests/hardening/test_workbooks.py and test_score_inputs.py."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medvqa_build.store import workbook
from medvqa_build.store.workbook import WorkbookProblem, _scan_part, check_workbook, column_number


def test_column_numbers():
    assert [column_number(c) for c in ("A", "z", "AA", "AZ", "BA", "XFD")] == [
        1,
        26,
        27,
        52,
        53,
        16384,
    ]


def _sheet(cells: list[tuple[str, int]], dimension: str | None) -> bytes:
    rows = "".join(
        f'<row r="{row}" spans="1:2"><c r="{col}{row}" s="1" t="n"><v>{k}</v></c></row>'
        for k, (col, row) in enumerate(cells)
    )
    dim = f'<dimension ref="{dimension}" />' if dimension else ""
    return f'<worksheet xmlns="x">{dim}<sheetData>{rows}</sheetData></worksheet>'.encode()


@settings(max_examples=60, derandomize=True, deadline=None)
@given(
    cells=st.lists(
        st.tuples(st.sampled_from(["A", "C", "Z", "AB", "XFD"]), st.integers(1, 1_048_576)),
        min_size=1,
        max_size=12,
    ),
    chunk=st.integers(3, 64),
)
def test_the_extent_is_found_whatever_the_chunks(cells, chunk):
    """Every reference is seen even where a chunk boundary cuts it (the scan carries the end
    of each chunk into the next)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(workbook, "CHUNK", chunk)
        scan = _scan_part(io.BytesIO(_sheet(cells, None)), 10**9, sheet=True)
    assert scan.rows == max(row for _, row in cells)
    assert scan.columns == max(column_number(col) for col, _ in cells)


def test_a_declared_dimension_counts_even_without_cells():
    scan = _scan_part(io.BytesIO(_sheet([("A", 1)], "A1:XFD1048576")), 10**9, sheet=True)
    assert (scan.rows, scan.columns) == (1_048_576, 16_384)
    scan = _scan_part(io.BytesIO(_sheet([("B", 7)], "$A$1:$B$3")), 10**9, sheet=True)
    assert (scan.rows, scan.columns) == (7, 2)  # the cells reach past a dimension too small


def test_a_text_over_the_cell_limit_stops_the_scan():
    part = b"<t>" + b"A" * 5000 + b"</t>"
    scan = _scan_part(io.BytesIO(part), 1000, sheet=False)
    assert scan.text > 1000


def test_check_workbook_names_the_sheet_and_the_limit(tmp_path, monkeypatch):
    from openpyxl import Workbook

    book = Workbook()
    for row in range(30):
        book.active.append([row, "x", "y"])
    path = tmp_path / "t.xlsx"
    book.save(path)
    check_workbook(path)  # 30 x 3 is well under the default
    monkeypatch.setenv("MEDVQA_LIMITS", "max_sheet_cells=89")
    with pytest.raises(WorkbookProblem, match=r"spans 30 rows x 3 columns = 90 cells"):
        check_workbook(path)
    (tmp_path / "junk.xlsx").write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(WorkbookProblem, match="junk.xlsx is not an .xlsx workbook"):
        check_workbook(tmp_path / "junk.xlsx")
