"""A stage output made by other code is rebuilt, not reused; an edit that cannot change what
a stage writes (a comment, a docstring, a module the stage never imports) reuses it
(runner.code_fingerprint, per stage).

The version number does not change with every edit of a checkout; before stage outputs were
keyed by code, a build folder made before the contour tracer changed kept serving the old
outlines to a rerun."""

from pathlib import Path

from medvqa_build.pipeline import STAGES, runner
from medvqa_build.stages.base import Stage


class _Stage(Stage):
    name = "render"

    def inputs(self, ctx, key):
        return {}

    def run(self, ctx, key, out):
        return {}


def _fresh(monkeypatch, tmp_path, edits: dict[str, str]) -> dict[str, str]:
    """Every stage's code fingerprint over a copy of the package with ``edits`` applied."""
    package = Path(runner.__file__).resolve().parents[1]
    copy = tmp_path / "medvqa_build"
    for path in package.rglob("*.py"):
        target = copy / path.relative_to(package)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = path.read_text()
        for rel, change in edits.items():
            if path.relative_to(package).as_posix() == rel:
                text = change(text)
        target.write_text(text)
    monkeypatch.setattr(runner, "_PACKAGE", copy)
    for cached in (runner.code_fingerprint, runner._tree, runner._code_digest):
        cached.cache_clear()
    try:
        return {type(s).__module__: runner.code_fingerprint(type(s).__module__) for s in STAGES}
    finally:
        for cached in (runner.code_fingerprint, runner._tree, runner._code_digest):
            cached.cache_clear()


def test_docs_and_comments_rebuild_nothing(monkeypatch, tmp_path):
    base = _fresh(monkeypatch, tmp_path / "a", {})
    assert len(set(base.values())) == len(base)  # each stage its own code
    docs = _fresh(
        monkeypatch,
        tmp_path / "b",
        {
            "render/contour.py": lambda t: t.replace('"""', '"""Edited. ', 1) + "\n# a comment\n",
            "stages/convert.py": lambda t: t.replace("# -- the stage", "# -- the convert stage"),
        },
    )
    assert docs == base


def test_a_code_edit_rebuilds_the_stages_that_import_it(monkeypatch, tmp_path):
    base = _fresh(monkeypatch, tmp_path / "a", {})
    edited = _fresh(
        monkeypatch,
        tmp_path / "b",
        {"render/contour.py": lambda t: t + "\n\nEDITED = True\n"},
    )
    changed = {m for m in base if base[m] != edited[m]}
    assert "medvqa_build.stages.render" in changed
    assert "medvqa_build.stages.convert" not in changed  # convert never draws a contour


def test_a_stage_built_by_other_code_is_rebuilt(tmp_path, monkeypatch):
    calls = []

    def build(out):
        calls.append(out)
        (out / "x.txt").write_text("made")
        return {"n": 1}

    stage = _Stage()
    monkeypatch.setattr(runner, "code_fingerprint", lambda module: "code-a")
    first = runner.run_stage(tmp_path, stage, "items", {"x": 1}, build)
    again = runner.run_stage(tmp_path, stage, "items", {"x": 1}, build)
    assert not first.reused and again.reused and len(calls) == 1

    monkeypatch.setattr(runner, "code_fingerprint", lambda module: "code-b")
    assert not runner.stage_done(tmp_path, stage, "items", {"x": 1})
    other = runner.run_stage(tmp_path, stage, "items", {"x": 1}, build)
    assert not other.reused and len(calls) == 2 and other.path != first.path
