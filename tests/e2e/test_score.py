"""``medvqa-build score`` on real builds: the demo (plain, VLMEvalKit and lmms-eval files,
circular export), a MedSG build (grounding) and a SpineBench build (multi-select); oracle,
random and constant-"A" replies, and the bad files it refuses with exit 2."""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import random
from pathlib import Path

import pytest
import yaml

from medvqa_build.cli import main
from medvqa_build.pipeline import BuildDir

from ..fixtures import fixture_writer
from ..fixtures.sources import brats, msd

REPO = Path(__file__).resolve().parents[2]


def _run(recipe: dict, tmp: Path) -> Path:
    path = tmp / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    out = tmp / "build"
    assert main(["run", str(path), "-o", str(out), "-q"]) == 0
    return out


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    """The demo recipe, built once for this module (~10 s)."""
    recipe = yaml.safe_load((REPO / "recipes/demo.yaml").read_text())
    return _run(recipe, tmp_path_factory.mktemp("demo"))


def _items(build: Path):
    return list(BuildDir.open(build).items())


def _jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _score(build: Path, *files: Path, out: Path, extra=()) -> dict:
    assert main(["score", str(build), *map(str, files), "-o", str(out), *extra]) == 0
    return json.loads((out / "score.json").read_text())


def test_oracle_random_and_constant_a_on_the_demo(demo, tmp_path):
    items = [i for i in _items(demo) if i.options]
    oracle = _jsonl(
        tmp_path / "oracle.jsonl", [{"item_id": i.item_id, "prediction": i.answer} for i in items]
    )
    result = _score(demo, oracle, out=tmp_path / "o", extra=["--card"])
    assert result["single_choice"]["all"]["accuracy"] == 1.0
    assert result["single_choice"]["all"]["n"] == len(items)
    assert (tmp_path / "o" / "leaderboard.md").read_text().count("100.00") >= 2

    rng = random.Random(0)
    rows = [
        {"item_id": i.item_id, "prediction": rng.choice("ABCD"[: len(i.options)])} for i in items
    ]
    acc = _score(demo, _jsonl(tmp_path / "random.jsonl", rows), out=tmp_path / "r")[
        "single_choice"
    ]["all"]
    se = math.sqrt(acc["chance"] * (1 - acc["chance"]) / acc["n"])
    assert abs(acc["accuracy"] - acc["chance"]) <= 2 * se

    const = _jsonl(tmp_path / "a.jsonl", [{"item_id": i.item_id, "prediction": "A"} for i in items])
    share = sum(i.answer == "A" for i in items) / len(items)
    assert _score(demo, const, out=tmp_path / "a")["single_choice"]["all"]["accuracy"] == share
    report = (tmp_path / "a" / "report.md").read_text()
    for title in ("By task", "By subtask", "By scene", "By prompt level", "By source", "By split"):
        assert f"### {title}" in report
    assert "Category averages (EndoBench style)" in report


def _vlmeval_result(tsv: Path, out: Path, reply) -> Path:
    """What VLMEvalKit writes after inference: the TSV's columns less the image, plus
    ``prediction``."""
    with tsv.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    with out.open("w", newline="", encoding="utf-8") as fh:
        fields = [c for c in rows[0] if c not in ("image", "image_path")] + ["prediction"]
        writer = csv.DictWriter(fh, fields, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "prediction": reply(row)})
    return out


def test_vlmeval_result_and_circular_export(demo, tmp_path):
    assert (
        main(["export", str(demo), "--format", "vlmeval", "--circular", "-o", str(tmp_path / "v")])
        == 0
    )
    tsv = next((tmp_path / "v").glob("*.tsv"))
    oracle = _vlmeval_result(tsv, tmp_path / "m_oracle.csv", lambda r: r["answer"])
    result = _score(demo, oracle, out=tmp_path / "o")
    assert result["predictions"][0]["client"] == "vlmeval"
    assert result["circular"]["all"]["plain"] == result["circular"]["all"]["circular"] == 1.0
    # the option's text in every rotation: right in all of them
    text = _vlmeval_result(tsv, tmp_path / "m_text.csv", lambda r: r[r["answer"]])
    assert _score(demo, text, out=tmp_path / "t")["circular"]["all"]["circular"] == 1.0
    # always "A": right on the rotation that puts the answer first, never on all of them
    const = _vlmeval_result(tsv, tmp_path / "m_a.csv", lambda r: "A")
    circ = _score(demo, const, out=tmp_path / "a")["circular"]["all"]
    assert circ["circular"] == 0.0 and 0.15 < circ["plain"] < 0.35
    assert "| all |" in (tmp_path / "a" / "report.md").read_text().split("## Circular")[1]


def _lmms_utils(build: Path, tmp: Path):
    assert main(["export", str(build), "--format", "lmms-eval", "-o", str(tmp / "lmms")]) == 0
    spec = importlib.util.spec_from_file_location("lmms_task_utils", tmp / "lmms" / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lmms_eval_samples_agree_with_the_tasks_own_scoring(demo, tmp_path):
    """The exported task's process_results (what lmms-eval runs) and ``score`` give the same
    single-choice accuracy on one samples file of varied replies."""
    utils = _lmms_utils(demo, tmp_path)
    rng = random.Random(3)
    lines, hits = [], []
    for n, item in enumerate(i for i in _items(demo) if i.options):
        letter = rng.choice("ABCD"[: len(item.options)])
        reply = rng.choice(
            [letter, f"({letter})", f"Answer: {letter}", f"{letter}. text", "b", "none"]
        )
        doc = {**item.to_row(), "images": None}
        metrics = utils.mcq_process_results(doc, [reply])
        hits.append(metrics["accuracy"])
        doc.pop("images")
        lines.append(
            {
                "doc_id": n,
                "doc": doc,
                "target": item.answer,
                "resps": [[reply]],
                "filtered_resps": [reply],
                **metrics,
            }
        )
    result = _score(demo, _jsonl(tmp_path / "samples.jsonl", lines), out=tmp_path / "s")
    assert result["single_choice"]["all"]["accuracy"] == pytest.approx(sum(hits) / len(hits))
    agree = result["client_per_sample_agreement"]
    assert agree["agree"] == agree["n"] == len(lines)


def test_lmms_eval_07_samples_without_doc_are_read_by_doc_id(demo, tmp_path):
    """lmms-eval 0.7 logs no ``doc``: a sample is named by ``doc_id``, its position among the
    task's docs (the test split's multiple-choice items in export order). The ``target`` each
    line carries must be that item's answer, so a shifted file is refused, not misscored."""
    items = [i for i in _items(demo) if i.options]
    rng = random.Random(4)
    replies = [rng.choice("ABCD"[: len(i.options)]) for i in items]
    lines = [
        {"doc_id": n, "target": i.answer, "filtered_resps": r, "input": i.question}
        for n, (i, r) in enumerate(zip(items, replies, strict=True))
    ]
    path = _jsonl(tmp_path / "20261205_samples_medvqa_demo_mcq.jsonl", lines)
    result = _score(demo, path, out=tmp_path / "s")["single_choice"]["all"]
    expected = sum(r == i.answer for i, r in zip(items, replies, strict=True)) / len(items)
    assert result["n"] == len(items) and result["accuracy"] == pytest.approx(expected)
    shifted = [{**line, "doc_id": line["doc_id"] + 1} for line in lines[:-1]]
    bad = _jsonl(tmp_path / "20261205_samples_medvqa_demo_mcq_shifted.jsonl", shifted)
    assert main(["score", str(demo), str(bad), "-o", str(tmp_path / "b")]) == 2


def test_bad_files_exit_2_with_one_line(demo, tmp_path, capsys):
    items = [i for i in _items(demo) if i.options]
    cases = {
        "unknown": [{"item_id": "no-such-item", "prediction": "A"}],
        "duplicate": [{"item_id": items[0].item_id, "prediction": "A"}] * 2,
        "foreign": [
            {
                "item_id": items[0].item_id,
                "prediction": "A",
                "build_fingerprint": "0123456789abcdef",
            }
        ],
    }
    for name, rows in cases.items():
        capsys.readouterr()
        path = _jsonl(tmp_path / f"{name}.jsonl", rows)
        assert main(["score", str(demo), str(path), "-o", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error:") and path.name in err[0]
    # a VLMEvalKit result of another build: its answers differ from this build's
    capsys.readouterr()
    assert main(["export", str(demo), "--format", "vlmeval", "-o", str(tmp_path / "v")]) == 0
    tsv = next((tmp_path / "v").glob("*.tsv"))
    other = _vlmeval_result(tsv, tmp_path / "other.csv", lambda r: "A")
    rows = list(csv.DictReader(other.open()))
    for row in rows:
        row["answer"] = "B" if row["answer"] != "B" else "C"
    with other.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    capsys.readouterr()
    assert main(["score", str(demo), str(other)]) == 2
    assert "different build" in capsys.readouterr().err
    # --circular is for the vlmeval format
    assert (
        main(["export", str(demo), "--format", "hf", "--circular", "-o", str(tmp_path / "h")]) == 2
    )


def test_missing_replies_are_wrong_and_listed(demo, tmp_path):
    items = [i for i in _items(demo) if i.options]
    rows = [{"item_id": i.item_id, "prediction": i.answer} for i in items[:-5]]
    result = _score(demo, _jsonl(tmp_path / "p.jsonl", rows), out=tmp_path / "m")
    assert result["missing"] == [i.item_id for i in items[-5:]]
    assert result["single_choice"]["all"]["correct"] == len(items) - 5
    assert items[-1].item_id in (tmp_path / "m" / "report.md").read_text()


def test_medsg_oracle_boxes_score_iou_1(tmp_path):
    roots = {"msd": msd.write(tmp_path / "msd"), "brats": brats.write(tmp_path / "brats")}
    recipe = yaml.safe_load((REPO / "recipes" / "medsg.yaml").read_text())
    for source in recipe["sources"]:
        source["root"] = str(roots[source["id"]])
    for task in recipe["tasks"]:
        task["quota"] = 2
    recipe["export"]["formats"] = ["hf"]
    build = _run(recipe, tmp_path)
    items = _items(build)
    rows = [{"item_id": i.item_id, "prediction": list(i.answer_bbox)} for i in items]
    result = _score(build, _jsonl(tmp_path / "oracle.jsonl", rows), out=tmp_path / "o")
    g = result["grounding"]
    assert g["all"]["n"] == len(items) == 16 and len(g["by_task"]) == 8
    assert g["all"]["mean_iou"] == pytest.approx(1.0) and g["all"]["acc@0.5"] == 1.0
    assert g["task_average"]["acc@0.5"] == 1.0
    # a reply with no box: IoU 0, counted unparseable
    rows[0]["prediction"] = "I cannot tell"
    result = _score(build, _jsonl(tmp_path / "one_bad.jsonl", rows), out=tmp_path / "b")
    assert result["grounding"]["all"]["acc@0.5"] == pytest.approx(15 / 16)
    assert result["unparseable"]["grounding"]["unparseable"] == 1


@pytest.mark.slow
def test_spinebench_multi_select(tmp_path):
    recipe = yaml.safe_load((REPO / "recipes/spinebench.yaml").read_text())
    recipe["embedder"] = "offline"
    for source in recipe["sources"]:
        source["root"] = str(fixture_writer(source["id"])(tmp_path / source["id"]))
    recipe["tasks"][0]["n_options"] = 3  # the tiny fixtures hold few diseases
    recipe["tasks"][0]["negatives"]["params"]["library_size"] = 4
    recipe["export"]["formats"] = ["hf"]
    build = _run(recipe, tmp_path)
    items = _items(build)
    multi = [i for i in items if i.task == "Lesion Localization"]
    assert any("," in i.answer for i in multi)
    oracle = _jsonl(
        tmp_path / "oracle.jsonl",
        [{"item_id": i.item_id, "prediction": i.answer.replace(",", " and ")} for i in items],
    )
    result = _score(build, oracle, out=tmp_path / "o")
    ms = result["multi_select"]["all"]
    assert ms["n"] == len(multi) and ms["f1"] == ms["exact"] == 1.0
    assert result["single_choice"]["all"]["accuracy"] == 1.0
    const = _jsonl(tmp_path / "a.jsonl", [{"item_id": i.item_id, "prediction": "A"} for i in items])
    result = _score(build, const, out=tmp_path / "a")
    assert result["multi_select"]["all"]["exact"] == pytest.approx(
        sum(i.answer == "A" for i in multi) / len(multi)
    )
    single = [i for i in items if i.task != "Lesion Localization"]
    share = sum(i.answer == "A" for i in single) / len(single)
    assert result["single_choice"]["all"]["accuracy"] == pytest.approx(share)
    # a client reads one letter at most: the report says why it scores these differently
    assert any(
        "multi-select" in d["why"]
        for d in _score(build, oracle, out=tmp_path / "o2", extra=["--parser", "vlmeval"])[
            "differences"
        ]
    )
