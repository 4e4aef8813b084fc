"""The renderer interface: clean RGB image + marks in clean-image pixels -> new image + shapes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..records import DrawnShape, Region
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
    """One region to draw and the named colour to draw it in."""

    region: Region
    color: str = "red"


@dataclass(frozen=True)
class Style:
    """Drawing style; ``thickness_px=None`` scales the stroke with the image's short side."""

    thickness_px: int | None = None
    alpha: float = 0.35

    def thickness_for(self, height: int, width: int) -> int:
        if self.thickness_px is not None:
            return max(1, int(self.thickness_px))
        return max(2, round(min(height, width) / 160))


@dataclass(frozen=True)
class RenderResult:
    image: np.ndarray
    shapes: tuple[DrawnShape, ...]


class Renderer(Protocol):
    name: str

    def draw(self, image: np.ndarray, marks: list[Mark], style: Style) -> RenderResult: ...


RENDERERS: Registry[Renderer] = Registry("renderer")


def render(kind: str, image: np.ndarray, marks: list[Mark], style: Style | None = None) -> RenderResult:
    """Draw ``marks`` on a copy of ``image`` (RGB uint8, H x W x 3) with the ``kind`` renderer."""
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"expected an RGB uint8 image, got shape {image.shape} {image.dtype}")
    for mark in marks:
        if mark.color not in COLORS:
            raise ValueError(f"unknown colour {mark.color!r}; use one of {sorted(COLORS)}")
    return RENDERERS.get(kind).draw(image.copy(), marks, style or Style())
