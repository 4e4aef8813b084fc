"""recipes/medsg.yaml over the NIfTI replicas: all eight grounding tasks through validation and
the MedSG-Bench / HF exports."""

import json

import yaml

from medvqa_build.cli import main

from ..fixtures.sources import brats, msd

TASKS = {
    "Registered_Diff",
    "Non_Registered_Diff",
    "multi_view",
    "object_tracking",
    "concept",
    "patch",
    "crossmodal",
    "referring",
}


def test_medsg_build(tmp_path, repo, capsys):
    roots = {"msd": msd.write(tmp_path / "msd"), "brats": brats.write(tmp_path / "brats")}
    recipe = yaml.safe_load((repo / "recipes" / "medsg.yaml").read_text())
    for source in recipe["sources"]:
        source["root"] = str(roots[source["id"]])
    for task in recipe["tasks"]:
        task["quota"] = 2
    recipe["export"]["formats"] = ["hf", "medsg"]
    path = tmp_path / "medsg.yaml"
    path.write_text(yaml.safe_dump(recipe))
    out = tmp_path / "build"
    assert main(["run", str(path), "-o", str(out), "-q"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert set(report["items_per_task"]) == TASKS and report["validation"]["problems"] == 0
    records = [
        r for f in sorted((out / "medsg").glob("Task*.json")) for r in json.loads(f.read_text())
    ]
    assert len(records) == 16 and {r["task"] for r in records} == TASKS
    # MedSG-Bench's own numbering: Task1 = Registered_Diff ... Task8 = referring
    index = json.loads((out / "medsg" / "tasks.json").read_text())
    assert index["Task1"]["task"] == "Registered_Diff" and index["Task8"]["task"] == "referring"
    for n, entry in index.items():
        assert {r["task"] for r in json.loads((out / "medsg" / f"{n}.json").read_text())} == {
            entry["task"]
        }
    for r in records:
        x1, y1, x2, y2 = r["answer"]
        assert 0 <= x1 < x2 <= 336 and 0 <= y1 < y2 <= 336 and 2 <= len(r["images"]) <= 6
        assert all((out / "medsg" / p).is_file() for p in r["images"])
