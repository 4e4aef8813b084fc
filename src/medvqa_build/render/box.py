"""``box``: an unfilled rectangle around each mark's box (EndoBench's Box level).

The stroke covers the box's outermost ``thickness_px`` pixels, inside the box, so drawn pixels
never leave the declared box or the image and the box as drawn equals the box recorded.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..records import DrawnShape
from .base import RENDERERS, Mark, PlannedRenderer, Stroke, Style, channel_colors
from .masks import region_box


def draw_box_outline(image: np.ndarray, box_px: tuple[int, int, int, int], rgb, t: int) -> None:
    """Paint the inner ``t``-pixel band of an integer xyxy box (x2/y2 exclusive) in place."""
    x1, y1, x2, y2 = box_px
    image[y1 : min(y1 + t, y2), x1:x2] = rgb
    image[max(y2 - t, y1) : y2, x1:x2] = rgb
    image[y1:y2, x1 : min(x1 + t, x2)] = rgb
    image[y1:y2, max(x2 - t, x1) : x2] = rgb


def plan_box_mark(
    mark: Mark, style: Style, h: int, w: int, root: Path | None = None, channels: str = "rgb"
) -> Stroke:
    """The box as drawn (integer edges around the region's box) and its stroke, which stays
    inside the box: the reach is the box."""
    t = style.thickness_for(h, w)
    box = region_box(mark.region, h, w, root)
    x1, y1 = (int(np.floor(v)) for v in box[:2])
    x2, y2 = (int(np.ceil(v)) for v in box[2:])
    color = channel_colors(channels)[mark.color]

    def paint(view: np.ndarray, ox: int, oy: int) -> None:
        draw_box_outline(view, (x1 - ox, y1 - oy, x2 - ox, y2 - oy), color, t)

    shape = DrawnShape(
        image_index=0,
        kind="box",
        label=mark.region.label,
        color=mark.color,
        bbox=(float(x1), float(y1), float(x2), float(y2)),
        thickness_px=t,
    )
    return Stroke((shape,), (), (x1, y1, x2, y2), paint)


class BoxRenderer(PlannedRenderer):
    name = "box"
    shape_kind = "box"
    plan_mark = staticmethod(plan_box_mark)


RENDERERS.add("box", BoxRenderer())
