"""The sources of a build: each recipe source's root found (:meth:`Source.resolve`), the
generated ones written into a stage folder, the missing ones named with where to get them.

With ``--allow-missing`` the recipe goes on with the sources present: tasks left without a
source are dropped and their quota reported as shortfall.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import RecipeError, SourceError
from ..recipe import Recipe
from ..sources import get_source
from .base import BuildContext, Stage, StageResult


def _generated(recipe: Recipe) -> list[Any]:
    """The recipe's sources written by a generator rather than read from a root."""
    out = []
    for spec in recipe.sources:
        source = get_source(spec.id)
        if spec.generate is not None or (spec.root is None and source.generator is not None):
            if source.generator is None:
                raise RecipeError(
                    f"source {spec.id!r} is not generated; give it a root", fix="set sources[].root"
                )
            out.append(spec)
    return out


def _missing_line(source, where: str) -> str:
    m = source.manifest
    return f"{m.id} ({where}; get it from {m.download or m.homepage}, access: {m.access})"


def _without_missing(recipe: Recipe, roots: dict[str, Path]) -> tuple[Recipe, dict[str, int]]:
    """The recipe restricted to the present sources, and the quotas of tasks left with none."""
    data = recipe.model_dump(mode="json")
    data["sources"] = [s for s in data["sources"] if s["id"] in roots]
    kept, skipped = [], {}
    for task in data["tasks"]:
        if task["sources"]:
            task["sources"] = [s for s in task["sources"] if s in roots]
            if not task["sources"]:
                skipped[task["name"]] = max(1, round(task["quota"] * recipe.quota_scale))
                continue
        kept.append(task)
    data["tasks"] = kept
    return Recipe.model_validate(data), skipped


class Materialize(Stage):
    """Roots of the recipe's sources; a generated source (synthetic-endo) is written once per
    parameters into ``stages/materialize/<id>-<fp>`` and reused."""

    name = "materialize"

    def prepare(self, ctx: BuildContext) -> None:
        generated = {spec.id for spec in _generated(ctx.recipe)}
        for spec in ctx.recipe.sources:
            if spec.id in generated:
                continue
            source = get_source(spec.id)
            try:
                root = ctx.recipe.resolved_root(spec)
            except RecipeError:
                ctx.missing.append(
                    _missing_line(source, f"root {spec.root} uses an unset environment variable")
                )
                continue
            if root is None or not root.is_dir():
                ctx.missing.append(_missing_line(source, f"expected at {root or 'no root given'}"))
                continue
            ctx.roots[spec.id] = source.check_root(root)
        if ctx.missing and not ctx.allow_missing:
            raise SourceError(
                f"{len(ctx.missing)} source(s) missing: " + "; ".join(ctx.missing),
                fix="download them and set their roots (or environment variables), or pass "
                "--allow-missing to build from the sources present",
            )

    def keys(self, ctx: BuildContext) -> list[str]:
        return [spec.id for spec in _generated(ctx.recipe)]

    def inputs(self, ctx: BuildContext, key: str) -> Any:
        spec = next(s for s in ctx.recipe.sources if s.id == key)
        return {"seed": ctx.recipe.seed, **(spec.generate or {})}

    def run(self, ctx: BuildContext, key: str, out: Path) -> dict[str, Any]:
        get_source(key).generator(out, **self.inputs(ctx, key))
        return {}

    def finish(self, ctx: BuildContext, results: list[StageResult]) -> None:
        for key, result in zip(self.keys(ctx), results, strict=True):
            ctx.roots[key] = result.path
        if not ctx.roots:
            raise SourceError(
                "no source of the recipe is present", fix="download at least one source"
            )
        if ctx.missing:
            ctx.recipe, ctx.skipped = _without_missing(ctx.recipe, ctx.roots)
        ctx.manifests = {s.id: get_source(s.id).manifest for s in ctx.recipe.sources}
