"""The VLMEvalKit TSV through VLMEvalKit's own dataset classes and ``evaluate`` (its answer
matching, ``mcq_vanilla_eval`` and ``report_acc``), with stand-in predictions.

VLMEvalKit is not on PyPI: point ``MEDVQA_VLMEVALKIT`` at a checkout and
``MEDVQA_VLMEVALKIT_PYTHON`` at a Python with its dependencies.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from medvqa_build.api import score as medvqa_score

from .conftest import client_python, items_of, run_driver
from .test_lmms_eval import chance, near

pytestmark = [pytest.mark.client, pytest.mark.slow]


@pytest.fixture(scope="module")
def vlmeval_python() -> str:
    checkout = os.environ.get("MEDVQA_VLMEVALKIT")
    if not checkout:
        pytest.skip("VLMEvalKit is not here: set MEDVQA_VLMEVALKIT=/path/to/VLMEvalKit checkout")
    if not (Path(checkout) / "vlmeval" / "dataset" / "image_mcq.py").is_file():
        pytest.fail(f"MEDVQA_VLMEVALKIT={checkout} is not a VLMEvalKit checkout")
    return client_python("MEDVQA_VLMEVALKIT_PYTHON", "a Python with VLMEvalKit's dependencies")


def score(python: str, build: Path, mode: str, work: Path, *extra: str) -> dict:
    report = run_driver(python, "vlmevalkit_score.py", str(build), mode, str(work), *extra)
    assert len(report) == 1, report  # one TSV part
    return next(iter(report.values()))


def test_demo_oracle_random_and_option_text(vlmeval_python, demo_build, tmp_path):
    """Stock VLMEvalKit (no dataset class shipped: the demo has no multi-select item)."""
    assert not (demo_build / "vlmeval" / "medvqa_vlmeval.py").exists()
    rows = [r for r in items_of(demo_build) if r["options"]]
    oracle = score(vlmeval_python, demo_build, "oracle", tmp_path / "o")
    assert oracle["class"] == "CustomMCQDataset" and oracle["Overall"] == 1.0
    # answering with the option's text: no option's text lies inside another's (issue 25.4)
    text = score(vlmeval_python, demo_build, "oracle_text", tmp_path / "t")
    assert text["Overall"] == 1.0
    random = score(vlmeval_python, demo_build, "random", tmp_path / "r")
    assert near(random["Overall"], chance(rows), len(rows)), (random, chance(rows))
    # `medvqa-build score` reads VLMEvalKit's own prediction file to the same accuracy
    (tsv,) = (demo_build / "vlmeval").glob("*.tsv")
    xlsx = tmp_path / "r" / f"StandIn_random_{tsv.stem}.xlsx"  # the model's prediction file
    ours = medvqa_score(demo_build, xlsx, tmp_path / "ours")["single_choice"]["all"]
    assert ours["n"] == len(rows) and ours["accuracy"] == pytest.approx(random["Overall"])


def test_endobench_oracle_and_random(vlmeval_python, endobench_build, tmp_path):
    """Stock VLMEvalKit on the EndoBench replica build: the oracle scores 100 %, a random
    reply lands within two standard errors of chance."""
    rows = [r for r in items_of(endobench_build) if r["options"]]
    oracle = score(vlmeval_python, endobench_build, "oracle", tmp_path / "o")
    assert oracle["Overall"] == 1.0
    random = score(vlmeval_python, endobench_build, "random", tmp_path / "r")
    assert near(random["Overall"], chance(rows), len(rows)), (random, chance(rows))


def test_multi_select_with_the_shipped_class(vlmeval_python, spine_build, tmp_path):
    rows = [r for r in items_of(spine_build) if r["options"]]
    assert any("," in r["answer"] for r in rows)
    oracle = score(vlmeval_python, spine_build, "oracle", tmp_path / "o")
    assert oracle["class"] == "MedVQAMCQDataset" and oracle["Overall"] == 1.0
    for metric in ("precision", "recall", "f1"):
        assert oracle[f"Lesion Localization ({metric})"] == 1.0
    random = score(vlmeval_python, spine_build, "random", tmp_path / "r")
    assert near(random["Overall"], chance(rows), len(rows)), (random, chance(rows))


def test_stock_vlmevalkit_misses_multi_select(vlmeval_python, spine_build, tmp_path):
    """What docs/exports.md says stock VLMEvalKit reports: every multi-letter answer a miss."""
    rows = [r for r in items_of(spine_build) if r["options"]]
    multi = sum("," in r["answer"] for r in rows)
    oracle = score(vlmeval_python, spine_build, "oracle", tmp_path / "o", "stock")
    assert oracle["class"] == "CustomMCQDataset"
    assert oracle["Overall"] == pytest.approx(1 - multi / len(rows))
