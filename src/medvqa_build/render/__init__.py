"""Visual-prompt renderers: pure functions from a clean image + marks to a new image and a
record of exactly what was drawn (``DrawnShape``), so question text and pixels agree."""

from .base import COLORS, RENDERERS, Mark, RenderResult, Style, render
from . import box as _box  # noqa: F401  (registers "box")

__all__ = ["COLORS", "RENDERERS", "Mark", "RenderResult", "Style", "render"]
