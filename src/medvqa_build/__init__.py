"""medvqa_build: raw public medical image datasets -> validated, reproducible VQA benchmarks.

>>> import medvqa_build as mb
>>> result = mb.build("recipes/demo.yaml", "demo-out")      # doctest: +SKIP
>>> result.items_frame().head()                            # doctest: +SKIP
"""

from ._version import __version__  # noqa: E402, F401
from .api import (  # noqa: E402
    build,
    convert_source,
    inspect_source,
    list_sources,
    load_recipe,
    load_source,
    make_synthetic,
)
from .recipe import Recipe  # noqa: E402
from .records import Item, MaskRef, Region, Sample  # noqa: E402

__all__ = [
    "Item",
    "MaskRef",
    "Recipe",
    "Region",
    "Sample",
    "build",
    "convert_source",
    "inspect_source",
    "list_sources",
    "load_recipe",
    "load_source",
    "make_synthetic",
]
