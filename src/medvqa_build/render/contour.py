"""``contour``: the outline of each mark's mask (EndoBench's Cont level), one shape per outline.

Outlines are those of :func:`geometry.mask_to_contours` (pixel-centre coordinates, holes
included; computed on the mask's crop) and are drawn with ``cv2.polylines`` centred on the mask
boundary.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from ..geometry import crop_contours
from ..records import DrawnShape
from .base import COLORS, RENDERERS, Mark, RenderResult, Style
from .masks import load_region_crop

_SHIFT = 2  # fractional bits: cv2 draws the half-pixel contour vertices without rounding bias


def draw_contour_mark(
    image: np.ndarray, mark: Mark, style: Style, root: Path | None = None
) -> list[DrawnShape]:
    h, w = image.shape[:2]
    t = style.thickness_for(h, w)
    (x0, y0, _, _), crop = load_region_crop(mark.region, h, w, root)
    shapes = []
    for contour in crop_contours(crop, x0, y0):
        fixed = np.round(contour * (1 << _SHIFT)).astype(np.int32).reshape(-1, 1, 2)
        cv2.polylines(image, [fixed], True, COLORS[mark.color], t, cv2.LINE_8, _SHIFT)
        xs, ys = contour[:, 0], contour[:, 1]
        polygon = tuple(zip(xs.tolist(), ys.tolist(), strict=True))  # (x, y) Python floats
        shapes.append(
            DrawnShape(
                image_index=0,
                kind="contour",
                label=mark.region.label,
                color=mark.color,
                # vertices sit on or half a pixel outside the mask: the tight box of the pixels
                bbox=(
                    float(np.ceil(xs.min())),
                    float(np.ceil(ys.min())),
                    float(np.floor(xs.max()) + 1),
                    float(np.floor(ys.max()) + 1),
                ),
                polygon=polygon,
                thickness_px=t,
            )
        )
    return shapes


class ContourRenderer:
    name = "contour"

    def draw(
        self, image: np.ndarray, marks: list[Mark], style: Style, root: Path | None = None
    ) -> RenderResult:
        shapes = [s for mark in marks for s in draw_contour_mark(image, mark, style, root)]
        return RenderResult(image, tuple(shapes))


RENDERERS.add("contour", ContourRenderer())
