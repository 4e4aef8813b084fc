"""medvqa_build: raw public medical image datasets -> validated, reproducible VQA benchmarks.

>>> import medvqa_build as mb
>>> result = mb.build("recipes/demo.yaml", "demo-out")      # doctest: +SKIP
>>> result.items_frame().head()                            # doctest: +SKIP
"""

__version__ = "0.1.0"

from .api import build, convert_source, list_sources, load_recipe, load_source, make_synthetic  # noqa: E402
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
    "list_sources",
    "load_recipe",
    "load_source",
    "make_synthetic",
]
