"""Prediction files that are hostile or damaged, given to ``score`` (issue 33): text that is
not UTF-8, a workbook whose one cell unpacks to 400 MiB, a table csv cannot read, ids by the
thousand that the build does not have. Each runs the CLI as a subprocess under the corpus'
memory and time ceilings (:mod:`.bounded_cli`) and ends in one short error line, exit 2,
with no score folder left behind.
"""

from __future__ import annotations

import contextlib
import io
import json
import zipfile
from pathlib import Path

import openpyxl
import pytest

from medvqa_build.cli import main
from medvqa_build.cli.failures import MAX_LINE

from ..conftest import REPO
from .bounded_cli import bounded_cli
from .test_damaged_state import SMALL


@pytest.fixture(scope="module")
def build(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("score-inputs") / "build"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", str(REPO / "recipes/demo.yaml"), "-o", str(out), "-q", *SMALL]) == 0
    return out


def _refused(build: Path, predictions: Path, tmp_path: Path, env: dict | None = None) -> str:
    """The one error line of scoring ``predictions``; no output folder is left."""
    out = tmp_path / "scores"
    proc = bounded_cli("score", build, predictions, "-o", out, env=env)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.error_lines()
    assert len(line) <= MAX_LINE + len("error: ")
    assert not out.exists()
    return line


def test_predictions_that_are_not_utf8(build, tmp_path):
    csv_file = tmp_path / "latin1.csv"
    csv_file.write_bytes("item_id,prediction\nx,réponse A\n".encode("latin-1"))
    line = _refused(build, csv_file, tmp_path)
    assert "not UTF-8 text (byte 22, line 2)" in line and str(csv_file) in line
    jsonl = tmp_path / "latin1.jsonl"
    jsonl.write_bytes(b'{"item_id": "a", "prediction": "A"}\n{"item_id": "\xe9"}\n')
    assert "not UTF-8 text (byte 49, line 2)" in _refused(build, jsonl, tmp_path)


def _workbook_with_one_cell(path: Path, cell_bytes: int) -> Path:
    """An .xlsx of VLMEvalKit's columns whose one prediction cell is ``cell_bytes`` long,
    deflated (a thousand to one), as a hostile upload would be."""
    book = openpyxl.Workbook()
    book.active.append(["index", "prediction"])
    book.active.append([0, "PLACEHOLDER"])
    small = io.BytesIO()
    book.save(small)
    with (
        zipfile.ZipFile(small) as src,
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as dst,
    ):
        for info in src.infolist():
            data = src.read(info)
            if b"PLACEHOLDER" not in data:
                dst.writestr(info, data)
                continue
            head, tail = data.split(b"PLACEHOLDER")
            with dst.open(info.filename, "w", force_zip64=True) as part:
                part.write(head)
                block = b"A" * (1 << 20)
                for _ in range(cell_bytes >> 20):
                    part.write(block)
                part.write(tail)
    return path


def test_a_workbook_holding_a_400_mib_cell_is_refused_before_parsing(build, tmp_path):
    book = _workbook_with_one_cell(tmp_path / "model_MedVQA_Demo.xlsx", 400 << 20)
    assert book.stat().st_size < 600_000
    line = _refused(build, book, tmp_path)
    assert "holds a text of more than 655,360 bytes in xl/worksheets/sheet1.xml" in line
    assert "max_cell_chars=65,536" in line


def test_a_workbook_over_its_unpacked_limit(build, tmp_path):
    book = _workbook_with_one_cell(tmp_path / "model.xlsx", 1 << 20)
    line = _refused(build, book, tmp_path, env={"MEDVQA_LIMITS": "max_xlsx_unpacked_bytes=1e6"})
    assert "unpacked, over max_xlsx_unpacked_bytes=1,000,000" in line


def test_a_workbook_that_is_not_a_zip(build, tmp_path):
    book = tmp_path / "model.xlsx"
    book.write_text("index,prediction\n0,A\n")
    assert "is not an .xlsx workbook" in _refused(build, book, tmp_path)


def test_a_csv_field_over_the_csv_limit(build, tmp_path):
    table = tmp_path / "huge.csv"
    table.write_text('item_id,prediction\nx,"' + "A" * 200_000 + '"\n')
    assert "not a readable CSV (field larger than field limit" in _refused(build, table, tmp_path)


def test_unknown_ids_are_named_five_at_a_time(build, tmp_path):
    rows = [{"item_id": f"{k:04d}" + "x" * 5000, "prediction": "A"} for k in range(2000)]
    rows.append({"item_id": "y" * 3_000_000, "prediction": "A"})
    jsonl = tmp_path / "other.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    line = _refused(build, jsonl, tmp_path)
    assert "2,001 prediction(s) name items this build does not have (by item id: '0000xxx" in line
    assert line.count("(rotation 0)") == 5 and "and 1,996 more" in line
    assert "...(5,006 chars)" in line


def test_a_jsonl_line_nested_without_end(build, tmp_path):
    jsonl = tmp_path / "deep.jsonl"
    jsonl.write_text('{"item_id": "a", "prediction": "A"}\n' + "[" * 100_000 + "\n")
    line = _refused(build, jsonl, tmp_path)
    assert "line 2 is not JSON (nested deeper than Python's recursion limit)" in line
