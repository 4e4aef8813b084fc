"""What the embed stage embeds: the samples generation can use, never the rest of a source.

A visual task reads the vectors of its candidates (the queries) and of its distractor pool.
The candidates it can reach are the first ``embed_candidates`` of its round-robin order (by
default ``2 x quota + 64``: enough for the items dropped on the way); the pool is what its
sampler draws per class (``visual_class``: the library of ``library_size`` images per class;
``visual_neighbor``: ``pool_per_class`` images per label). Both are drawn here with the seeds
generate uses, through the same functions (:func:`~.generate._order_of_plan`,
``sampler.embed_demand``), so a build embeds exactly what generate then reads. ``"all"`` lifts
either cap. A task planned otherwise (a ``train`` task, whose pool depends on the test items,
or one pairing samples across its pool), a sampler without ``embed_demand``, and curation by
embeddings need every sample of their pool, and get it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import RecipeError
from ..negatives import SAMPLERS
from ..recipe import Recipe, TaskSpec
from ..rng import rng_for
from ..store.tables import as_sample_source
from .generate import _order_of_plan, _plan_pools, _Task, generator_for

CANDIDATE_FACTOR, CANDIDATE_EXTRA = 2, 64  # default candidates embedded: 2 x quota + 64


@dataclass
class Demand:
    """The sample ids to embed (``ids`` None: every sample) and, per task, what was drawn."""

    ids: set[str] | None
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)

    def wants(self, sample_id: str) -> bool:
        return self.ids is None or sample_id in self.ids


class _Everything:
    """Stands in for the embeddings while planning: every sample counts as embedded."""

    plans_everything = True

    def __contains__(self, sample_id: object) -> bool:
        return True


def visual_specs(recipe: Recipe) -> list[TaskSpec]:
    """The recipe's tasks whose negative strategy reads image embeddings."""
    return [
        t
        for t in recipe.tasks
        if getattr(SAMPLERS.get(t.negatives.strategy), "needs_embeddings", False)
    ]


def demand_inputs(recipe: Recipe, everything: bool) -> dict[str, Any]:
    """What decides the demand (part of the embed stage's address)."""
    specs = [t.model_dump(mode="json") for t in visual_specs(recipe)]
    return {"tasks": specs, "seed": recipe.seed, "scale": recipe.quota_scale, "all": everything}


def plan_demand(recipe: Recipe, samples, *, everything: bool = False) -> Demand:
    """The samples the recipe's visual tasks can use (every sample with ``everything``: the
    curate section selects or deduplicates by embedding)."""
    if everything:
        return Demand(None, {"*": {"mode": "all", "why": "curate uses embeddings"}})
    source = as_sample_source(samples)
    planned: list[_Task] = []
    whole: list[_Task] = []
    for i, spec in enumerate(visual_specs(recipe)):
        task = _task(recipe, spec, i)
        if task.gen.per_sample and spec.split == "test" and hasattr(task.sampler, "embed_demand"):
            planned.append(task)
        else:
            whole.append(task)
    ids: set[str] = set()
    report: dict[str, dict[str, Any]] = {}
    if whole:
        counts = {t.spec.name: 0 for t in whole}
        for batch in source.numbered_batches():
            for _, s in batch:
                for t in whole:
                    if t.in_pool(s):
                        ids.add(s.sample_id)
                        counts[t.spec.name] += 1
        for t in whole:
            report[t.spec.name] = {"mode": "whole pool", "pool": counts[t.spec.name]}
    if planned:
        _plan_pools(planned, source, _Everything())
        for t in planned:
            task_ids, report[t.spec.name] = _task_demand(recipe, t, source)
            ids |= task_ids
            report[t.spec.name]["ids"] = sorted(task_ids)
    return Demand(ids, report)


def _task(recipe: Recipe, spec: TaskSpec, i: int) -> _Task:
    try:
        sampler = SAMPLERS.get(spec.negatives.strategy)(**spec.negatives.params)
    except (TypeError, ValueError) as exc:
        raise RecipeError(
            f"tasks.{i} ({spec.name}).negatives.params: {exc}",
            fix="see the strategy's parameters in docs/negatives.md",
        ) from exc
    return _Task(
        spec=spec,
        gen=generator_for(recipe, spec),
        sampler=sampler,
        sources=spec.sources or [s.id for s in recipe.sources],
        visual=True,
        groups=frozenset(),
    )


def candidate_cap(recipe: Recipe, spec: TaskSpec, sampler) -> int | None:
    """How many of a task's candidates are embedded (None: all)."""
    value = getattr(sampler, "embed_candidates", None)
    if value == "all":
        return None
    if value is None:
        return CANDIDATE_FACTOR * recipe.quota(spec) + CANDIDATE_EXTRA
    return int(value)


def _task_demand(recipe: Recipe, task: _Task, source) -> tuple[set[str], dict[str, Any]]:
    """One planned task's ids: its first candidates and its sampler's per-class draw."""
    spec, refs, labels = task.spec, task.fit_refs, task.fit_labels
    drawn = task.sampler.embed_demand(labels, rng_for(recipe.seed, "fit", spec.name))
    ids = {refs.ids[int(i)] for i in drawn}
    order = _order_of_plan(task, rng_for(recipe.seed, "generate", spec.name))
    cap = candidate_cap(recipe, spec, task.sampler)
    rows = {task.rows[int(k)] for k in (order if cap is None else order[:cap])}
    found = source.take_fields(rows, ["sample_id"])  # one column of their row groups
    ids |= {found[r]["sample_id"] for r in rows}
    population: dict[str, int] = {}
    for lab in labels:
        if lab:
            population[str(lab)] = population.get(str(lab), 0) + 1
    per_class: dict[str, int] = {}
    for i in drawn:
        lab = str(labels[int(i)])
        per_class[lab] = per_class.get(lab, 0) + 1
    classes = {
        lab: {
            "pool": n,
            "drawn": per_class.get(lab, 0),
            "se_factor": se_factor(per_class.get(lab, 0), n),
        }
        for lab, n in sorted(population.items())
    }
    report = {
        "mode": "capped",
        **pool_cap(task.sampler),
        "candidates": len(order) if cap is None else min(cap, len(order)),
        "candidates_in_pool": len(order),
        "candidate_cap": "all" if cap is None else cap,
        "classes": classes,
        "embedded": len(ids),
        "task_pool": len(refs),
    }
    task.rows = task.ordinals = task.truth_codes = None  # free the plan
    return ids, report


def pool_cap(sampler) -> dict[str, Any]:
    """``{"pool_cap_param": name, "pool_cap": count or "all"}``: the sampler's per-class cap on
    its pool (its ``pool_cap_param`` attribute names it); ``{}`` for a sampler without one."""
    name = getattr(sampler, "pool_cap_param", None)
    if name is None:
        return {}
    value = getattr(sampler, name, None)
    return {"pool_cap_param": name, "pool_cap": "all" if value is None else int(value)}


def se_factor(drawn: int, population: int) -> float | None:
    """The standard error of a class score averaged over ``drawn`` of the class's
    ``population`` images, per unit of spread of the similarities: ``sqrt((N-n)/((N-1) n))``
    (simple random sampling without replacement); 0 when every image is drawn, None when
    none is."""
    if drawn <= 0:
        return None if population else 0.0
    if drawn >= population or population <= 1:
        return 0.0
    return round(math.sqrt((population - drawn) / ((population - 1) * drawn)), 6)


__all__ = [
    "Demand",
    "candidate_cap",
    "demand_inputs",
    "plan_demand",
    "pool_cap",
    "se_factor",
    "visual_specs",
]
