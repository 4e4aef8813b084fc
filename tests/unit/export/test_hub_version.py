"""`push` states the huggingface_hub it needs (issue 25.5): an older one is one error line
naming the installed and the needed version (exit 2), before huggingface_hub is imported."""

from __future__ import annotations

import re
import tomllib

import pytest

import medvqa_build.export.hub as hub
from medvqa_build.cli import main

from ...conftest import REPO


@pytest.mark.parametrize("installed", ["0.24.0", "0.36.0", "0.99.9", None])
def test_too_old_or_missing_is_one_line(monkeypatch, capsys, tmp_path, installed):
    monkeypatch.setattr(hub, "installed_hub_version", lambda: installed)
    assert main(["push", str(tmp_path), "me/bench"]) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: push needs huggingface_hub>=1.0.0")
    assert (installed or "not installed") in lines[0] and "Traceback" not in captured.err


@pytest.mark.parametrize("installed", ["1.0.0", "1.33.0", "2.0.0", "2.4.0", "3.1.0rc1"])
def test_new_enough_passes(monkeypatch, installed):
    monkeypatch.setattr(hub, "installed_hub_version", lambda: installed)
    hub.check_hub_version()


def test_pyproject_states_the_same_floor():
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    spec = next(d for d in deps if d.startswith("huggingface_hub"))
    floor = re.search(r">=([\d.]+)", spec).group(1)
    assert tuple(int(n) for n in floor.split(".")) + (0,) * (3 - floor.count(".") - 1) == (
        hub.HUB_FLOOR
    )
