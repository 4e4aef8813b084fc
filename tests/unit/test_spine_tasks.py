"""SpineBench tasks on the four spine fixtures: diagnosis options (truth + Healthy + visually
closest diseases, Healthy + 4 diseases when the truth is Healthy) and multi-select levels;
scoring helpers and random baselines."""

import numpy as np
import pytest

from medvqa_build.api import load_source
from medvqa_build.eval.baselines import option_chance
from medvqa_build.eval.scoring import (
    accuracy,
    expected_random_f1,
    mean_multi_select,
    multi_select_scores,
    parse_letters,
    random_baselines,
)
from medvqa_build.recipe import Recipe
from medvqa_build.sources import get_source
from medvqa_build.stages.generate import generate_items
from medvqa_build.tasks.spine_diagnosis import SPINEBENCH_LABELS

from ..fixtures.sources import buu_lspine, csxa, rsna_lumbar, vindr_spinexr

WRITERS = {
    "rsna-lumbar": rsna_lumbar,
    "vindr-spinexr": vindr_spinexr,
    "csxa": csxa,
    "buu-lspine": buu_lspine,
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    base = tmp_path_factory.mktemp("spine")
    samples = []
    for sid, mod in WRITERS.items():
        samples += load_source(sid, mod.write(base / sid)).samples
    recipe = Recipe.from_dict(
        {
            "name": "spine",
            "benchmark": "SpineBench",
            "seed": 1,
            "sources": [{"id": sid, "root": str(base / sid)} for sid in WRITERS],
            "tasks": [
                {
                    "name": "sdd",
                    "generator": "spine_diagnosis",
                    "category": "Spinal Disease Diagnosis",
                    "task": "Disease Diagnosis",
                    "quota": 50,
                    "n_options": 5,
                    "negatives": {
                        "strategy": "visual_class",
                        "mandatory": ["Healthy"],
                        "params": {"library_size": 200},
                    },
                },
                {
                    "name": "sll",
                    "generator": "spine_localisation",
                    "category": "Localization",
                    "task": "Lesion Localization",
                    "quota": 50,
                    "n_options": 5,
                },
            ],
        }
    )
    rng = np.random.default_rng(0)
    embeddings = {s.sample_id: rng.normal(size=16).astype(np.float32) for s in samples}
    manifests = {sid: get_source(sid).manifest for sid in WRITERS}
    return generate_items(recipe, samples, manifests, progress=False, embeddings=embeddings)


def test_diagnosis_options_follow_spinebench(built):
    items = [i for i in built.items if i.task == "Disease Diagnosis"]
    # 14 candidates (the two-disease VinDr image is none); answer balance keeps the diseases
    # even and names the ones it left out (quota = made + withheld + pool short)
    balance = built.balance["sdd"]
    assert len(items) + balance["withheld"] == 14 and not built.dropped
    assert balance["made"] + balance["withheld"] + balance["pool_short"] == 50
    for item in items:
        assert len(item.options) == 5 and "Healthy" in item.options
        assert item.options["ABCDE".index(item.answer)] == item.gt
        assert set(item.options) <= set(SPINEBENCH_LABELS)
        assert item.negatives.strategy == "visual_class"
        if item.gt == "Healthy":
            assert item.negatives.candidates[0] != "Healthy" and len(item.negatives.scores) == 4
        else:
            assert item.negatives.candidates[0] == "Healthy"
    cross = [i for i in items if i.source == "csxa" and "Spinal canal stenosis" in i.options]
    assert cross or any(i.source == "csxa" and "Spondylolisthesis" in i.options for i in items)


def test_localisation_is_multi_select_over_lumbar_levels(built):
    items = {i.sample_ids[0]: i for i in built.items if i.task == "Lesion Localization"}
    assert len(items) == 4
    item = items["rsna-lumbar:4003253/702807833/8"]
    assert sorted(item.options) == ["L1/L2", "L2/L3", "L3/L4", "L4/L5", "L5/S1"]
    letters = item.answer.split(",")
    assert len(letters) == 2 and letters == sorted(letters)
    assert {item.options["ABCDE".index(x)] for x in letters} == {"L4/L5", "L5/S1"}
    assert item.gt == ",".join(item.options["ABCDE".index(x)] for x in letters)
    assert "More than one option may be correct" in item.question


def test_scoring_helpers():
    assert parse_letters("A,C") == parse_letters("A, C") == parse_letters("AC") == {"A", "C"}
    assert parse_letters("The answer is (B) and (D).") == {"B", "D"}
    assert parse_letters("A, F", n_options=5) == {"A"}
    assert accuracy(["A", "C,A", "B"], ["A", "A,C", "C"]) == pytest.approx(2 / 3)
    s = multi_select_scores("A,B", "A,C")
    assert (s["precision"], s["recall"], s["f1"], s["exact"]) == (0.5, 0.5, 0.5, 0.0)
    assert mean_multi_select(["A", "AC"], ["A,C", "A,C"])["recall"] == pytest.approx(0.75)
    assert option_chance(5) == 0.2 and option_chance(5, multi_select=True) == 1 / 31
    assert 0 < expected_random_f1(5, 2) < 1


def test_random_baselines_per_task(built):
    baselines = random_baselines(built.items)
    assert baselines == {"Disease Diagnosis": 0.2, "Lesion Localization": pytest.approx(1 / 31)}
