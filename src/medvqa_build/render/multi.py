"""``multi``: 2-4 regions, each outlined in a distinct named colour (EndoBench's Mul level).

Each mark is drawn as a box (default) or a contour (``Mark.shape``), in the given order, so a
later mark may cover an earlier one where they overlap. ``multi_contour`` defaults to contours.
"""

from __future__ import annotations

from pathlib import Path

from .base import RENDERERS, Mark, PlannedRenderer, Stroke, Style
from .box import plan_box_mark
from .contour import plan_contour_mark

MIN_MARKS, MAX_MARKS = 2, 4


class MultiRenderer(PlannedRenderer):
    def __init__(self, name: str, default_shape: str, prompt_level: bool):
        self.name, self.default_shape = name, default_shape
        self.shape_kind, self.prompt_level = default_shape, prompt_level

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


RENDERERS.add("multi", MultiRenderer("multi", "box", prompt_level=True))
RENDERERS.add("multi_contour", MultiRenderer("multi_contour", "contour", prompt_level=False))
