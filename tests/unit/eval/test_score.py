"""The scorer on hand-made items: oracle, random and constant replies, multi-select,
grounding, circular rotations, missing replies and the bad files it refuses."""

import json
import math
import random

import pytest

from medvqa_build.errors import UsageError
from medvqa_build.eval.predictions import read_predictions
from medvqa_build.eval.score import BuildEntries, bootstrap_ci, score_predictions
from medvqa_build.eval.score_report import leaderboard_table, report_markdown
from medvqa_build.export.vlmeval import rotate
from medvqa_build.records import Item

LETTERS = "ABCD"
OPTS = ("polyp", "ulcer", "bleeding", "angiectasia")


def _item(n, answer="A", options=OPTS, task="Lesion Type", **kw):
    base = dict(
        item_id=f"it{n:04d}",
        benchmark="B",
        category="Lesion",
        task=task,
        subtask=task,
        source="synthetic-endo" if n % 2 else "other",
        sample_ids=(f"s:{n}",),
        images=("a.png",),
        question=f"Q{n}?",
        options=tuple(options),
        answer=answer,
        gt="",
        scene="Colonoscopy" if n % 3 else "Gastroscopy",
        split="test",
    )
    base.update(kw)
    return Item(**base)


def _mcq(n_items=400, seed=1):
    rng = random.Random(seed)
    return [_item(n, answer=rng.choice(LETTERS)) for n in range(n_items)]


def _write(tmp_path, rows, name="pred.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _score(items, tmp_path, rows, **kw):
    files = [read_predictions(_write(tmp_path, rows))]
    return score_predictions(BuildEntries(items), files, lambda ref: (336, 336), **kw)


def test_oracle_scores_everything_right(tmp_path):
    items = _mcq()
    result = _score(
        items, tmp_path, [{"item_id": i.item_id, "prediction": i.answer} for i in items]
    )
    sc = result["single_choice"]
    assert sc["all"]["accuracy"] == 1.0 and sc["all"]["n"] == 400
    assert set(sc["by"]) == {"task", "subtask", "scene", "prompt_level", "source", "split"}
    assert all(r["accuracy"] == 1.0 for r in sc["by"]["scene"].values())
    assert result["missing"] == [] and result["unparseable"]["all"]["unparseable"] == 0


def test_random_replies_score_near_chance(tmp_path):
    items = _mcq(2000)
    rng = random.Random(7)
    rows = [{"item_id": i.item_id, "prediction": rng.choice(LETTERS)} for i in items]
    acc = _score(items, tmp_path, rows)["single_choice"]["all"]
    se = math.sqrt(0.25 * 0.75 / 2000)
    assert acc["chance"] == 0.25
    assert abs(acc["accuracy"] - 0.25) <= 2 * se
    assert acc["ci95"][0] < 0.25 < acc["ci95"][1]


def test_constant_a_equals_the_share_of_a(tmp_path):
    items = _mcq()
    share = sum(i.answer == "A" for i in items) / len(items)
    rows = [{"item_id": i.item_id, "prediction": "A"} for i in items]
    assert _score(items, tmp_path, rows)["single_choice"]["all"]["accuracy"] == share


def test_multi_select_precision_recall_f1(tmp_path):
    items = [
        _item(0, "A,C", task="Loc"),
        _item(1, "B", task="Loc"),
        _item(2, "B,C,D", task="Loc"),
    ]
    rows = [
        {"item_id": "it0000", "prediction": "A and C"},  # exact
        {"item_id": "it0001", "prediction": "B, D"},  # P 1/2, R 1
        {"item_id": "it0002", "prediction": "ulcer"},  # P 1, R 1/3
    ]
    ms = _score(items, tmp_path, rows)["multi_select"]["all"]
    assert ms["n"] == 3
    assert ms["exact"] == pytest.approx(1 / 3)
    assert ms["precision"] == pytest.approx((1 + 0.5 + 1) / 3)
    assert ms["recall"] == pytest.approx((1 + 1 + 1 / 3) / 3)
    assert ms["f1"] == pytest.approx((1 + 2 / 3 + 0.5) / 3)
    assert ms["chance_exact"] == pytest.approx(1 / 15)


def test_grounding_iou_and_acc_in_the_items_coordinate_format(tmp_path):
    items = [
        _item(0, "", options=(), task="G1", answer_bbox=(10, 10, 110, 110), coord_format="abs"),
        _item(1, "", options=(), task="G1", answer_bbox=(0, 0, 168, 168), coord_format="norm1000"),
        _item(2, "", options=(), task="G2", answer_bbox=(0, 0, 100, 100), coord_format="abs"),
    ]
    rows = [
        {"item_id": "it0000", "prediction": "[10, 10, 110, 110]"},
        {"item_id": "it0001", "prediction": "[0, 0, 500, 500]"},  # 0-1000 of 336 px
        {"item_id": "it0002", "prediction": "[50, 0, 150, 100]"},  # IoU 1/3
    ]
    g = _score(items, tmp_path, rows)["grounding"]
    assert g["by_task"]["G1"]["mean_iou"] == pytest.approx(1.0)
    assert g["by_task"]["G2"]["mean_iou"] == pytest.approx(1 / 3)
    assert g["all"]["acc@0.5"] == pytest.approx(2 / 3)
    assert g["task_average"]["mean_iou"] == pytest.approx((1 + 1 / 3) / 2)


def test_missing_replies_count_wrong_and_are_listed(tmp_path):
    items = _mcq(10)
    rows = [{"item_id": i.item_id, "prediction": i.answer} for i in items[:7]]
    result = _score(items, tmp_path, rows)
    assert result["single_choice"]["all"]["accuracy"] == 0.7
    assert result["missing"] == [i.item_id for i in items[7:]]
    assert "it0007" in report_markdown(result)


def test_circular_needs_every_rotation_right(tmp_path):
    items = _mcq(8)
    rows = []
    for n, item in enumerate(items):
        for k in range(4):
            _, answer = rotate(item.options, item.answer, k)
            right = n < 4 or k == 0  # the last four items: right only unrotated
            rows.append(
                {"item_id": item.item_id, "rotation": k, "prediction": answer if right else "Z"}
            )
    circ = _score(items, tmp_path, rows)["circular"]["all"]
    assert circ["plain"] == 1.0 and circ["circular"] == 0.5


def test_unknown_duplicate_and_foreign_files_are_refused(tmp_path):
    items = _mcq(5)
    with pytest.raises(UsageError, match="1 prediction.* this build does not have.*nope"):
        _score(items, tmp_path, [{"item_id": "nope", "prediction": "A"}])
    with pytest.raises(UsageError, match="answered more than once"):
        _score(items, tmp_path, [{"item_id": "it0001", "prediction": "A"}] * 2)
    with pytest.raises(UsageError, match="made for build deadbeef"):
        _score(
            items,
            tmp_path,
            [{"item_id": "it0001", "prediction": "A", "build_fingerprint": "deadbeef"}],
        )
    wrong = "B" if items[1].answer != "B" else "C"
    with pytest.raises(UsageError, match="different build"):
        _score(items, tmp_path, [{"item_id": "it0001", "prediction": "A", "answer": wrong}])


def test_vlmeval_rows_by_index_and_rotation(tmp_path):
    """VLMEvalKit's indices: the item's row among MCQ items, + k * 1e6 for rotation k."""
    items = [_item(0, "", options=(), answer_bbox=(0, 0, 5, 5)), *_mcq(3)]
    path = tmp_path / "model_Bench.csv"
    lines = ["index,question,A,B,C,D,answer,prediction"]
    for k, item in enumerate(items[1:]):
        for rot in range(4):
            options, answer = rotate(item.options, item.answer, rot)
            lines.append(
                f"{k + rot * 1_000_000},{item.question},{','.join(options)},{answer},{answer}"
            )
    path.write_text("\n".join(lines) + "\n")
    found = read_predictions(path)
    assert found.client == "vlmeval"
    result = score_predictions(BuildEntries(items), [found], lambda r: (10, 10))
    assert result["circular"]["all"]["circular"] == 1.0
    assert result["not_scored"] == ["grounding"]
    assert result["predictions"][0]["parser"] == "vlmeval"


def test_bootstrap_is_seeded_and_brackets_the_accuracy():
    assert bootstrap_ci(30, 100, 0, "x") == bootstrap_ci(30, 100, 0, "x")
    low, high = bootstrap_ci(30, 100, 0, "x")
    assert low < 0.3 < high and high - low == pytest.approx(
        2 * 1.96 * math.sqrt(0.21 / 100), abs=0.03
    )
    assert bootstrap_ci(0, 0, 0, "x") == [None, None]


def test_leaderboard_row(tmp_path):
    items = _mcq(20)
    result = _score(
        items, tmp_path, [{"item_id": i.item_id, "prediction": i.answer} for i in items]
    )
    table = leaderboard_table(result, "oracle")
    assert table.splitlines()[2].startswith("| oracle | 100.00 | 100.00 |")


def test_the_report_says_why_a_client_scores_differently(tmp_path):
    """VLMEvalKit cannot tell "polyp with bleeding" from "polyp"; the report lists the reply,
    and ``--parser medvqa`` scores it right."""
    nested = ("polyp", "polyp with bleeding", "ulcer", "normal")
    items = [_item(0, "B", options=nested), _item(1, "A,C", task="Loc")]
    path = tmp_path / "m_B.csv"
    path.write_text(
        "index,question,A,B,C,D,answer,prediction\n"
        "0,Q0?,polyp,polyp with bleeding,ulcer,normal,B,polyp with bleeding\n"
        '1,Q1?,polyp,ulcer,bleeding,angiectasia,"A,C","A,C"\n'
    )
    entries = BuildEntries(items)
    result = score_predictions(entries, [read_predictions(path)], lambda r: (1, 1))
    assert result["single_choice"]["all"]["accuracy"] == 0.0
    assert result["multi_select"]["all"]["exact"] == 1.0
    why = {d["item_id"]: d["why"] for d in result["differences"]}
    assert "inside another" in why["it0000"] and "multi-select" in why["it0001"]
    assert "polyp with bleeding" in report_markdown(result)
    medvqa = score_predictions(entries, [read_predictions(path)], lambda r: (1, 1), parser="medvqa")
    assert medvqa["single_choice"]["all"]["accuracy"] == 1.0
