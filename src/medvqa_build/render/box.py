"""``box``: an unfilled rectangle around each mark's box (EndoBench's Box level)."""

from __future__ import annotations

import cv2
import numpy as np

from ..geometry import box_problem
from ..records import DrawnShape
from .base import COLORS, RENDERERS, Mark, RenderResult, Style


class BoxRenderer:
    name = "box"

    def draw(self, image: np.ndarray, marks: list[Mark], style: Style) -> RenderResult:
        h, w = image.shape[:2]
        t = style.thickness_for(h, w)
        shapes = []
        for mark in marks:
            box = mark.region.bbox
            if box is None:
                raise ValueError(f"region {mark.region.label!r} has no box to draw")
            problem = box_problem(box, w, h)
            if problem:
                raise ValueError(problem)
            x1, y1, x2, y2 = (int(round(v)) for v in box)
            # x2/y2 are exclusive edges: the last pixel column/row inside is x2-1/y2-1.
            cv2.rectangle(image, (x1, y1), (x2 - 1, y2 - 1), COLORS[mark.color], t, cv2.LINE_8)
            shapes.append(
                DrawnShape(
                    image_index=0,
                    kind="box",
                    label=mark.region.label,
                    color=mark.color,
                    bbox=(float(x1), float(y1), float(x2), float(y2)),
                    thickness_px=t,
                )
            )
        return RenderResult(image, tuple(shapes))


RENDERERS.add("box", BoxRenderer())
