"""Answer balance (curate/balance.py): the plan meets the policy with the most items it can,
the gate applies it while items are made and counts what it holds back, the generate stage
spreads answers as the pool allows, and an unreachable cap is a recipe error."""

import dataclasses
import math
from collections import Counter

import numpy as np
import pytest
import yaml

from medvqa_build.api import load_source
from medvqa_build.cli import main
from medvqa_build.cli.build import shortfall_summary
from medvqa_build.curate.balance import (
    NO_CAP,
    BalanceGate,
    meets,
    normalised_entropy,
    plan,
)
from medvqa_build.errors import RecipeError
from medvqa_build.export.card import dataset_card
from medvqa_build.pipeline.report import BuildSummary, report_json, report_markdown
from medvqa_build.recipe import BalanceSpec, Recipe
from medvqa_build.sources import get_source
from medvqa_build.stages.base import StageResult
from medvqa_build.stages.generate import generate_items

CAP_ONLY = {"max_ratio": None, "min_entropy": None}
CONFIGS = [{"config_name": "default", "data_files": [{"split": "test", "path": "data/t.parquet"}]}]


def test_normalised_entropy_is_evenness():
    assert normalised_entropy([5, 5, 5, 5]) == pytest.approx(1.0)
    assert normalised_entropy([7]) == 0.0 and normalised_entropy([]) == 0.0
    p = np.array([0.5, 0.25, 0.25])
    assert normalised_entropy([2, 1, 1]) == pytest.approx(-(p * np.log(p)).sum() / math.log(3))


def test_cap_is_met_with_the_most_items_a_whole_round_allows():
    policy = BalanceSpec(max_share=0.3, **CAP_ONLY)
    got = plan([100, 10, 10, 10], quota=100, policy=policy)
    # level L gives L + 30 items, the top class's share L / (L + 30) <= 0.3 up to L = 12
    assert (got.level, got.total, got.met) == (12, 42, True)


def test_entropy_target_is_reached_with_the_most_items_that_reach_it():
    policy = BalanceSpec(max_ratio=None, min_entropy=0.9)
    counts = np.array([500, 120, 40, 9, 3])
    got = plan(counts, quota=400, policy=policy)
    fills = list(_water_fills(counts))
    assert normalised_entropy(fills[got.total]) >= 0.9 > normalised_entropy(fills[got.total + 1])
    assert got.total < 400


def _water_fills(counts):
    """Every total's water-filling, adding one item at a time to the emptiest class that
    has candidates left (the round robin's spread)."""
    fill = np.zeros_like(counts)
    yield fill.copy()
    for _ in range(counts.sum()):
        open_ = np.flatnonzero(fill < counts)
        fill[open_[np.argmin(fill[open_])]] += 1
        yield fill.copy()


@pytest.mark.parametrize("seed", range(30))
def test_the_plan_is_the_largest_total_that_meets_the_policy(seed):
    """Brute force over every total up to the quota: none larger meets the policy."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 40, int(rng.integers(2, 9))) * int(rng.integers(1, 4))
    quota = int(rng.integers(1, counts.sum() + 20))
    policy = BalanceSpec(
        max_share=0.6 if seed % 3 == 1 else None,
        max_ratio=float(rng.uniform(1, 3)) if seed % 2 else None,
        min_entropy=float(rng.uniform(0.5, 1)) if seed % 5 else None,
    )
    if policy.max_share is not None and policy.max_share * len(counts) < 1:
        return
    got = plan(counts, quota, policy)
    fills = list(_water_fills(counts))
    assert fills[got.total].max() <= got.level and meets(policy, fills[got.total])
    for total in range(got.total + 1, min(quota, counts.sum()) + 1):
        assert not meets(policy, fills[total]), (counts, quota, total, policy)


def test_prefer_quota_fills_the_quota_and_says_the_policy_is_missed():
    policy = BalanceSpec(max_share=0.3, prefer="quota", **CAP_ONLY)
    got = plan([100, 10, 10, 10], quota=100, policy=policy)
    assert (got.total, got.met) == (100, False)


def test_a_policy_met_at_the_quota_keeps_the_quota():
    got = plan([30, 30, 30], quota=60, policy=BalanceSpec())
    assert (got.total, got.level) == (60, 20)
    assert plan([5, 5], quota=100, policy=BalanceSpec()).level == NO_CAP


def test_a_cap_below_an_even_spread_is_one_error_naming_task_and_best_cap():
    with pytest.raises(RecipeError) as err:
        plan([9, 9, 9, 9], quota=20, policy=BalanceSpec(max_share=0.2), task="region-box")
    text = str(err.value)
    assert "'region-box'" in text and "best achievable cap is 0.25" in text
    assert "\n" not in text


def _drive(gate, truths, fails):
    """The generate stage's loop over a round-robin order, ``fails`` failing."""
    todo = list(range(len(truths)))
    while True:
        held, before = [], gate.allocation
        for k in todo:
            if gate.full():
                break
            if not gate.admit(truths[k]):
                held.append(k)
            elif k in fails:
                gate.failed(truths[k])
            else:
                gate.took(truths[k])
        if not held or gate.full() or gate.allocation == before:
            return
        todo = held


def _round_robin(counts):
    truths = []
    for depth in range(max(counts.values())):
        truths += [t for t in sorted(counts) if depth < counts[t]]
    return truths


def test_gate_counts_add_up_class_by_class():
    counts = {"polyp": 80, "bleeding": 40, "ulcer": 6, "erosion": 3}
    truths = _round_robin(counts)
    fails = {k for k, t in enumerate(truths) if t == "ulcer"}  # every ulcer fails
    gate = BalanceGate(counts, 60, BalanceSpec(max_share=0.5, **CAP_ONLY), "t")
    _drive(gate, truths, fails)
    s = gate.summary()
    assert s["made"] + s["withheld"] + s["pool_short"] == 60
    for name, c in s["per_class"].items():
        assert c["made"] + c["dropped"] + c["left"] == c["available"] == counts[name]
    assert s["per_class"]["ulcer"]["made"] == 0 and s["per_class"]["ulcer"]["dropped"] == 6
    # the ulcers' loss was re-planned: what is made still meets the cap
    assert s["policy_met"] and s["max_share"] <= 0.5
    assert s["per_class"]["erosion"]["short"] == 15 - 3  # 60 spread over 4 classes
    assert s["per_class"]["ulcer"]["short"] == 15  # none of its 6 could be used


def test_prefer_quota_takes_back_candidates_held_before_a_failure_raised_the_level():
    counts = {"a": 30, "b": 30, "c": 30}
    truths = _round_robin(counts)
    fails = {k for k, t in enumerate(truths) if t == "c" and k > 30}  # c fails late
    gate = BalanceGate(counts, 60, BalanceSpec(prefer="quota"), "t")
    _drive(gate, truths, fails)
    assert gate.total == 60  # a and b were held at level 20, then filled the quota


def _skewed(samples, keep_other=3, copies=4):
    """Endoscopy stills: every polyp repeated ``copies`` times, ``keep_other`` of each other."""
    seen, out = Counter(), []
    for s in samples:
        if s.modality != "endoscopy" or len(s.labels) != 1:
            continue
        label = s.labels[0]
        if label == "polyp":
            out += [dataclasses.replace(s, sample_id=f"{s.sample_id}#{k}") for k in range(copies)]
        elif seen[label] < keep_other:
            seen[label] += 1
            out.append(s)
    return out


def _recipe(repo, balance):
    data = yaml.safe_load((repo / "recipes" / "demo.yaml").read_text())
    data["tasks"] = [dict(data["tasks"][0], quota=40)]
    data["balance"] = balance
    return Recipe.from_dict(data)


def test_generation_spreads_answers_as_the_pool_allows(synthetic_root, repo):
    samples = _skewed(load_source("synthetic-endo", synthetic_root).samples)
    manifests = {"synthetic-endo": get_source("synthetic-endo").manifest}
    off = generate_items(_recipe(repo, False), samples, manifests, progress=False)
    on = generate_items(_recipe(repo, {"max_share": 0.3}), samples, manifests, progress=False)
    again = generate_items(_recipe(repo, {"max_share": 0.3}), samples, manifests, progress=False)
    assert on.items == again.items  # seeded: the same items, byte for byte
    top_off = Counter(i.gt for i in off.items).most_common(1)[0]
    spread = Counter(i.gt for i in on.items)
    assert top_off[0] == "polyp" and top_off[1] / len(off.items) > 0.3
    assert max(spread.values()) / len(on.items) <= 0.3 and len(spread) == 5
    report = on.balance["lesion-type"]
    assert report["made"] == len(on.items) and on.shortfall["lesion-type"] == 40 - len(on.items)
    assert report["made"] + report["withheld"] + report["pool_short"] == 40
    polyp = report["per_class"]["polyp"]
    assert polyp["left"] == polyp["available"] - polyp["made"] > 0


def test_recipe_and_task_balance_merge(repo):
    data = yaml.safe_load((repo / "recipes" / "demo.yaml").read_text())
    data["balance"] = {"max_share": 0.4, "prefer": "quota"}
    data["tasks"][1]["balance"] = {"min_entropy": 0.8}
    data["tasks"][2]["balance"] = False
    recipe = Recipe.from_dict(data)
    assert recipe.balance_for(recipe.tasks[0]) == BalanceSpec(max_share=0.4, prefer="quota")
    assert recipe.balance_for(recipe.tasks[1]) == BalanceSpec(
        max_share=0.4, min_entropy=0.8, prefer="quota"
    )
    assert not recipe.balance_for(recipe.tasks[2]).active
    assert "balance" not in recipe.model_dump()["tasks"][0]  # unset: dumps as before


def test_report_and_card_show_the_spread_and_the_shortfall(synthetic_root, repo, tmp_path):
    samples = _skewed(load_source("synthetic-endo", synthetic_root).samples)
    manifests = {"synthetic-endo": get_source("synthetic-endo").manifest}
    recipe = _recipe(repo, {"max_share": 0.3})
    result = generate_items(recipe, samples, manifests, progress=False)
    stats = {"items": result.count, "dropped": 0, "shortfall": result.shortfall}
    stages = [
        StageResult("generate", tmp_path, "f", {**stats, "balance": result.balance}, False),
        StageResult("validate", tmp_path, "f", {"problems": 0}, False),
    ]
    summary = BuildSummary(recipe, stages, {}, [], [], result.items)
    report = report_json(summary, tmp_path)
    spread = report["answer_spread"]["Lesion Type Identification"]
    n = len(result.items)
    assert spread["items"] == n and spread["classes"] == 5 and spread["max_share"] <= 0.3
    assert sum(spread["counts"].values()) == n and spread["counts"]["angiectasia"] == 3
    assert report["balance"]["lesion-type"]["per_class"]["ulcer"]["short"] == 8 - 3
    md = report_markdown(report, summary)
    row = next(line for line in md.splitlines() if line.startswith("| lesion-type |"))
    # policy, quota, made, withheld, pool short ... and the classes short of 8 (40 / 5)
    assert f"| 40 | {n} | {40 - n - 8} | 8 |" in row and "ulcer 3/3" in row
    assert "polyp" not in row.split("|")[-2]  # polyp had enough: not short
    card = dataset_card(result.items, manifests, recipe.to_yaml(), "T", CONFIGS, {})
    section = card.split("## Answer spread per task", 1)[1]
    line = next(x for x in section.splitlines() if x.startswith("| Lesion Type Identification |"))
    top = max(spread["counts"].values()) / n
    assert line.startswith(f"| Lesion Type Identification | {n} | 5 | {top:.2f} |")


def test_an_unreachable_cap_is_one_line_and_exit_2(tmp_path, repo, capsys):
    data = yaml.safe_load((repo / "recipes" / "demo.yaml").read_text())
    data["sources"][0]["generate"] = {"n_images": 20, "n_videos": 0, "n_corrupt": 0}
    data["tasks"] = [data["tasks"][0]]
    data["balance"] = {"max_share": 0.1}
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["run", str(path), "-o", str(tmp_path / "out"), "-q"]) == 2
    err = capsys.readouterr().err
    line = err.splitlines()[0]  # (a second line may say which finished stages are kept)
    assert line.startswith("error: task 'lesion-type': ") and "Traceback" not in err
    assert "best achievable cap is 0.2 " in line and "fix: set balance.max_share to 0.2" in line


def test_a_class_lost_while_items_are_made_never_stops_the_build():
    """5 classes meet a 0.2 cap at the start; when every ulcer fails, 4 cannot: the gate goes
    on (one error at the start is the recipe's; later, the report says the policy is missed)."""
    counts = {"a": 10, "b": 10, "c": 10, "d": 10, "ulcer": 2}
    truths = _round_robin(counts)
    fails = {k for k, t in enumerate(truths) if t == "ulcer"}
    gate = BalanceGate(counts, 40, BalanceSpec(max_share=0.2, **CAP_ONLY), "t")
    _drive(gate, truths, fails)
    s = gate.summary()
    assert s["made"] == gate.total > 0 and not s["policy_met"]
    assert s["made"] + s["withheld"] + s["pool_short"] == 40


def test_the_run_summary_says_what_balance_withheld():
    report = {
        "shortfall": {"counting": 47, "phase": 2},
        "balance": {"counting": {"withheld": 39}, "phase": {"withheld": 0}},
    }
    assert shortfall_summary(report) == "counting: 47 (39 by answer balance), phase: 2"
