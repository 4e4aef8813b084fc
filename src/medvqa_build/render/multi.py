"""``multi``: 2-4 regions, each outlined in a distinct named colour (EndoBench's Mul level).

Each mark is drawn as a box (default) or a contour (``Mark.shape``), in the given order, so a
later mark may cover an earlier one where they overlap. ``multi_contour`` defaults to contours.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .base import RENDERERS, Mark, RenderResult, Style
from .box import draw_box_mark
from .contour import _draw_contours

MIN_MARKS, MAX_MARKS = 2, 4


class MultiRenderer:
    def __init__(self, name: str, default_shape: str):
        self.name, self.default_shape = name, default_shape

    channels_aware = True

    def draw(
        self,
        image: np.ndarray,
        marks: list[Mark],
        style: Style,
        root: Path | None = None,
        channels: str = "rgb",
    ) -> RenderResult:
        if not MIN_MARKS <= len(marks) <= MAX_MARKS:
            raise ValueError(f"{self.name} needs {MIN_MARKS}-{MAX_MARKS} marks, got {len(marks)}")
        colors = [m.color for m in marks]
        if len(set(colors)) != len(colors):
            raise ValueError(f"{self.name} marks need distinct colours, got {colors}")
        shapes, decoded = [], []
        for mark in marks:
            shape = mark.shape or self.default_shape
            if shape == "box":
                shapes.append(draw_box_mark(image, mark, style, root, channels))
                decoded.append(None)
            elif shape == "contour":
                for drawn, polygon in _draw_contours(image, mark, style, root, channels):
                    shapes.append(drawn)
                    decoded.append(polygon)
            else:
                raise ValueError(f"{self.name} draws 'box' or 'contour' marks, got {shape!r}")
        return RenderResult(image, tuple(shapes), tuple(decoded))


RENDERERS.add("multi", MultiRenderer("multi", "box"))
RENDERERS.add("multi_contour", MultiRenderer("multi_contour", "contour"))
