"""Visual-prompt renderers: pure functions from a clean image + marks to a new image and a
record of exactly what was drawn (``DrawnShape``), so question text and pixels agree."""

from . import box as _box  # noqa: F401  (registers "box")
from . import contour as _contour  # noqa: F401  (registers "contour")
from . import coord as _coord  # noqa: F401  (registers "coord", "image", "none")
from . import mask as _mask  # noqa: F401  (registers "mask")
from . import multi as _multi  # noqa: F401  (registers "multi", "multi_contour")
from . import point as _point  # noqa: F401  (registers "point")
from .base import COLORS, RENDERERS, Mark, RenderResult, Stroke, Style, render, render_in_place
from .coord import COORD_HINTS, coord_text
from .distractors import sample_distractor_boxes
from .masks import load_region_mask, region_box
from .resize import Resize, fit_max_side

PROMPT_LEVELS = ("image", "box", "contour", "mask", "point", "multi", "coord")

__all__ = [
    "COLORS",
    "COORD_HINTS",
    "PROMPT_LEVELS",
    "RENDERERS",
    "Mark",
    "RenderResult",
    "Resize",
    "Stroke",
    "Style",
    "coord_text",
    "fit_max_side",
    "load_region_mask",
    "region_box",
    "render",
    "render_in_place",
    "sample_distractor_boxes",
]
