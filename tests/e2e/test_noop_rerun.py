"""A no-op rerun (issue 28): it prints and writes what a real rerun would, loads none of the
pipeline, and anything a build depends on that changed makes it a real run again."""

import json
import os
import subprocess
import sys

import pytest
import yaml

import medvqa_build.api
from medvqa_build.cli import main
from medvqa_build.cli.noop import RECORD


@pytest.fixture
def recipe(tmp_path, repo, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = yaml.safe_load((repo / "recipes" / "demo.yaml").read_text())
    data["name"] = "tiny"
    data["sources"][0]["generate"].update(n_images=20, frames_per_video=6)
    data["sources"].append({"id": "kvasir", "root": str(tmp_path / "kvasir")})
    for t in data["tasks"]:
        t["quota"] = 4
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def builds(monkeypatch):
    """Counts the real runs ``run`` starts: each loads the recipe model (a replay does not)."""
    calls = []
    real = medvqa_build.api.load_recipe

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(medvqa_build.api, "load_recipe", counting)
    return calls


def _run(recipe, capsys, *extra):
    assert main(["run", str(recipe), "-q", "--allow-missing", *extra]) == 0
    return capsys.readouterr().out


def test_a_rerun_replays_the_real_reruns_lines_and_report(recipe, capsys, builds):
    out = recipe.parent / "build" / "tiny"  # the default folder, told from the recipe's name
    first = _run(recipe, capsys)
    assert "stages reused: 0/8" in first and (out / RECORD).is_file()
    replayed = _run(recipe, capsys)
    assert len(builds) == 1  # the second run built nothing and loaded no stage
    assert "stages reused: 8/8 (nothing rebuilt)" in replayed
    assert replayed.count(" built\n") == 0 and replayed.count(" reused\n") == 8
    replay_report = (out / "report.json").read_bytes()
    assert all(s["reused"] for s in json.loads(replay_report)["stages"])

    (out / RECORD).unlink()  # the same rerun, done for real
    real = _run(recipe, capsys)
    assert len(builds) == 2
    assert real == replayed
    assert (out / "report.json").read_bytes() == replay_report


def test_a_replayed_rerun_imports_no_pipeline(recipe, capsys):
    _run(recipe, capsys)
    code = (
        "import sys; from medvqa_build.cli import main; "
        f"rc = main(['run', {str(recipe)!r}, '-q', '--allow-missing']); "
        "heavy = ['pandas', 'pyarrow', 'cv2', 'medvqa_build.api', 'medvqa_build.pipeline']; "
        "print('LOADED', [m for m in heavy if m in sys.modules], rc)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=recipe.parent,
        capture_output=True,
        text=True,
        env=dict(os.environ),
        check=True,
    )
    assert done.stdout.strip().endswith("LOADED [] 0")
    assert "stages reused: 8/8 (nothing rebuilt)" in done.stdout


@pytest.mark.parametrize(
    "change",
    ["recipe", "override", "env", "build-file", "root-appears", "verbose", "manifest-folder"],
)
def test_what_a_build_depends_on_makes_a_real_run(recipe, capsys, builds, monkeypatch, change):
    out = recipe.parent / "build" / "tiny"
    extra: list[str] = []
    manifests = recipe.parent / "manifests"
    manifests.mkdir()
    monkeypatch.setenv("MEDVQA_MANIFESTS", str(manifests))
    _run(recipe, capsys)
    if change == "recipe":
        recipe.write_text(recipe.read_text() + "# a comment\n")
    elif change == "override":
        extra = ["--set", "seed=0"]
    elif change == "env":
        monkeypatch.setenv("MEDVQA_SOMETHING", "1")
    elif change == "build-file":
        (out / "hf" / "README.md").unlink()
    elif change == "root-appears":
        (recipe.parent / "kvasir").mkdir()
    elif change == "verbose":
        extra = []
        assert main(["-v", "run", str(recipe), "-q", "--allow-missing"]) == 0
        capsys.readouterr()
    elif change == "manifest-folder":
        (manifests / "notes.txt").write_text("a user's manifest folder changed\n")
    if change == "root-appears":  # an empty download folder: the real run says what is missing
        main(["run", str(recipe), "-q", "--allow-missing"])
    elif change != "verbose":
        _run(recipe, capsys, *extra)
    assert len(builds) == 2, f"a change of {change} was replayed"


def test_a_broken_record_is_ignored(recipe, capsys, builds):
    out = recipe.parent / "build" / "tiny"
    _run(recipe, capsys)
    (out / RECORD).write_text("{not json")
    assert "stages reused: 8/8" in _run(recipe, capsys)
    assert len(builds) == 2 and json.loads((out / RECORD).read_text())["key"]
