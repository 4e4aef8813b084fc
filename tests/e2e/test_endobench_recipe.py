"""recipes/endobench.yaml end to end on the synthetic source: every EndoBench task and subtask
comes out with the paper's taxonomy strings, and the random-guess baseline its option counts
imply lies within two standard errors of EndoBench's published random row.

The recipe's tasks are kept (generator, taxonomy, option counts, prompt level, quota ratios)
and pointed at synthetic-endo with the parameters its annotations allow. synthetic-endo has
no surgical step and no per-instrument actions, so Surgical Step, Surgical Action and
Tool-Tissue Interaction read the frame's phase here (plumbing only; their semantics are
tested in tests/unit/tasks on PSI-AVA-like samples).
"""

import json

import pandas as pd
import pytest
import yaml

from medvqa_build.eval.baselines import ENDOBENCH_RANDOM, baseline_rows, format_baseline_table
from medvqa_build.pipeline import build
from medvqa_build.recipe import Recipe

SCALE = 0.03
CATEGORIES = {
    "Anatomical Structure Recognition": {"Landmark Identification", "Organ Identification"},
    "Lesion Analysis and Grading": {
        "Lesion Quantification",
        "Lesion Type Identification",
        "Lesion Severity Grading",
    },
    "Surgical Workflow and Operation Analysis": {
        "Preoperative Assessment",
        "Macro Phases Identification",
        "Micro Operation Analysis",
        "Instrument Management",
    },
    "Spatial Localization and Region Understanding": {
        "Visual Grounding",
        "Region Selection",
        "Region Recognition",
    },
}
SUBTASKS = {
    "Lesion Quantification": {"Polyp Counting", "Lesion Counting"},
    "Macro Phases Identification": {"Surgical Phase", "Surgical Step"},
    "Micro Operation Analysis": {"Surgical Action", "Tool-Tissue Interaction"},
    "Instrument Management": {"Instrument Counting", "Instrument Presence"},
    "Region Recognition": {"Box", "Contour", "Multi-region", "Coordinate"},
}
FINDING_ORGANS = {
    "polyp": "large intestine",
    "ulcer": "stomach",
    "bleeding": "small intestine",
    "angiectasia": "small intestine",
    "normal mucosa": "esophagus",
}
SYNTHETIC_PARAMS = {
    "landmark_identification": {},
    "organ_identification": {
        "answer_map": FINDING_ORGANS,
        "vocabulary": ["esophagus", "stomach", "small intestine", "large intestine"],
    },
    "polyp_counting": {"labels": ["polyp"], "count_empty": True},
    "lesion_counting": {"count_empty": True},
    "lesion_identification": {"vocabulary": ["erosion", "erythema"]},
    "severity_grading": {"vocabulary": ["erosion", "erythema"]},
    "preoperative_assessment": {},
    "surgical_phase": {"attribute": "phase"},
    "surgical_step": {"attribute": "phase"},
    "surgical_action": {"field": "phase"},
    "tool_tissue_interaction": {"field": "phase"},
    "instrument_counting": {},
    "instrument_presence": {},
}
FRAME_GENERATORS = {
    "surgical_phase",
    "surgical_step",
    "surgical_action",
    "tool_tissue_interaction",
    "instrument_counting",
    "instrument_presence",
}


def synthetic_endobench(repo) -> Recipe:
    return Recipe.from_dict(synthetic_endobench_data(repo))


def synthetic_endobench_data(repo) -> dict:
    """The EndoBench recipe, every task fed by the synthetic source, as a recipe dict."""
    data = yaml.safe_load((repo / "recipes" / "endobench.yaml").read_text())
    data["sources"] = [
        {
            "id": "synthetic-endo",
            "generate": {"n_images": 90, "n_videos": 2, "frames_per_video": 20},
        }
    ]
    for task in data["tasks"]:
        task["sources"] = []
        task["quota"] = max(3, round(task["quota"] * SCALE))
        gen = task["generator"]
        task["params"] = SYNTHETIC_PARAMS.get(gen, task.get("params", {}))
        task["where"] = {"modality": "laparoscopy" if gen in FRAME_GENERATORS else "endoscopy"}
    data["export"] = {"name": "EndoBench_synthetic", "formats": ["vlmeval"]}
    return data


@pytest.fixture(scope="module")
def built(tmp_path_factory, request):
    recipe = synthetic_endobench(request.config.rootpath)
    out = tmp_path_factory.mktemp("endobench")
    return recipe, build(recipe, out, progress=False)


def test_every_task_and_subtask_with_endobench_strings(built):
    recipe, result = built
    report = json.loads((result.out_dir / "report.json").read_text())
    assert report["validation"]["problems"] == 0
    # the pool feeds every task in full: a shortfall is only what answer balance withheld
    short = {t: report["balance"][t]["pool_short"] for t in report["shortfall"]}
    assert not any(short.values()), report["shortfall"]
    seen = {(i.category, i.task, i.subtask) for i in result.items}
    wanted = {(t.category, t.task, t.subtask or t.task) for t in recipe.tasks}
    assert seen == wanted
    for category, task, subtask in seen:
        assert task in CATEGORIES[category]
        assert subtask in SUBTASKS.get(task, {task})
    assert {t for _, t, _ in seen} == set(ENDOBENCH_RANDOM)
    assert {s for _, t, s in seen if t in SUBTASKS} == set().union(*SUBTASKS.values())
    tsv = pd.read_csv(result.out_dir / "vlmeval" / "EndoBench_synthetic.tsv", sep="\t")
    assert set(tsv["subtask"]) == {s for _, _, s in seen}
    for _, row in tsv.iterrows():
        assert row[row["answer"]] == row["gt"]


def test_option_rules(built):
    _, result = built
    for item in result.items:
        n = len(item.options)
        rule = {
            "Preoperative Assessment": 2,
            "Instrument Presence": 2,
            "Polyp Counting": 6,
            "Lesion Type Identification": 6,
            "Lesion Severity Grading": 6,
        }.get(item.subtask, 4)
        assert n == rule, (item.subtask, item.options)
        if item.subtask == "Polyp Counting":
            assert sorted(item.options) == sorted(["0", "1", "2", "3", "4", "More than 4"])
        if item.task == "Region Selection":
            assert sorted(item.options) == ["blue", "green", "red", "yellow"]
            assert len(item.prompt_geometry) == 4  # as drawn by the multi renderer


def test_random_baseline_within_two_standard_errors(built):
    _, result = built
    rows = baseline_rows(result.items)
    table = format_baseline_table(rows)
    for row in rows:
        assert row["within_2se"], table
    assert "**no**" not in table


def test_score_oracle_random_and_constant_a(built, tmp_path):
    """`score` on the replica build (issue 26): the oracle scores 100 %, a seeded random
    predictor lands within two standard errors of chance, a constant "A" scores the share of
    items whose answer is A, and every EndoBench category gets its average."""
    import math
    import random

    from medvqa_build.api import score

    _, result = built
    items = [i for i in result.items if i.options]

    def scored(name: str, reply) -> dict:
        path = tmp_path / f"{name}.jsonl"
        rows = [{"item_id": i.item_id, "prediction": reply(i)} for i in items]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        score(result.out_dir, path, tmp_path / name)
        return json.loads((tmp_path / name / "score.json").read_text())["single_choice"]["all"]

    assert scored("oracle", lambda i: i.answer)["accuracy"] == 1.0
    rng = random.Random(0)
    acc = scored("random", lambda i: rng.choice("ABCDEFGH"[: len(i.options)]))
    assert acc["n"] == len(items)
    assert abs(acc["accuracy"] - acc["chance"]) <= 2 * math.sqrt(
        acc["chance"] * (1 - acc["chance"]) / acc["n"]
    )
    share = sum(i.answer == "A" for i in items) / len(items)
    assert scored("const", lambda i: "A")["accuracy"] == pytest.approx(share)
    report = (tmp_path / "const" / "report.md").read_text()
    categories = {i.category for i in items}
    assert len(categories) >= 4
    for category in categories:
        assert category in report
