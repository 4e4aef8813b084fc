"""The VLMEvalKit TSV read the way VLMEvalKit reads it (pandas defaults + its image rules)."""

import ast
import base64
import hashlib
import io

import pandas as pd
import pytest
from PIL import Image

from medvqa_build.errors import UsageError
from medvqa_build.export import export
from medvqa_build.export.tsv_text import decode_cell

from .conftest import make_item


def load_images(df: pd.DataFrame) -> dict[int, list[bytes]]:
    """VLMEvalKit's ImageBaseDataset rules: <= 64 chars = another row's index; '[...]' = list."""
    cells = {str(i): str(c) for i, c in zip(df["index"], df["image"], strict=True)}
    out = {}
    for key, cell in cells.items():
        if len(cell) <= 64:
            assert len(cells[cell]) > 64, "a reference must point at a row with the image itself"
            cell = cells[cell]
        parts = ast.literal_eval(cell) if cell.startswith("[") and cell.endswith("]") else [cell]
        out[int(key)] = [base64.b64decode(p) for p in parts]
    return out


def test_traps(make_ctx, tmp_path, image_root):
    items = [
        make_item(0, options=("None", "NA", "polyp"), answer="A"),
        make_item(1, options=("null", "N/A", "n/a", "nan", "#N/A", "6"), answer="F", gt="6"),
        make_item(2, images=("a.png", "b.png"), options=("x", "y"), answer="B", category=""),
        make_item(3, images=("a.png",), options=("p", "q", "r"), answer="C"),
        make_item(4, images=("c.png",), options=("p", "q", "r", "s", "7"), answer="E"),
    ]
    stats = export("vlmeval", make_ctx(items), tmp_path)
    df = pd.read_csv(tmp_path / "Bench_Test.tsv", sep="\t")
    assert stats["rows"] == 5 and stats["quoted_cells"] > 0
    for row, item in zip(df.to_dict("records"), items, strict=True):
        shown = [decode_cell(str(row[L])) for L in "ABCDEF" if not pd.isna(row[L])]
        assert shown == list(item.options)  # no option vanished or became 6.0
        assert isinstance(row["category"], str) and row["category"]
        assert row["l2-category"] == row["task"] == item.task
    assert df["category"][2] == "Lesion Type"  # empty category replaced by the task
    images = load_images(df)
    assert images[3] == [(image_root / "a.png").read_bytes()]
    assert len(df["image"][3]) <= 64  # a repeated image is a reference to the first row
    assert images[2] == [(image_root / "a.png").read_bytes(), (image_root / "b.png").read_bytes()]
    paths = ast.literal_eval(df["image_path"][2])
    assert len(paths) == 2 and len(set(paths)) == 2
    assert df["image_path"].is_unique
    Image.open(io.BytesIO(images[4][0])).verify()
    md5 = (tmp_path / "md5sums.txt").read_text().split()
    assert md5 == [
        hashlib.md5((tmp_path / "Bench_Test.tsv").read_bytes()).hexdigest(),
        "Bench_Test.tsv",
    ]


def test_circular_copies(make_ctx, tmp_path):
    items = [make_item(0, answer="B"), make_item(1, options=("a", "b"), answer="A")]
    export("vlmeval", make_ctx(items, options={"circular": True}), tmp_path)
    df = pd.read_csv(tmp_path / "Bench_Test.tsv", sep="\t")
    assert sorted(df["index"]) == [0, 1, 1_000_000, 1_000_001, 2_000_000]
    for row in df.to_dict("records"):
        g = row["index"] % 1_000_000
        assert row[row["answer"]] == items[g].gt
        assert len(str(row["image"])) > 64 or int(row["image"]) in set(df["index"])


def test_parts_with_md5(make_ctx, tmp_path):
    items = [make_item(k, images=(f"{'abc'[k % 3]}.png",)) for k in range(9)]
    stats = export("vlmeval", make_ctx(items, options={"part_size_mb": 0.003}), tmp_path)
    assert len(stats["parts"]) > 1
    seen = []
    for line in (tmp_path / "md5sums.txt").read_text().splitlines():
        digest, name = line.split("  ")
        assert hashlib.md5((tmp_path / name).read_bytes()).hexdigest() == digest
        df = pd.read_csv(tmp_path / name, sep="\t")
        load_images(df)  # every reference resolves inside its own part
        seen += df["index"].tolist()
    assert sorted(seen) == list(range(9))


@pytest.mark.parametrize("name", ["My_MMBench", "x_circular", "CCBench-med"])
def test_circular_names_refused(make_ctx, tmp_path, name):
    with pytest.raises(UsageError, match="circular"):
        export("vlmeval", make_ctx([make_item(0)], name=name), tmp_path)


def test_grounding_items_left_out(make_ctx, tmp_path):
    items = [make_item(0), make_item(1, options=(), answer="", answer_bbox=(1, 2, 10, 12))]
    stats = export("vlmeval", make_ctx(items), tmp_path)
    assert stats["rows"] == stats["written"] == 1
    assert stats["left_out"] == {"not multiple-choice": 1}


def test_multi_select_ships_a_dataset_class(make_ctx, tmp_path):
    """A build with a multi-letter answer gets medvqa_vlmeval.py naming its TSV and tasks;
    its letter-set scoring (importable without VLMEvalKit) reads every letter."""
    import importlib.util

    multi = make_item(
        9, options=("L1/L2", "L2/L3", "L3/L4", "L4/L5", "L5/S1"), answer="A,C", task="Levels"
    )
    stats = export("vlmeval", make_ctx([make_item(0), multi]), tmp_path)
    assert stats["multi_select_tasks"] == ["Levels"]
    spec = importlib.util.spec_from_file_location("medvqa_vlmeval", tmp_path / "medvqa_vlmeval.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.DATASETS == ("Bench_Test",)
    assert sorted(module.MULTI_SELECT_TASKS) == ["Levels"]
    assert module.parse_letters("A and C", 5) == ["A", "C"]
    assert module.set_scores(["A", "C"], ["A", "C"])["hit"] == 1
    assert module.set_scores(["A"], ["A", "C"]) == {
        "hit": 0,
        "precision": 1.0,
        "recall": 0.5,
        "f1": pytest.approx(2 / 3),
    }
    # a single-answer build gets no class: stock VLMEvalKit scores it as it is
    export("vlmeval", make_ctx([make_item(0)]), tmp_path / "single")
    assert not (tmp_path / "single" / "medvqa_vlmeval.py").exists()
