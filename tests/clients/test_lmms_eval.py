"""The lmms-eval export through lmms-eval's own CLI (``--include_path``), its dataset loading,
``process_results`` and aggregation, with a stand-in model (drivers/medvqa_stand_in): the
oracle scores 100 % (IoU 1.0 on grounding), a random guesser near chance.

lmms-eval logs a failing task and still exits 0, so each run is checked by its results file.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from medvqa_build.api import score

from .conftest import DRIVERS, client_python, items_of, run_quiet

pytestmark = [pytest.mark.client, pytest.mark.slow]


@pytest.fixture(scope="module")
def lmms_python() -> str:
    return client_python("MEDVQA_LMMS_PYTHON", "lmms-eval")


def run_lmms(python: str, build: Path, task: str, mode: str, out: Path) -> tuple[dict, int]:
    """``python -m lmms_eval`` on one exported task; ``(metrics, samples scored)``."""
    env = {
        **os.environ,
        "PYTHONPATH": str(DRIVERS),
        "LMMS_EVAL_PLUGINS": "medvqa_stand_in",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_DATASETS_CACHE": str(out / "cache"),
    }
    cmd = [python, "-m", "lmms_eval", "--model", "medvqa_stand_in"]
    cmd += ["--model_args", f"mode={mode},seed=0", "--tasks", task, "--batch_size", "1"]
    cmd += ["--include_path", str(build / "lmms-eval"), "--output_path", str(out)]
    cmd += ["--log_samples"]
    proc = run_quiet(cmd, env=env, timeout=900)
    found = sorted(out.rglob("*_results.json"))
    if proc.returncode != 0 or not found:
        tail = proc.stdout[-3000:] + proc.stderr[-3000:]
        raise AssertionError(f"lmms-eval gave no results:\n{tail}")
    data = json.loads(found[-1].read_text())
    metrics = {
        k.split(",")[0]: v
        for k, v in data["results"][task].items()
        if k.endswith(",none") and "_stderr" not in k
    }
    return metrics, data["n-samples"][task]["effective"]


def chance(rows: list[dict]) -> float:
    """What the random stand-in expects on exact match: 1/n for a single answer, 1/(2^n - 1)
    for a multi-select task's item (a uniform non-empty subset)."""
    multi = {r["task"] for r in rows if "," in r["answer"]}
    return sum(
        1 / (2 ** len(r["options"]) - 1) if r["task"] in multi else 1 / len(r["options"])
        for r in rows
    ) / len(rows)


def near(value: float, expected: float, n: int) -> bool:
    """Within four binomial standard deviations (plus 2 points)."""
    return abs(value - expected) <= 4 * math.sqrt(expected * (1 - expected) / n) + 0.02


@pytest.mark.parametrize("build_name", ["demo_build", "endobench_build", "spine_build"])
def test_mcq_oracle_and_random(lmms_python, build_name, request, tmp_path):
    build = request.getfixturevalue(build_name)
    task = next(p.stem for p in (build / "lmms-eval").glob("*_mcq.yaml"))
    rows = [r for r in items_of(build) if r["options"]]
    oracle, n = run_lmms(lmms_python, build, task, "oracle", tmp_path / "oracle")
    assert n == len(rows)
    assert oracle == {"accuracy": 1.0, "precision": 1.0, "recall": 1.0, "f1": 1.0}
    random, _ = run_lmms(lmms_python, build, task, "random", tmp_path / "random")
    assert near(random["accuracy"], chance(rows), n), (random, chance(rows))
    if build_name != "spine_build":  # single-choice: `score` agrees with lmms-eval exactly
        (samples,) = sorted((tmp_path / "random").rglob("*_samples_*.jsonl"))
        ours = score(build, samples, tmp_path / "ours")["single_choice"]["all"]
        assert ours["n"] == n and ours["accuracy"] == pytest.approx(random["accuracy"])


def test_multi_select_scored_as_sets(lmms_python, spine_build):
    """The build has multi-select items, written into utils.py, so every letter counts."""
    assert any("," in r["answer"] for r in items_of(spine_build))
    assert (
        'MULTI_SELECT_TASKS = frozenset({"Lesion Localization"})'
        in (spine_build / "lmms-eval" / "utils.py").read_text()
    )


def test_grounding_oracle_and_random(lmms_python, medsg_build, tmp_path):
    task = next(p.stem for p in (medsg_build / "lmms-eval").glob("*_grounding.yaml"))
    rows = [r for r in items_of(medsg_build) if not r["options"]]
    oracle, n = run_lmms(lmms_python, medsg_build, task, "oracle", tmp_path / "oracle")
    assert n == len(rows) and n >= 16
    assert oracle["iou"] == pytest.approx(1.0) and oracle["acc_at_0.5"] == 1.0
    random, _ = run_lmms(lmms_python, medsg_build, task, "random", tmp_path / "random")
    assert random["iou"] < 0.2 and random["acc_at_0.7"] <= 0.1, random
