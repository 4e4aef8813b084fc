"""Prediction files as each client writes them, and the one-line errors for bad ones."""

import json

import pytest

from medvqa_build.errors import UsageError
from medvqa_build.eval.predictions import read_predictions


def test_lmms_eval_samples(tmp_path):
    """lmms-eval's --log_samples lines: the doc (less its images) carries item_id and answer;
    ``filtered_resps`` holds the reply the metric saw."""
    line = {
        "doc_id": 0,
        "doc": {"item_id": "x1", "question": "Q?", "options": ["a", "b"], "answer": "B"},
        "target": "B",
        "arguments": [],
        "resps": [["(B) b"]],
        "filtered_resps": ["(B) b"],
        "doc_hash": "0" * 64,
        "accuracy": 1.0,
    }
    path = tmp_path / "samples_bench_mcq.jsonl"
    path.write_text(json.dumps(line) + "\n")
    found = read_predictions(path)
    assert found.client == "lmms-eval"
    row = found.rows[0]
    assert (row.key, row.by, row.text) == ("x1", "item_id", "(B) b")
    assert row.carried == {"answer": "B", "client_accuracy": 1.0}


def test_plain_csv_and_jsonl(tmp_path):
    (tmp_path / "p.csv").write_text("item_id,prediction\nx1,A\nx2,\n")
    rows = read_predictions(tmp_path / "p.csv").rows
    assert [(r.key, r.text) for r in rows] == [("x1", "A"), ("x2", "")]
    (tmp_path / "p.jsonl").write_text('{"index": 2000003, "prediction": [1, 2, 3, 4]}\n')
    row = read_predictions(tmp_path / "p.jsonl").rows[0]
    assert (row.key, row.by, row.rotation, row.text) == (3, "index", 2, "[1, 2, 3, 4]")


def test_vlmeval_result_csv(tmp_path):
    (tmp_path / "m_B.csv").write_text(
        'index,question,A,B,answer,prediction\n1000001,"Q?",a,b,A,"B"\n'
    )
    found = read_predictions(tmp_path / "m_B.csv")
    assert found.client == "vlmeval"
    row = found.rows[0]
    assert (row.key, row.rotation, row.carried["answer"]) == (1, 1, "A")


def test_xlsx_reads_or_says_what_is_missing(tmp_path):
    path = tmp_path / "m_B.xlsx"
    try:
        import openpyxl
    except ImportError:
        path.write_bytes(b"PK")
        with pytest.raises(UsageError, match="needs openpyxl"):
            read_predictions(path)
        return
    book = openpyxl.Workbook()
    book.active.append(["index", "A", "B", "answer", "prediction"])
    book.active.append([0, "a", "b", "B", "B"])
    book.save(path)
    found = read_predictions(path)
    assert found.client == "vlmeval" and found.rows[0].text == "B"


@pytest.mark.parametrize(
    "name,text,message",
    [
        ("p.csv", "item_id,answer\nx,A\n", "no 'prediction' column"),
        ("p.csv", "id,prediction\nx,A\n", "neither an 'item_id' nor an 'index'"),
        ("p.csv", "index,prediction\nx,A\n", "index 'x' is not an integer"),
        ("p.jsonl", "{not json\n", "line 1 is not JSON"),
        ("p.jsonl", '{"prediction": "A"}\n', "neither item_id nor index"),
        ("p.jsonl", "\n", "empty"),
        ("p.txt", "A\n", "cannot read .txt predictions"),
    ],
)
def test_bad_files_give_one_line(tmp_path, name, text, message):
    (tmp_path / name).write_text(text)
    with pytest.raises(UsageError, match=message) as info:
        read_predictions(tmp_path / name)
    assert "\n" not in str(info.value)
