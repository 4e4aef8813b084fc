"""Which sample fields feed a task, and whether a recipe's sources provide them.

A generator states its needs with a classmethod ``requirements(params, prompt_level)``
returning alternatives: a list of sets of capabilities, any one of which suffices. A source's
capabilities come from its manifest: an explicit ``provides:`` list when the manifest has one,
otherwise what its layout parts' options imply. Capabilities are

- ``labels``: image-level labels;            - ``regions``: regions with a box;
- ``masks``: regions with a mask;            - ``attribute:<name>``: a per-sample attribute;
- ``attribute:tool``: ``tool:<name>`` 0/1 presence attributes;
- ``region_attribute:<name>``: per-region values (``region<k>.<name>`` attributes);
- ``points``: regions given as points (a spine level, a landmark) rather than boxes.

Every registered layout declares what it provides, so the check covers every source.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import RecipeError
from ..negatives import SAMPLERS
from ..sources import get_source, manifest_capabilities
from .base import TASKS


def task_requirements(spec: Any) -> list[set[str]] | None:
    """The alternatives of capabilities that feed the task, or None if the generator is silent."""
    requirements = getattr(TASKS.get(spec.generator), "requirements", None)
    if requirements is None:
        return None
    return [set(a) for a in requirements(dict(spec.params), spec.prompt_level)]


def _describe(alternatives: list[set[str]]) -> str:
    return " or ".join("+".join(sorted(a)) for a in alternatives)


def check_task_sources(spec: Any, manifests: Mapping[str, Any]) -> str | None:
    """Why no (or a named) source of the task can feed it, or None when it can be fed.

    ``manifests`` are the recipe's sources (id -> SourceManifest). A task that names its
    sources needs every one of them to feed it; a task over all sources needs at least one.
    """
    alternatives = task_requirements(spec)
    if alternatives is None:
        return None
    named = list(spec.sources)
    wanted = spec.where.get("source") if hasattr(spec, "where") else None
    if wanted is not None:
        allowed = [wanted] if isinstance(wanted, str) else list(wanted)
        named = [s for s in (named or list(manifests)) if s in allowed] or named
    candidates = named or list(manifests)
    feeders, lacking = [], {}
    for sid in candidates:
        manifest = manifests.get(sid)
        if manifest is None:
            continue
        have = manifest_capabilities(manifest)
        if any(a <= have for a in alternatives):
            feeders.append(sid)
        else:
            lacking[sid] = sorted(have)
    needs = _describe(alternatives)
    if named and lacking:
        detail = "; ".join(
            f"{sid} provides {', '.join(have) or 'nothing'}" for sid, have in lacking.items()
        )
        return (
            f"task {spec.name!r} ({spec.generator}) needs {needs}, which source(s) "
            f"{', '.join(lacking)} lack ({detail})"
        )
    if not feeders and candidates:
        return (
            f"task {spec.name!r} ({spec.generator}) needs {needs}, and none of the sources "
            f"{', '.join(candidates)} provides it"
        )
    return None


def tasks_losing_input(
    tasks: list[Any], source: str, have_all: set[str], have: set[str]
) -> list[str]:
    """Names of the ``tasks`` that ``source`` could feed with every part present (capabilities
    ``have_all``) but cannot with the parts found (``have``): what a partial download costs."""
    out = []
    for spec in tasks:
        if spec.sources and source not in spec.sources:
            continue
        alternatives = task_requirements(spec)
        if alternatives is None:
            continue
        if any(a <= have_all for a in alternatives) and not any(a <= have for a in alternatives):
            out.append(spec.name)
    return out


def check_recipe_tasks(recipe: Any, where: str) -> None:
    """Each task's generator and negative strategy exist, and its sources can feed it."""
    manifests = {s.id: get_source(s.id).manifest for s in recipe.sources}
    for i, t in enumerate(recipe.tasks):
        for key, registry, value in (
            ("generator", TASKS, t.generator),
            ("negatives.strategy", SAMPLERS, t.negatives.strategy),
        ):
            if value not in registry:
                raise RecipeError(
                    f"tasks.{i}.{key}={value!r}: unknown {registry.kind}",
                    where=where,
                    fix="use one of: " + ", ".join(registry.names()),
                )
        reason = check_task_sources(t, manifests)
        if reason:
            raise RecipeError(
                f"tasks.{i} ({t.name}): {reason}",
                where=where,
                fix="point the task at sources with that annotation (tasks[].sources)",
            )
