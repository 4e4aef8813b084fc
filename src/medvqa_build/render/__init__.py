"""Visual-prompt renderers: pure functions from a clean image + marks to a new image and a
record of exactly what was drawn (``DrawnShape``), so question text and pixels agree."""

# Each module registers its renderers; the import order is the order the prompt levels are
# listed in (recipes, errors, docs), so it is kept by hand.
# isort: off
from . import image as _image  # noqa: F401  (registers "image", "none")
from . import box as _box  # noqa: F401  (registers "box")
from . import contour as _contour  # noqa: F401  (registers "contour")
from . import multi as _multi  # noqa: F401  (registers "multi", "multi_contour")
from . import coord as _coord  # noqa: F401  (registers "coord")
from . import mask as _mask  # noqa: F401  (registers "mask")
from . import point as _point  # noqa: F401  (registers "point")

# isort: on
from ..errors import RecipeError
from ..geometry import COORD_HINTS  # the sentence a coord prompt's question ends with
from .base import (
    COLORS,
    RENDERERS,
    Mark,
    RenderResult,
    Stroke,
    Style,
    coord_text,
    prompt_levels,
    render,
    render_in_place,
)
from .masks import load_region_mask, region_box
from .resize import Resize, fit_max_side


def check_prompt_levels(recipe, where: str) -> None:
    """Each task's ``prompt_level`` is a registered renderer that is a prompt level."""
    levels = prompt_levels()
    for i, task in enumerate(recipe.tasks):
        if task.prompt_level not in levels:
            raise RecipeError(
                f"tasks.{i}.prompt_level={task.prompt_level!r}: unknown prompt level",
                where=where,
                fix="use one of: " + ", ".join(levels),
            )


__all__ = [
    "COLORS",
    "COORD_HINTS",
    "RENDERERS",
    "Mark",
    "RenderResult",
    "Resize",
    "Stroke",
    "Style",
    "check_prompt_levels",
    "coord_text",
    "fit_max_side",
    "load_region_mask",
    "prompt_levels",
    "region_box",
    "render",
    "render_in_place",
]
