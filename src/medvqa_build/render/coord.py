"""``coord``: the box is given as text (EndoBench's Coor level), nothing is drawn.

The clean image is returned unchanged; each region's box is recorded as a ``text`` shape, and
the question writer formats it with :func:`~medvqa_build.render.base.coord_text` in the
chosen convention (it lives in ``base``: a stage that writes coordinates does not run this
plug-in).
"""

from __future__ import annotations

from pathlib import Path

from ..records import DrawnShape
from .base import RENDERERS, Mark, PlannedRenderer, Stroke, Style
from .masks import region_box


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
