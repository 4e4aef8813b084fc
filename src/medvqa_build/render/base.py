"""The renderer interface: clean RGB image + marks in clean-image pixels -> new image + shapes."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import numpy as np

from ..records import DrawnShape, PointXY, Region
from ..registry import Registry

# Named colours in RGB. The colour can be the answer (region selection), so tasks choose it.
COLORS: dict[str, tuple[int, int, int]] = {
    "red": (255, 0, 0),
    "blue": (0, 0, 255),
    "yellow": (255, 255, 0),
    "green": (0, 255, 0),
}


@dataclass(frozen=True)
class Mark:
    """One region to draw and the named colour to draw it in.

    ``shape`` picks the primitive inside a ``multi`` prompt (``box`` or ``contour``; ``None`` =
    the renderer's default); ``point`` overrides where a ``point`` marker goes (pixel centres).
    """

    region: Region
    color: str = "red"
    shape: str | None = None
    point: PointXY | None = None


@dataclass(frozen=True)
class Style:
    """Drawing style; ``None`` sizes scale with the image's short side so prompts look alike."""

    thickness_px: int | None = None
    alpha: float = 0.35
    point_radius_px: int | None = None

    def thickness_for(self, height: int, width: int) -> int:
        if self.thickness_px is not None:
            return max(1, int(self.thickness_px))
        return max(2, round(min(height, width) / 160))

    def radius_for(self, height: int, width: int) -> int:
        if self.point_radius_px is not None:
            return max(1, int(self.point_radius_px))
        return max(3, round(min(height, width) / 60))


@dataclass(frozen=True)
class RenderResult:
    image: np.ndarray
    shapes: tuple[DrawnShape, ...]


class Renderer(Protocol):
    name: str

    def draw(
        self, image: np.ndarray, marks: list[Mark], style: Style, root: Path | None = None
    ) -> RenderResult: ...


RENDERERS: Registry[Renderer] = Registry("renderer")


def render(
    kind: str,
    image: np.ndarray,
    marks: list[Mark],
    style: Style | None = None,
    *,
    root: str | Path | None = None,
    image_index: int = 0,
) -> RenderResult:
    """Draw ``marks`` on a copy of ``image`` (RGB uint8, H x W x 3) with the ``kind`` renderer.

    ``kind`` is a prompt level (``image``, ``box``, ``contour``, ``mask``, ``point``, ``multi``,
    ``coord``); ``root`` resolves relative mask paths; ``image_index`` is recorded in each shape.
    Bad geometry (empty mask, mask of another size, box outside the image) raises ValueError.
    """
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"expected an RGB uint8 image, got shape {image.shape} {image.dtype}")
    style = style or Style()
    if not 0.0 <= style.alpha <= 1.0:
        raise ValueError(f"style alpha must lie in [0, 1], got {style.alpha}")
    for mark in marks:
        if mark.color not in COLORS:
            raise ValueError(f"unknown colour {mark.color!r}; use one of {sorted(COLORS)}")
    renderer = RENDERERS.get(kind)
    result = renderer.draw(image.copy(), list(marks), style, Path(root) if root else None)
    if image_index:
        shapes = tuple(replace(s, image_index=image_index) for s in result.shapes)
        result = RenderResult(result.image, shapes)
    return result
