"""HF folder, sharegpt, lmms-eval and native layouts, each read with its real reader."""

import importlib.util
import json

import pytest
import yaml

from medvqa_build.cli.build import export_counts, export_line
from medvqa_build.export import export
from medvqa_build.export.card import random_baselines

from .conftest import make_item


@pytest.fixture
def items():
    return [
        make_item(0, answer="B"),
        make_item(1, options=("a", "b", "c", "d"), answer="D", task="Organ", category="Anatomy"),
        make_item(
            2,
            images=("a.png", "b.png"),
            options=(),
            answer="",
            gt="polyp",
            answer_bbox=(4.0, 5.0, 20.0, 25.0),
            task="Grounding",
            category="Loc",
            coord_format="abs",
        ),
        make_item(3, images=("d.jpg",), split="train"),
    ]


def test_hf_folder_loads_per_config(make_ctx, tmp_path, items):
    from datasets import get_dataset_config_names, load_dataset

    out = tmp_path / "hf"
    stats = export("hf", make_ctx(items, options={"shard_mb": 0.00001}), out)
    assert stats["configs"] == ["all", "grounding", "lesion_type", "organ"]
    assert (out / "data/all/test-00000-of-00003.parquet").is_file()  # one item per shard
    assert get_dataset_config_names(str(out)) == stats["configs"]
    ds = load_dataset(str(out), cache_dir=str(tmp_path / "cache"))
    assert sorted(ds) == ["test", "train"] and len(ds["test"]) == 3
    row = next(r for r in ds["test"] if r["task"] == "Grounding")
    assert len(row["images"]) == 2 and row["images"][1].size == (50, 30)
    assert row["answer_bbox"] == [4.0, 5.0, 20.0, 25.0]
    organ = load_dataset(str(out), "organ", split="test", cache_dir=str(tmp_path / "cache"))
    assert organ["answer"] == ["D"]
    card = (out / "README.md").read_text()
    head = yaml.safe_load(card.split("---")[1])
    assert [c["config_name"] for c in head["dataset_info"]] == stats["configs"]
    assert "## Random baselines" in card and "33.33%" in card and "@misc" in card
    assert "![answer_letters.png](assets/answer_letters.png)" in card
    assert (out / "assets/answer_letters.png").read_bytes()[:4] == b"\x89PNG"
    assert "Warning" not in card


def test_card_says_forced(make_ctx, tmp_path, items):
    export("hf", make_ctx(items, validation={"problems": 2, "failed": True}), tmp_path)
    assert "failed validation (2 problems)" in (tmp_path / "README.md").read_text()


def test_random_baselines(items):
    assert random_baselines(items) == {
        "Grounding": None,
        "Lesion Type": pytest.approx(1 / 3),
        "Organ": 0.25,
    }


@pytest.mark.parametrize("convention", ["abs", "norm1000", "qwen"])
def test_sharegpt(make_ctx, tmp_path, items, convention):
    export("sharegpt", make_ctx(items, options={"convention": convention}), tmp_path)
    info = json.loads((tmp_path / "dataset_info.json").read_text())["Bench_Test"]
    records = json.loads((tmp_path / info["file_name"]).read_text())
    assert len(records) == 4
    for rec in records:
        human, gpt = rec["conversations"]
        assert human["value"].count("<image>") == len(rec["images"])
        assert all((tmp_path / p).is_file() for p in rec["images"])
    box = records[2]["conversations"][1]["value"]
    expected = {
        "abs": "[4, 5, 20, 25]",
        "norm1000": "[80, 167, 400, 833]",
        "qwen": "<|object_ref_start|>polyp<|object_ref_end|><|box_start|>(4,5),(20,25)<|box_end|>",
    }
    assert box == expected[convention]
    assert records[0]["conversations"][1]["value"] == "B. ulcer"


def _load_yaml(path):
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))
    return yaml.load(path.read_text(), Loader=Loader)


def test_lmms_eval(make_ctx, tmp_path, items):
    from datasets import load_dataset

    export("hf", make_ctx(items), tmp_path / "hf")
    stats = export(
        "lmms-eval", make_ctx(items, options={"dataset_path": "me/bench"}), tmp_path / "lmms"
    )
    assert stats["tasks"] == ["bench_test_mcq.yaml", "bench_test_grounding.yaml"]
    spec = importlib.util.spec_from_file_location("lmms_utils", tmp_path / "lmms/utils.py")
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    ds = load_dataset(str(tmp_path / "hf"), split="test", cache_dir=str(tmp_path / "cache"))
    mcq = _load_yaml(tmp_path / "lmms/bench_test_mcq.yaml")
    assert mcq["dataset_path"] == "me/bench" and mcq["dataset_name"] == "all"
    docs = utils.mcq_docs(ds)
    kwargs = mcq["lmms_eval_specific_kwargs"]["default"]
    text = utils.doc_to_text(docs[0], kwargs)
    assert "A. polyp" in text and text.endswith("directly.")
    assert utils.mcq_process_results(docs[0], ["B"])["accuracy"] == 1.0
    assert utils.mcq_process_results(docs[0], ["The answer is (C)."])["accuracy"] == 0.0
    # a single-answer task reads the first letter only: "A polyp" is not a second letter
    assert utils.mcq_process_results(docs[0], ["B. A polyp"])["accuracy"] == 1.0
    assert [m["metric"] for m in mcq["metric_list"]] == ["accuracy", "precision", "recall", "f1"]
    assert "process_results_use_image" not in mcq
    box = _load_yaml(tmp_path / "lmms/bench_test_grounding.yaml")
    assert [m["metric"] for m in box["metric_list"]][:2] == ["iou", "acc_at_0.3"]
    assert box["process_results_use_image"] is True
    g = utils.grounding_docs(ds)
    assert len(g) == 1 and len(utils.doc_to_visual(g[0])) == 2
    res = utils.grounding_process_results(g[0], ["[4, 5, 20, 25]"])
    assert res["iou"] == pytest.approx(1.0) and res["acc_at_0.5"] == 1.0
    assert utils.grounding_process_results(g[0], ["no box"])["iou"] == 0.0


def test_lmms_eval_multi_select(make_ctx, tmp_path, items):
    """A task with a multi-letter answer is written into MULTI_SELECT_TASKS; its replies are
    read as letter sets and scored by exact match and set precision / recall / F1."""
    multi = make_item(
        4, options=("L1/L2", "L2/L3", "L3/L4", "L4/L5", "L5/S1"), answer="B,D", task="Levels"
    )
    stats = export("lmms-eval", make_ctx([*items, multi]), tmp_path)
    assert stats["multi_select_tasks"] == ["Levels"]
    spec = importlib.util.spec_from_file_location("lmms_utils_m", tmp_path / "utils.py")
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    assert sorted(utils.MULTI_SELECT_TASKS) == ["Levels"]
    doc = {"task": "Levels", "options": list(multi.options), "answer": "B,D"}
    assert utils.mcq_process_results(doc, ["B, D"]) == {
        "accuracy": 1.0,
        "precision": 1.0,
        "recall": 1.0,
        "f1": 1.0,
    }
    half = utils.mcq_process_results(doc, ["B. L2/L3"])
    assert half == {"accuracy": 0.0, "precision": 1.0, "recall": 0.5, "f1": pytest.approx(2 / 3)}
    wide = utils.mcq_process_results(doc, ["A, B, D and E"])
    assert wide["accuracy"] == 0.0 and wide["precision"] == 0.5 and wide["recall"] == 1.0
    assert utils.mcq_process_results(doc, ["no idea"])["f1"] == 0.0


def test_medsg_numbering(make_ctx, tmp_path, items):
    """MedSG-Bench's own task numbers and spellings; other tasks follow from Task9."""
    box = {"options": (), "answer": "", "answer_bbox": (4.0, 5.0, 20.0, 25.0), "gt": "x"}
    medsg = [
        make_item(10, task="Non_Registered_Diff", **box),
        make_item(11, task="registered diff", **box),
        make_item(12, task="referring", **box),
    ]
    stats = export("medsg", make_ctx([*medsg, *items]), tmp_path)
    index = stats["tasks"]
    assert index["Task1"] == {"task": "Registered_Diff", "name": "registered diff", "items": 1}
    assert index["Task2"]["task"] == index["Task2"]["name"] == "Non_Registered_Diff"
    assert index["Task8"] == {"task": "referring", "name": "referring", "items": 1}
    assert [k for k in index if int(k[4:]) > 8] == ["Task9", "Task10", "Task11"]
    assert [index[k]["task"] for k in ("Task9", "Task10", "Task11")] == [
        "grounding",
        "lesion_type",
        "organ",
    ]
    recs = json.loads((tmp_path / "Task1.json").read_text())
    assert recs[0]["task"] == "Registered_Diff" and recs[0]["images"][0].startswith("Task1/")


def test_medsg_refuses_two_tasks_for_one_number(make_ctx, tmp_path):
    from medvqa_build.errors import UsageError

    box = {"options": (), "answer": "", "answer_bbox": (4.0, 5.0, 20.0, 25.0), "gt": "x"}
    two = [make_item(0, task="patch", **box), make_item(1, task="Patch", **box)]
    with pytest.raises(UsageError, match="Task6"):
        export("medsg", make_ctx(two), tmp_path)


def test_medsg_and_spinebench(make_ctx, tmp_path, items):
    export("medsg", make_ctx(items), tmp_path / "medsg")
    index = json.loads((tmp_path / "medsg/tasks.json").read_text())
    n = next(k for k, v in index.items() if v["name"] == "Grounding")
    recs = json.loads((tmp_path / f"medsg/{n}.json").read_text())
    assert recs[0]["answer"] == [4, 5, 20, 25] and recs[0]["size"] == [50, 30]
    assert all(
        (tmp_path / "medsg" / p).is_file() and p.startswith(f"{n}/") for p in recs[0]["images"]
    )
    stats = export("spinebench", make_ctx(items), tmp_path / "sb")
    recs = json.loads((tmp_path / "sb/Bench_Test.json").read_text())
    assert stats["left_out"] == {"not multiple-choice": 1} and len(recs) == stats["written"] == 3
    assert export_counts(stats) == "3 items, left out 1: not multiple-choice 1"  # the CLI's words
    assert export_line(stats, "spinebench", tmp_path / "sb") == (
        f"exported 3 items as spinebench to {tmp_path / 'sb'}; left out 1: not multiple-choice 1"
    )
    assert recs[0]["answers"] == ["ulcer"] and recs[0]["options"] == ["polyp", "ulcer", "bleeding"]
    assert (tmp_path / "sb" / recs[0]["image"]).is_file()
