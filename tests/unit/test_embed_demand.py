"""The embed stage embeds what generation can use (#35): the visual tasks' reachable
candidates and their samplers' per-class draws. Generation over only those vectors gives the
items that embedding every sample gives."""

import numpy as np
import pytest
import yaml

from medvqa_build.api import load_source
from medvqa_build.negatives.visual_class import VisualClassSampler
from medvqa_build.recipe import Recipe
from medvqa_build.rng import rng_for
from medvqa_build.sources import get_source
from medvqa_build.stages.embed import EmbeddingLookup, LeftOut
from medvqa_build.stages.embed_demand import plan_demand, se_factor
from medvqa_build.stages.generate import generate_items


@pytest.fixture(scope="module")
def samples(synthetic_root):
    return load_source("synthetic-endo", synthetic_root).samples


@pytest.fixture(scope="module")
def manifests():
    return {"synthetic-endo": get_source("synthetic-endo").manifest}


def _recipe(repo, strategy: str, params: dict, quota: int = 8) -> Recipe:
    data = yaml.safe_load((repo / "recipes" / "demo.yaml").read_text())
    task = next(t for t in data["tasks"] if t["name"] == "lesion-type-hard")
    task |= {"quota": quota, "negatives": {"strategy": strategy, "params": params}}
    data["tasks"] = [task]
    return Recipe.from_dict(data)


def _vectors(samples) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {s.sample_id: rng.normal(size=8).astype(np.float32) for s in samples}


def _only(demand, vectors) -> EmbeddingLookup:
    """The embed stage's lookup of a capped build: only the demanded samples have vectors."""
    ids = sorted(i for i in vectors if demand.wants(i))
    lookup = EmbeddingLookup(ids, np.stack([vectors[i] for i in ids]))
    pools = {k: v["ids"] for k, v in demand.tasks.items() if "ids" in v}
    lookup.left_out = LeftOut(failed=[], pools=pools)
    return lookup


def test_visual_class_demand_is_the_library_fit_draws(samples):
    labels = [(s.labels[0] if s.labels else None) for s in samples]
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(len(samples), 8)).astype(np.float32)
    sampler = VisualClassSampler(library_size=2)
    fitted = VisualClassSampler(library_size=2).fit(
        samples, emb, labels, rng=rng_for(0, "fit", "t")
    )
    keep = [i for i, lab in enumerate(labels) if lab]
    library = sorted(keep[r] for r in fitted._lib_rows.tolist())
    assert sorted(sampler.embed_demand(labels, rng_for(0, "fit", "t")).tolist()) == library
    assert len(library) == 2 * len({lab for lab in labels if lab})


def test_a_capped_visual_class_build_gives_the_items_of_embedding_everything(
    samples, manifests, repo
):
    recipe = _recipe(repo, "visual_class", {"library_size": 2, "embed_candidates": 12})
    demand = plan_demand(recipe, samples)
    vectors = _vectors(samples)
    row = demand.tasks["lesion-type-hard"]
    assert row["candidates"] == 12 and row["candidate_cap"] == 12
    assert all(c["drawn"] == min(2, c["pool"]) for c in row["classes"].values())
    assert len(demand.ids) < len([s for s in samples if (s.labels[0] if s.labels else None)])
    full = generate_items(recipe, samples, manifests, progress=False, embeddings=vectors)
    capped = generate_items(
        recipe, samples, manifests, progress=False, embeddings=_only(demand, vectors)
    )
    assert full.items and capped.items == full.items
    assert capped.dropped == full.dropped and capped.shortfall == full.shortfall


def test_visual_neighbor_fits_on_its_capped_pool(samples, manifests, repo):
    recipe = _recipe(repo, "visual_neighbor", {"pool_per_class": 2, "k": 4})
    demand = plan_demand(recipe, samples)
    row = demand.tasks["lesion-type-hard"]
    assert all(c["drawn"] == min(2, c["pool"]) for c in row["classes"].values())
    result = generate_items(
        recipe, samples, manifests, progress=False, embeddings=_only(demand, _vectors(samples))
    )
    assert len(result.items) == 8 and not result.shortfall
    assert all(i.negatives.pool_size >= 2 for i in result.items)


def test_candidates_past_the_cap_stop_the_task_with_one_line(samples, manifests, repo):
    recipe = _recipe(repo, "visual_class", {"library_size": 1, "embed_candidates": 3})
    demand = plan_demand(recipe, samples)
    result = generate_items(
        recipe, samples, manifests, progress=False, embeddings=_only(demand, _vectors(samples))
    )
    assert len(result.items) == 3 and result.shortfall == {"lesion-type-hard": 5}
    (dropped,) = result.dropped
    assert "embed_candidates" in dropped["reason"]


def test_all_lifts_the_caps(samples, repo):
    recipe = _recipe(repo, "visual_class", {"library_size": "all", "embed_candidates": "all"})
    demand = plan_demand(recipe, samples)
    labelled = {s.sample_id for s in samples if s.labels and s.image.startswith("images/")}
    assert demand.ids >= labelled
    assert plan_demand(recipe, samples, everything=True).ids is None


def test_bad_caps_are_one_recipe_error(samples, repo):
    from medvqa_build.errors import RecipeError

    with pytest.raises(RecipeError, match="library_size"):
        plan_demand(_recipe(repo, "visual_class", {"library_size": 0}), samples)


def test_the_stated_sampling_error():
    assert se_factor(200, 200) == 0.0 and se_factor(0, 10) is None
    # n of N without replacement: sqrt((N - n) / ((N - 1) n))
    assert se_factor(200, 10_000) == pytest.approx(
        ((10_000 - 200) / (9_999 * 200)) ** 0.5, abs=1e-6
    )


def test_the_report_states_each_visual_tasks_cap_pool_and_draw(samples, repo):
    from medvqa_build.pipeline.report import demand_lines

    recipe = _recipe(repo, "visual_class", {"library_size": 2, "embed_candidates": 12})
    row = plan_demand(recipe, samples).tasks["lesion-type-hard"]
    assert row["pool_cap_param"] == "library_size" and row["pool_cap"] == 2
    sizes = {k: c["pool"] for k, c in row["classes"].items()}
    assert min(sizes.values()) > 2  # every class is capped
    pool, drawn = sum(sizes.values()), 2 * len(sizes)
    worst = max((se_factor(2, n), k) for k, n in sizes.items())
    (line,) = demand_lines({"lesion-type-hard": row})
    assert line == (
        f"- lesion-type-hard: library_size 2 per class; pool N = {pool} in {len(sizes)} "
        f"classes, n = {drawn} drawn ({drawn / pool:.1%}); largest se_factor {worst[0]} "
        f"({worst[1]}); candidates 12 of {row['candidates_in_pool']} (embed_candidates 12); "
        f"{row['embedded']} embedded."
    )
    big = max(sizes.values())  # n = 2 of the largest class: the widest error
    assert worst[0] == pytest.approx(((big - 2) / ((big - 1) * 2)) ** 0.5, abs=1e-6)

    lifted = _recipe(repo, "visual_neighbor", {"pool_per_class": "all"})
    row = plan_demand(lifted, samples).tasks["lesion-type-hard"]
    (line,) = demand_lines({"lesion-type-hard": row})
    assert line.startswith(
        f"- lesion-type-hard: pool_per_class all per class; pool N = {pool} in {len(sizes)} "
        f"classes, n = {pool} drawn (100.0%); se_factor 0 (every class drawn whole); "
    )
    assert demand_lines({"t": {"mode": "whole pool", "pool": 7}}) == [
        "- t: its whole pool embedded (7 images)."
    ]
