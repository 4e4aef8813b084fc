"""Every source present reaches the exports (issue 23, point 6): for each recipe, built over
the fixtures of its sources with quotas above what they hold, every source contributes items
to every task it can feed. Totals alone would not notice a source that never renders (RSNA
lumbar DICOMs once went to the NIfTI reader, and another spine source still gave the
localisation task its items).

A source can feed a task when the task names it, or when the task names none and the
source's layouts provide what the task's generator requires (tasks/requirements.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from medvqa_build.cli import main
from medvqa_build.recipe import Recipe
from medvqa_build.sources import get_source
from medvqa_build.store.parquet import iter_samples
from medvqa_build.store.tables import ItemTable
from medvqa_build.tasks.requirements import task_requirements

from ..fixtures import fixture_writer

REPO = Path(__file__).resolve().parents[2]


def _feeders(recipe: Recipe, samples) -> dict[str, list[str]]:
    """task name -> the recipe's sources that can feed it."""
    out = {}
    pairs = _cross_modal_sources(samples)
    for task in recipe.tasks:
        named = list(task.sources)
        wanted = task.where.get("source")
        if wanted is not None:
            allowed = [wanted] if isinstance(wanted, str) else list(wanted)
            named = [s for s in (named or [s.id for s in recipe.sources]) if s in allowed]
        if named:
            out[task.name] = named
            continue
        alternatives = task_requirements(task) or [set()]
        out[task.name] = [
            s.id
            for s in recipe.sources
            if any(a <= get_source(s.id).capabilities() for a in alternatives)
            and (task.generator != "crossmodal" or s.id in pairs)
        ]
    return out


def _cross_modal_sources(samples) -> set[str]:
    """Sources with a structure that some other modality also shows: a cross-modal item pairs
    a slice with the same structure in another modality, so only those sources can feed it
    (a CT-only liver task next to BraTS' MR tumours has no partner)."""
    modalities: dict[str, set[str]] = {}
    by_source: dict[str, set[tuple[str, str]]] = {}
    for s in samples:
        for r in s.regions:
            modalities.setdefault(r.label, set()).add(s.modality)
            by_source.setdefault(s.source, set()).add((r.label, s.modality))
    return {
        source
        for source, found in by_source.items()
        if any(modalities[label] - {modality} for label, modality in found)
    }


def _build(recipe: dict, tmp_path: Path) -> Path:
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    out = tmp_path / "build"
    assert main(["run", str(path), "-o", str(out), "-q"]) == 0
    return out


def _key(task: str, subtask: str, prompt_level: str, generator: str) -> tuple[str, ...]:
    """What tells a recipe task's items apart (two recipe tasks with the same key, such as
    the demo's two lesion-type tasks, are checked together)."""
    return (task, subtask, prompt_level, generator)


def _assert_every_source_feeds(out: Path) -> None:
    recipe = Recipe.from_yaml(out / "recipe.yaml")
    meta = json.loads((out / "build.json").read_text())
    fed: dict[tuple, set[str]] = {}
    for item in ItemTable(out / meta["items"]):
        key = _key(item.task, item.subtask, item.prompt_level, item.template_id.split("/")[0])
        fed.setdefault(key, set()).update(s.split(":", 1)[0] for s in item.sample_ids[:1])
    samples = [
        s
        for p in sorted((out / "stages" / "convert").glob("*/samples.parquet"))
        for s in iter_samples(p)
    ]
    feeders = _feeders(recipe, samples)
    missing = [
        f"{t.name} <- {source}"
        for t in recipe.tasks
        for source in feeders[t.name]
        if source not in fed.get(_key(t.task, t.subtask or t.task, t.prompt_level, t.generator), ())
    ]
    assert not missing, f"sources without items in tasks they can feed: {missing}"


def _replicas_module():
    path = REPO / "scripts" / "build_endobench_replicas.py"
    spec = importlib.util.spec_from_file_location("build_endobench_replicas", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_endobench_every_source_feeds_its_tasks(tmp_path):
    data = tmp_path / "data"
    roots = _replicas_module().write_replicas(data)
    recipe = yaml.safe_load((REPO / "recipes/endobench.yaml").read_text())
    recipe["embedder"] = "offline"
    for source in recipe["sources"]:
        source["root"] = str(roots[source["id"]])
    recipe["quota_scale"] = 1.0
    # options and boxes are bent below to fit the tiny replicas: what this checks is coverage;
    # the recipe's own audit runs on the replicas in test_endobench_all_sources
    recipe["blind"] = False
    # and answer balance off: it withholds the polyp-only sources' items on purpose once
    # rarer findings set the level (test_endobench_all_sources checks balance on replicas)
    recipe["balance"] = False
    for task in recipe["tasks"]:
        if task.get("negatives", {}).get("strategy") == "label_pool":
            # distractors come from the item's own source's vocabulary: a replica holds a few
            # of its dataset's classes, too few for EndoBench's 4-6 options
            task["n_options"] = 3
        if "max_iou" in task.get("params", {}):
            # a replica frame is ~48x36 px around a ~20 px polyp: three more boxes of its size
            # with IoU < 0.1 rarely fit, and which candidates find room depends on the draws
            task["params"]["max_iou"] = 0.6
    _assert_every_source_feeds(_build(recipe, tmp_path))


@pytest.mark.slow
def test_spinebench_every_source_feeds_its_tasks(tmp_path):
    recipe = yaml.safe_load((REPO / "recipes/spinebench.yaml").read_text())
    recipe["embedder"] = "offline"
    for source in recipe["sources"]:
        source["root"] = str(fixture_writer(source["id"])(tmp_path / source["id"]))
    recipe["tasks"][0]["n_options"] = 3  # the tiny fixtures hold few diseases
    recipe["tasks"][0]["negatives"]["params"]["library_size"] = 4
    _assert_every_source_feeds(_build(recipe, tmp_path))


@pytest.mark.slow
def test_medsg_every_source_feeds_its_tasks(tmp_path):
    recipe = yaml.safe_load((REPO / "recipes/medsg.yaml").read_text())
    for source in recipe["sources"]:
        source["root"] = str(fixture_writer(source["id"])(tmp_path / source["id"]))
    for task in recipe["tasks"]:
        task["quota"] = 12
    recipe["export"]["formats"] = ["hf"]
    _assert_every_source_feeds(_build(recipe, tmp_path))


def test_demo_every_source_feeds_its_tasks(tmp_path):
    recipe = yaml.safe_load((REPO / "recipes/demo.yaml").read_text())
    _assert_every_source_feeds(_build(recipe, tmp_path))
