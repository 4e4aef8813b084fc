"""The Python API a notebook uses; the CLI is a thin layer over these same functions."""

from __future__ import annotations

import os
from pathlib import Path

from .convert import ConvertResult, convert_source, scan_source
from .pipeline import BuildResult
from .pipeline import build as _build
from .recipe import Recipe
from .sources import GENERATORS, Source, all_sources, get_source


def list_sources() -> list[Source]:
    """Every registered source (packaged manifests plus ``MEDVQA_MANIFESTS`` folders)."""
    return [all_sources()[k] for k in sorted(all_sources())]


def load_source(source_id: str, root: str | os.PathLike, verify: str = "header") -> ConvertResult:
    """Scan a source root into samples + quarantine (``.to_pandas()`` for a DataFrame)."""
    return scan_source(source_id, root, verify=verify, progress=False)


def load_recipe(path: str | os.PathLike, overrides: list[str] | None = None) -> Recipe:
    """Read and validate a recipe; ``overrides`` are ``key.path=value`` strings as in ``--set``."""
    return Recipe.from_yaml(path, overrides)


def build(
    recipe: Recipe | str | os.PathLike, out_dir: str | os.PathLike = "build", **kwargs
) -> BuildResult:
    """Run a recipe (object or YAML path) into ``out_dir``; finished stages are reused."""
    if not isinstance(recipe, Recipe):
        recipe = load_recipe(recipe)
    return _build(recipe, out_dir, **kwargs)


def make_synthetic(source_id: str, root: str | os.PathLike, **options) -> Path:
    """Write a generated source (e.g. ``synthetic-endo``) under ``root``."""
    get_source(source_id)
    if source_id not in GENERATORS:
        from .errors import UsageError

        raise UsageError(
            f"source {source_id!r} is not generated", fix="use one of: " + ", ".join(GENERATORS)
        )
    return GENERATORS[source_id](root, **options)


__all__ = [
    "build",
    "convert_source",
    "list_sources",
    "load_recipe",
    "load_source",
    "make_synthetic",
]
