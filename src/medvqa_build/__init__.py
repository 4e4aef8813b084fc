"""medvqa_build: raw public medical image datasets -> validated, reproducible VQA benchmarks.

>>> import medvqa_build as mb
>>> result = mb.build("recipes/demo.yaml", "demo-out")      # doctest: +SKIP
>>> result.items_frame().head()                            # doctest: +SKIP

The public names load on first use (PEP 562), so ``import medvqa_build`` and the CLI's
``--help`` or no-op rerun do not import the pipeline and its libraries.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from ._version import __version__  # noqa: F401

if TYPE_CHECKING:
    from .api import (
        build,
        convert_source,
        diff,
        inspect_source,
        list_sources,
        load_recipe,
        load_source,
        make_synthetic,
        open_build,
        open_samples,
        score,
    )
    from .recipe import Recipe
    from .records import Item, MaskRef, Region, Sample

# public name -> the module that defines it
_PUBLIC = {
    "Item": "records",
    "MaskRef": "records",
    "Recipe": "recipe",
    "Region": "records",
    "Sample": "records",
    "build": "api",
    "convert_source": "api",
    "diff": "api",
    "inspect_source": "api",
    "list_sources": "api",
    "load_recipe": "api",
    "load_source": "api",
    "make_synthetic": "api",
    "open_build": "api",
    "open_samples": "api",
    "score": "api",
}

__all__ = [
    "Item",
    "MaskRef",
    "Recipe",
    "Region",
    "Sample",
    "build",
    "convert_source",
    "diff",
    "inspect_source",
    "list_sources",
    "load_recipe",
    "load_source",
    "make_synthetic",
    "open_build",
    "open_samples",
    "score",
]


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'medvqa_build' has no attribute {name!r}")
    value = getattr(import_module(f".{_PUBLIC[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
