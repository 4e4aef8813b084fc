"""Reading a recipe where the plug-ins are loaded: the recipe model (``recipe.py``) checks
keys and values and imports no plug-in, so the names a recipe gives that live in the plug-in
registries are checked here, in one place, whatever was imported before.

Each package keeps the check of its own names (the sources, the task generators and negative
strategies, the prompt levels, the export formats); :data:`PLUGIN_CHECKS` runs them in order.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..export import check_formats
from ..recipe import Recipe
from ..render import check_prompt_levels
from ..sources import check_source_ids
from ..tasks.requirements import check_recipe_tasks

PLUGIN_CHECKS: tuple[Callable[[Recipe, str], None], ...] = (
    check_source_ids,
    check_recipe_tasks,
    check_prompt_levels,
    check_formats,
)


def check_plugin_names(recipe: Recipe, where: str = "recipe") -> Recipe:
    """``recipe`` when every name it gives is registered; else the first
    :class:`~medvqa_build.errors.RecipeError` (one line naming the key, the value and the
    names allowed)."""
    for check in PLUGIN_CHECKS:
        check(recipe, where)
    return recipe


def read_recipe(path: str | os.PathLike, overrides: list[str] | None = None) -> Recipe:
    """A recipe file read and checked (``overrides`` as in ``--set``)."""
    return check_plugin_names(Recipe.from_yaml(path, overrides), str(path))


def recipe_from_dict(
    data: Any, overrides: list[str] | None = None, where: str = "recipe"
) -> Recipe:
    """A recipe mapping read and checked, as :func:`read_recipe` reads a file."""
    return check_plugin_names(Recipe.from_dict(data, overrides, where=where), where)
