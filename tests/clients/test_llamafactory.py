"""The sharegpt export loaded by LLaMA-Factory's own ``get_dataset(stage="sft")`` (its
converter, media lookup and the qwen2_vl template's image plugin), following
docs/exports.md word for word: the YAML block (``dataset_dir`` pointing at the export) and
the bash block (copy into LLaMA-Factory's ``data/`` and merge ``dataset_info.json``)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from .conftest import client_python, run_driver

pytestmark = [pytest.mark.client, pytest.mark.slow]
DOCS = Path(__file__).parents[2] / "docs" / "exports.md"


@pytest.fixture(scope="module")
def lf_python() -> str:
    return client_python("MEDVQA_LLAMAFACTORY_PYTHON", "LLaMA-Factory (llamafactory)")


def _blocks(lang: str) -> list[str]:
    """The ``lang`` code blocks of the LLaMA-Factory part of docs/exports.md."""
    text = DOCS.read_text(encoding="utf-8")
    part = text[text.index("**Train with LLaMA-Factory.**") : text.index("## medsg")]
    return re.findall(rf"```{lang}\n(.*?)```", part, flags=re.S)


def _fill(text: str, build: Path, name: str) -> str:
    return text.replace("/abs/path/to/build", str(build)).replace("<name>", name)


def _name(build: Path) -> str:
    return next(iter(json.loads((build / "sharegpt" / "dataset_info.json").read_text())))


def _records(build: Path, name: str) -> list[dict]:
    return json.loads((build / "sharegpt" / f"{name}.json").read_text())


def _check(report: dict, records: list[dict]) -> None:
    assert report["rows"] == len(records)
    assert report["vision_starts"] == sum(len(r["images"]) for r in records)
    assert report["image_pads_row0"] > 0
    assert report["labels_row0"].strip() == records[0]["conversations"][1]["value"]


@pytest.mark.parametrize("build_name", ["demo_build", "medsg_build", "spine_build"])
def test_dataset_dir_as_documented(lf_python, build_name, request, tmp_path):
    build = request.getfixturevalue(build_name)
    name = _name(build)
    (block,) = _blocks("yaml")
    settings = yaml.safe_load(_fill(block, build, name))
    assert settings["dataset"] == name
    report = run_driver(
        lf_python, "llamafactory_load.py", name, settings["dataset_dir"], str(tmp_path)
    )
    _check(report, _records(build, name))


def test_copy_into_data_as_documented(lf_python, demo_build, tmp_path):
    name = _name(demo_build)
    home = tmp_path / "LLaMA-Factory"  # LLaMA-Factory's folder, with a data/ of its own
    (home / "data").mkdir(parents=True)
    own = {"identity": {"file_name": "identity.json"}}
    (home / "data" / "dataset_info.json").write_text(json.dumps(own))
    (block,) = _blocks("bash")
    subprocess.run(["bash", "-ec", _fill(block, demo_build, name)], cwd=home, check=True)
    info = json.loads((home / "data" / "dataset_info.json").read_text())
    assert set(info) == {"identity", name}
    report = run_driver(
        lf_python, "llamafactory_load.py", name, str(home / "data"), str(tmp_path / "work")
    )
    _check(report, _records(demo_build, name))
