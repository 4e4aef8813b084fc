"""Builds the client tests score (the demo, a MedSG build, a SpineBench build with multi-select
items) and the clients themselves, each named by an environment variable:

* ``MEDVQA_LMMS_PYTHON``: a Python with ``lmms-eval`` installed;
* ``MEDVQA_LLAMAFACTORY_PYTHON``: a Python with ``llamafactory`` installed;
* ``MEDVQA_VLMEVALKIT``: a VLMEvalKit checkout, imported by ``MEDVQA_VLMEVALKIT_PYTHON``
  (default: the lmms-eval Python, which has most of its dependencies).

A test whose client is not named is skipped with the variable it needs. Builds are made once
per session, and only when a test that needs them runs.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from medvqa_build.cli import main

from ..e2e.test_endobench_recipe import synthetic_endobench_data
from ..fixtures.sources import brats, buu_lspine, csxa, msd, rsna_lumbar, vindr_spinexr

DRIVERS = Path(__file__).parent / "drivers"


def client_python(var: str, what: str) -> str:
    python = os.environ.get(var)
    if not python:
        pytest.skip(f"{what} is not installed here: set {var}=/path/to/python to run this test")
    if not Path(python).is_file():
        pytest.fail(f"{var}={python} is not a file")
    return python


def run_driver(python: str, script: str, *args: str, env: dict | None = None) -> dict:
    """Run ``drivers/<script>`` under a client's Python; its last stdout line is JSON."""
    full = {**os.environ, "PYTHONPATH": str(DRIVERS), **(env or {})}
    proc = subprocess.run(
        [python, str(DRIVERS / script), *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=900,
    )
    if proc.returncode != 0:
        raise AssertionError(f"{script} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _build(recipe: dict, out: Path, tmp: Path) -> Path:
    path = tmp / f"{recipe['name']}.yaml"
    path.write_text(yaml.safe_dump(recipe))
    assert main(["run", str(path), "-o", str(out), "-q"]) == 0
    return out


def _lmms_options(out: Path) -> dict:
    return {"lmms-eval": {"dataset_path": str(out / "hf")}}


def _build_every_format(recipe: dict, tmp: Path) -> Path:
    """``recipe`` built into ``tmp/build`` with every format a client test reads."""
    out = tmp / "build"
    recipe["export"]["formats"] = ["hf", "vlmeval", "lmms-eval", "sharegpt"]
    recipe["export"]["options"] = _lmms_options(out)
    return _build(recipe, out, tmp)


@pytest.fixture(scope="session")
def demo_build(tmp_path_factory) -> Path:
    """The demo recipe as shipped (280 items), with every client's format."""
    recipe = yaml.safe_load((Path(__file__).parents[2] / "recipes" / "demo.yaml").read_text())
    return _build_every_format(recipe, tmp_path_factory.mktemp("client-demo"))


@pytest.fixture(scope="session")
def endobench_build(tmp_path_factory) -> Path:
    """The EndoBench recipe (12 tasks, 5 prompt levels) fed by the synthetic source."""
    recipe = synthetic_endobench_data(Path(__file__).parents[2])
    return _build_every_format(recipe, tmp_path_factory.mktemp("client-endobench"))


@pytest.fixture(scope="session")
def medsg_build(tmp_path_factory) -> Path:
    """recipes/medsg.yaml over the NIfTI replicas: four items of each of the eight tasks."""
    tmp = tmp_path_factory.mktemp("client-medsg")
    roots = {"msd": msd.write(tmp / "msd"), "brats": brats.write(tmp / "brats")}
    recipe = yaml.safe_load((Path(__file__).parents[2] / "recipes" / "medsg.yaml").read_text())
    for source in recipe["sources"]:
        source["root"] = str(roots[source["id"]])
    for task in recipe["tasks"]:
        task["quota"] = 4
    out = tmp / "build"
    recipe["export"]["formats"] = ["hf", "lmms-eval", "medsg", "sharegpt"]
    recipe["export"]["options"] = _lmms_options(out)
    return _build(recipe, out, tmp)


@pytest.fixture(scope="session")
def spine_build(tmp_path_factory) -> Path:
    """recipes/spinebench.yaml over the four spine replicas (offline embedder): diagnosis and
    the multi-select lesion localisation."""
    tmp = tmp_path_factory.mktemp("client-spine")
    writers = {
        "rsna-lumbar": rsna_lumbar,
        "vindr-spinexr": vindr_spinexr,
        "csxa": csxa,
        "buu-lspine": buu_lspine,
    }
    recipe = yaml.safe_load((Path(__file__).parents[2] / "recipes" / "spinebench.yaml").read_text())
    recipe["embedder"] = "offline"
    for source in recipe["sources"]:
        source["root"] = str(writers[source["id"]].write(tmp / source["id"]))
    for task in recipe["tasks"]:
        task["quota"] = 100
    out = tmp / "build"
    recipe["export"]["formats"] = ["hf", "vlmeval", "lmms-eval", "sharegpt", "spinebench"]
    recipe["export"]["options"] = _lmms_options(out)
    return _build(recipe, out, tmp)


def items_of(build: Path) -> list[dict]:
    """The build's HF rows (``all`` config, test split) as dicts, images left out."""
    import pyarrow.parquet as pq

    files = sorted((build / "hf" / "data" / "all").glob("test-*.parquet"))
    rows = []
    for f in files:
        rows += pq.read_table(f, columns=["task", "options", "answer"]).to_pylist()
    return rows


def run_quiet(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)
