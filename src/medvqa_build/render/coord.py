"""``coord``: the box is given as text (EndoBench's Coor level), nothing is drawn.

The clean image is returned unchanged; each region's box is recorded as a ``text`` shape, and
the question writer formats it with :func:`coord_text` in the chosen convention.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..geometry import format_box
from ..records import DrawnShape
from .base import RENDERERS, Mark, PlannedRenderer, Stroke, Style
from .masks import region_box


def coord_text(box_xyxy: Sequence[float], convention: str, width: int, height: int) -> str:
    """The box (x2/y2 exclusive pixels) as prompt text: abs, norm1000, norm1 or qwen."""
    return format_box(box_xyxy, convention, width, height)


class CoordRenderer(PlannedRenderer):
    name = "coord"
    shape_kind = "text"

    def plan(
        self,
        marks: list[Mark],
        style: Style,
        h: int,
        w: int,
        root: Path | None = None,
        channels: str = "rgb",
    ) -> list[Stroke]:
        """One ``text`` shape per mark (the region's box); nothing is painted."""
        shapes = tuple(
            DrawnShape(
                image_index=0,
                kind="text",
                label=m.region.label,
                color=m.color,
                bbox=region_box(m.region, h, w, root),
            )
            for m in marks
        )
        return [Stroke(shapes)]


RENDERERS.add("coord", CoordRenderer())
