"""``multi``: 2-4 regions, each outlined in a distinct named colour (EndoBench's Mul level).

Each mark is drawn as a box (default) or a contour (``Mark.shape``), in the given order, so a
later mark may cover an earlier one where they overlap. ``multi_contour`` defaults to contours.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .base import RENDERERS, Mark, RenderResult, Stroke, Style, paint_plan
from .box import plan_box_mark
from .contour import plan_contour_mark

MIN_MARKS, MAX_MARKS = 2, 4


class MultiRenderer:
    def __init__(self, name: str, default_shape: str):
        self.name, self.default_shape = name, default_shape

    channels_aware = True

    def plan(
        self,
        marks: list[Mark],
        style: Style,
        h: int,
        w: int,
        root: Path | None = None,
        channels: str = "rgb",
    ) -> list[Stroke]:
        if not MIN_MARKS <= len(marks) <= MAX_MARKS:
            raise ValueError(f"{self.name} needs {MIN_MARKS}-{MAX_MARKS} marks, got {len(marks)}")
        colors = [m.color for m in marks]
        if len(set(colors)) != len(colors):
            raise ValueError(f"{self.name} marks need distinct colours, got {colors}")
        strokes = []
        for mark in marks:
            shape = mark.shape or self.default_shape
            if shape == "box":
                strokes.append(plan_box_mark(mark, style, h, w, root, channels))
            elif shape == "contour":
                strokes.append(plan_contour_mark(mark, style, h, w, root, channels))
            else:
                raise ValueError(f"{self.name} draws 'box' or 'contour' marks, got {shape!r}")
        return strokes

    def draw(
        self,
        image: np.ndarray,
        marks: list[Mark],
        style: Style,
        root: Path | None = None,
        channels: str = "rgb",
    ) -> RenderResult:
        h, w = image.shape[:2]
        return paint_plan(image, self.plan(marks, style, h, w, root, channels))


RENDERERS.add("multi", MultiRenderer("multi", "box"))
RENDERERS.add("multi_contour", MultiRenderer("multi_contour", "contour"))
