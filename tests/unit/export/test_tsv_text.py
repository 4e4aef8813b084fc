"""Cells survive pandas' default read_csv (VLMEvalKit's reader) and decode back exactly."""

import csv
import io

import pandas as pd
import pytest
from pandas._libs.parsers import STR_NA_VALUES

from medvqa_build.export.tsv_text import NA_TEXTS, decode_cell, encode_column


def roundtrip(columns: dict[str, list]) -> pd.DataFrame:
    encoded = {k: encode_column(v) for k, v in columns.items()}
    buf = io.StringIO()
    writer = csv.writer(buf, delimiter="\t", lineterminator="\n")
    writer.writerow(list(encoded))
    for row in zip(*encoded.values(), strict=True):
        writer.writerow(row)
    return pd.read_csv(io.StringIO(buf.getvalue()), sep="\t")


def test_na_list_matches_pandas():
    assert set(STR_NA_VALUES) <= NA_TEXTS


@pytest.mark.parametrize("text", sorted(NA_TEXTS - {""}) + ['"None"', '""NA""', "None "])
def test_na_texts_read_back_as_text(text):
    df = roundtrip({"A": [text, "polyp"], "B": ["x", text]})
    assert [decode_cell(c) for c in df["A"]] == [text, "polyp"]
    assert decode_cell(df["B"][1]) == text


@pytest.mark.parametrize(
    "values",
    [
        ["6", None, "3"],
        ["06", "1e3", "7"],
        ["true", "false", None],
        ["1.50", "2", None],
        ["-1", "+2", "3"],
    ],
)
def test_typed_columns_stay_text(values):
    df = roundtrip({"E": values})
    got = [None if pd.isna(c) else decode_cell(str(c)) for c in df["E"]]
    assert got == values
    assert df["E"].dtype == object or str(df["E"].dtype) in ("str", "string")


def test_numbers_in_text_columns_are_left_alone():
    df = roundtrip({"A": ["0", "polyp", "More than 4", "007"]})
    assert df["A"].tolist() == ["0", "polyp", "More than 4", "007"]


def test_quoted_text_is_reversible():
    for text in ['"6"', '"polyp"', 'say "None"']:
        df = roundtrip({"A": [text, "x"]})
        assert decode_cell(df["A"][0]) == text
