"""A stage output made by other code is rebuilt, not reused; an edit that cannot change what
a stage writes (a comment, a docstring, a module the stage never imports) reuses it
(runner.code_fingerprint, per stage and per plug-in it runs).

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


PLUGINS = ("medvqa_build.render.contour", "medvqa_build.export.hf", "medvqa_build.tasks.counting")


def _fresh(monkeypatch, tmp_path, edits: dict[str, str], new: dict[str, str] | None = None):
    """Every stage's code fingerprint, and some plug-ins', over a copy of the package with
    ``edits`` applied and the ``new`` files added."""
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
    for rel, text in (new or {}).items():
        (copy / rel).write_text(text)
    monkeypatch.setattr(runner, "_PACKAGE", copy)
    caches = (runner.code_fingerprint, runner._tree, runner._code_digest, runner._used_names)
    for cached in caches:
        cached.cache_clear()
    try:
        modules = [type(s).__module__ for s in STAGES] + list(PLUGINS)
        return {m: runner.code_fingerprint(m) for m in modules}
    finally:
        for cached in caches:
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


def test_a_code_edit_rebuilds_the_stages_that_run_it(monkeypatch, tmp_path):
    base = _fresh(monkeypatch, tmp_path / "a", {})
    edited = _fresh(
        monkeypatch,
        tmp_path / "b",
        {"render/contour.py": lambda t: t + "\n\nEDITED = True\n"},
    )
    changed = {m for m in base if base[m] != edited[m]}
    # the contour renderer is a plug-in: it addresses the stages that run it (Stage.plugins),
    # not every stage that looks a renderer up
    assert changed == {"medvqa_build.render.contour"}


def test_a_new_unused_plugin_changes_no_stage_code(monkeypatch, tmp_path):
    """A new exporter module and its registration line in ``export/__init__``: no stage's
    own code and no other plug-in's code changes (issue 34: a new ``jsonl.py`` rebuilt the hf
    and vlmeval exports)."""
    base = _fresh(monkeypatch, tmp_path / "a", {})
    module = (
        "from .base import EXPORTERS\n\n\n"
        "@EXPORTERS.register('x')\ndef f(ctx, out):\n    return {}\n"
    )
    register = 'from . import native as _native  # noqa: F401  (registers "medsg", "spinebench")\n'
    added = _fresh(
        monkeypatch,
        tmp_path / "b",
        {"export/__init__.py": lambda t: t.replace(register, register + "from . import x as _x\n")},
        {"export/x.py": module},
    )
    assert added == base
    # a real import of the module (its name read) is followed
    used = _fresh(
        monkeypatch,
        tmp_path / "c",
        {"export/hf.py": lambda t: t + "\nfrom . import x\n\nX = x.f\n"},
        {"export/x.py": module},
    )
    assert {m for m in base if base[m] != used[m]} == {"medvqa_build.export.hf"}


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


def test_an_edited_negative_strategy_or_embedder_changes_no_stage_code(monkeypatch, tmp_path):
    """Option samplers and embedders are plug-ins too: the stages that run one name it
    (generate and embed: ``SAMPLERS.module``, ``EMBEDDERS.module``), so an edit of one changes
    no stage's own code. ``negatives/__init__`` once exported every sampler class by name, so
    an edit of the unused ``visual_neighbor`` rebuilt the demo from its convert stage on."""
    base = _fresh(monkeypatch, tmp_path / "a", {})
    for k, rel in enumerate(
        (
            "negatives/visual_neighbor.py",
            "negatives/visual_class.py",
            "negatives/label_pool.py",
            "negatives/offline_embedder.py",
            "negatives/open_clip_embedder.py",
        )
    ):
        edited = _fresh(monkeypatch, tmp_path / f"b{k}", {rel: lambda t: t + "\n\nEDITED = 1\n"})
        assert {m for m in base if base[m] != edited[m]} == set(), rel


def test_the_embed_stage_names_the_samplers_that_plan_its_demand(repo):
    """Which samples the embed stage embeds is planned with the tasks' samplers (a visual one
    demands embeddings): their code addresses its output, an unused sampler's does not."""
    from types import SimpleNamespace

    from medvqa_build.api import load_recipe
    from medvqa_build.negatives import EMBEDDERS, SAMPLERS
    from medvqa_build.stages.embed import Embed

    ctx = SimpleNamespace(recipe=load_recipe(repo / "recipes" / "demo.yaml"))
    assert sorted(set(Embed().plugins(ctx, "samples"))) == sorted(
        {
            EMBEDDERS.module("offline"),
            SAMPLERS.module("label_pool"),
            SAMPLERS.module("visual_class"),
        }
    )


def test_no_stage_carries_a_plugin_in_its_own_code():
    """Every plug-in of every registry addresses only the stages that run it (their
    ``plugins``): none lies in a stage's own import closure, where an edit of it would rebuild
    that stage for every recipe. ``render/__init__`` once imported ``coord_text`` from the
    ``coord`` renderer, which put it under embed, generate, render and validate."""
    from medvqa_build.export import EXPORTERS
    from medvqa_build.layouts import LAYOUTS
    from medvqa_build.negatives import EMBEDDERS, SAMPLERS
    from medvqa_build.render import RENDERERS
    from medvqa_build.tasks import TASKS

    plugins = {
        registry.module(name)
        for registry in (LAYOUTS, TASKS, RENDERERS, EXPORTERS, SAMPLERS, EMBEDDERS)
        for name in registry.names()
    }
    assert len(plugins) > 40
    carried = {
        stage.name: sorted(plugins & runner._closure(type(stage).__module__)) for stage in STAGES
    }
    assert carried == {stage.name: [] for stage in STAGES}
