"""The text-only audit through whole builds (issue 26, points 4-5): a recipe that plants a
shortcut (the answer is always the longest option, or always the same label) is flagged in
the validation, report.md and the card; ``curate.drop_blind_solvable`` removes the items
answered confidently and the counts add up; the demo stays near chance and its exports are the
same bytes with or without the audit; in the EndoBench replica every task stays near chance
but Region Recognition, whose distractors come from a vocabulary of names that are never the
answer on synthetic-endo (the option-frequency shortcut the audit exists to find)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import yaml

from medvqa_build.errors import ValidationFailed
from medvqa_build.pipeline import build
from medvqa_build.recipe import BlindSpec, Recipe
from tests.e2e.test_endobench_recipe import synthetic_endobench

pytest.importorskip("sklearn")

LABELS = ["polyp", "ulcer", "bleeding", "angiectasia", "normal mucosa"]
SHORT = "cyst fold stool bubble scar lumen vessel mucus clip dye pit cap tube hair food wall"
SHORT += " crypt nodule web ring band pouch stent suture gauze foam spot line dot tag"
MARGIN = BlindSpec().margin


def _task(name: str, **params) -> dict:
    # the ledger (issue 32) would hide a planted text shortcut by construction: plant it with
    # the defence off, as a recipe that asks for uniform distractors would
    return {
        "negatives": {"strategy": "label_pool", "params": {"balance_frequency": False}},
        "name": name.lower(),
        "generator": "image_classification",
        "category": "Planted",
        "task": name,
        "quota": 60,
        "where": {"modality": "endoscopy"},
        "params": params,
    }


def planted_recipe(drop: bool = False) -> Recipe:
    """Three tasks on one pool: honest; the truth always the longest option (long answer
    texts, short distractors); the truth always the same, most frequent option."""
    data = {
        "name": "planted",
        "benchmark": "Planted",
        "sources": [
            {
                "id": "synthetic-endo",
                "generate": {"n_images": 150, "n_videos": 1, "frames_per_video": 4},
            }
        ],  # fmt: skip
        "tasks": [
            _task("Honest"),
            _task(
                "Longest",
                answer_map={x: f"{x} seen clearly on the mucosal surface" for x in LABELS},
                vocabulary=SHORT.split(),
            ),
            _task("Frequent", answer_map={x: "lesion" for x in LABELS}, vocabulary=SHORT.split()),
        ],
        "blind": {},
        "export": {"name": "Planted", "formats": ["hf"]},
    }
    if drop:
        data["curate"] = {"drop_blind_solvable": True}
    return Recipe.from_dict(data)


def _rows(report: dict) -> dict[str, dict]:
    return {t["task"]: t for t in report["validation"]["blind"]["tasks"]}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    out = tmp_path_factory.mktemp("planted")
    with pytest.raises(ValidationFailed):
        build(planted_recipe(), out, progress=False)
    build(planted_recipe(), out, progress=False, force_export=True)
    return out


def test_planted_shortcuts_are_flagged_everywhere(planted):
    report = json.loads((planted / "report.json").read_text())
    rows = _rows(report)
    assert not rows["Honest"]["flagged"]
    assert rows["Honest"]["accuracy"] <= rows["Honest"]["chance"] + MARGIN
    for task in ("Longest", "Frequent"):
        assert rows[task]["flagged"] and rows[task]["chance"] == 0.25
        assert rows[task]["accuracy"] >= 0.7 and rows[task]["z"] > 6, rows[task]
    assert rows["Frequent"]["accuracy"] == 1.0
    validation = json.loads((planted / "validation.json").read_text())
    blind = [(p["item_id"], p["check"]) for p in validation["list"] if p["check"] == "blind"]
    assert blind == [("task:Frequent", "blind"), ("task:Longest", "blind")]
    confident = validation["blind"]["confident"]
    assert len(confident) == rows["Longest"]["confident"] + rows["Frequent"]["confident"]
    assert {c["task"] for c in confident} == {"Longest", "Frequent"}
    flagged_row = "| Frequent | 60 | 100.0% | 25.0% |"
    for page in ("report.md", "validation.md", "hf/README.md"):
        text = (planted / page).read_text()
        assert "## Text-only (blind) audit" in text and flagged_row in text, page
        assert "**answerable without the image**" in text, page
    assert f"`{confident[0]['item_id']}`" in (planted / "validation.md").read_text()


def test_validate_and_export_commands_run_the_audit_too(planted, tmp_path):
    """`medvqa-build validate` and `export` on a finished build read its recipe's `blind` key
    as the build did: the same flags, and the exported card carries the same table."""
    from medvqa_build.api import export_build, validate_build

    checked = validate_build(planted, report_dir=tmp_path / "v")
    assert checked.blind is not None
    assert sorted(p.item_id for p in checked.problems if p.check == "blind") == [
        "task:Frequent",
        "task:Longest",
    ]
    assert "## Text-only (blind) audit" in (tmp_path / "v" / "validation.md").read_text()
    target = export_build(planted, "hf", tmp_path / "hf", force=True).path
    card = (target / "README.md").read_text()
    assert "| Frequent | 60 | 100.0% | 25.0% |" in card


def test_drop_blind_solvable_removes_them_and_counts_add_up(tmp_path):
    result = build(planted_recipe(drop=True), tmp_path, progress=False, force_export=True)
    report = result.report
    generate = next(s for s in result.stages if s.name == "generate").path
    audit = json.loads((generate / "blind_removed.json").read_text())
    removed = {c["item_id"] for c in audit["confident"]}
    kept = {i.item_id for i in result.items}
    assert report["blind_removed"] == len(removed) > 60 and not removed & kept
    assert report["generated"] == 180
    assert report["generated"] == report["blind_removed"] + report["render_quarantined"] + len(kept)
    assert "Frequent" not in report["items_per_task"]  # every item of it answered blind
    assert report["items_per_task"]["Honest"] == 60
    text = (tmp_path / "report.md").read_text()
    assert f"{len(removed)} of 180 generated items" in text


@pytest.fixture(scope="module")
def demo(tmp_path_factory, request):
    data = yaml.safe_load((request.config.rootpath / "recipes" / "demo.yaml").read_text())
    plain, audited = tmp_path_factory.mktemp("plain"), tmp_path_factory.mktemp("audited")
    assert data["blind"] is True  # the shipped demo runs the audit
    build(Recipe.from_dict({**data, "blind": False}), plain, progress=False)
    build(Recipe.from_dict(dict(data)), audited, progress=False)
    return plain, audited


def test_demo_is_near_chance_and_its_exports_do_not_change(demo):
    plain, audited = demo
    report = json.loads((audited / "report.json").read_text())
    assert report["validation"]["problems"] == 0
    for row in _rows(report).values():
        assert not row["flagged"] and row["items"] >= 40, row
        assert row["accuracy"] <= row["chance"] + MARGIN, row
    assert "blind" not in json.loads((plain / "report.json").read_text())["validation"]
    sums = [dict(ln.split()[::-1] for ln in (d / "checksums.sha256").read_text().splitlines())
            for d in (plain, audited)]  # fmt: skip
    assert sums[0].keys() == sums[1].keys()
    # the items are the same bytes; only the card gains the audit's table (and recipe key)
    assert [p for p in sums[0] if sums[0][p] != sums[1][p]] == ["hf/README.md"]
    assert "## Text-only (blind) audit" not in (plain / "hf" / "README.md").read_text()


def test_endobench_replica_is_near_chance_in_every_task(tmp_path, request):
    """Every EndoBench task of the replica stays near chance without the image. Region
    Recognition once did not: its distractors came from a 16-name vocabulary while its answers
    were the few findings the source has, so the option recurring most across items was usually
    right (65-70 %). The vocabulary now fills only a source with fewer findings than options."""
    recipe = synthetic_endobench(request.config.rootpath)
    recipe = recipe.model_copy(update={"blind": BlindSpec()})
    result = build(recipe, tmp_path, progress=False, force_export=True)
    rows = _rows(json.loads((tmp_path / "report.json").read_text()))
    assert len(rows) == 12
    for row in rows.values():
        assert not row["flagged"], row
        if row["items"] >= BlindSpec().min_items:  # below it, 6 of 13 right is still noise
            assert row["accuracy"] <= row["chance"] + MARGIN, row
    items = [i for i in result.items if i.task == "Region Recognition"]
    shown = Counter(o for i in items for o in i.options)
    assert set(shown) == {i.gt for i in items}  # no never-right vocabulary word is shown
    most_frequent_right = sum(max(i.options, key=shown.__getitem__) == i.gt for i in items)
    assert most_frequent_right / len(items) < 0.25 + MARGIN
