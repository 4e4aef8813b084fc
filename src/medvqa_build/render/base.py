"""The renderer interface: clean RGB image + marks in clean-image pixels -> new image + shapes."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
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

# Channel orders an image may be in: ``rgb`` (the API's), or ``bgr`` (what cv2 decodes and
# encodes: the render stage draws and checks a decoded file in BGR, so no whole-image colour
# conversion runs). Drawing the channel-swapped colour in BGR gives the same pixels, swapped.
CHANNELS = ("rgb", "bgr")


def channel_colors(channels: str = "rgb") -> dict[str, tuple[int, int, int]]:
    """The named colours as channel values in ``channels`` order."""
    if channels == "rgb":
        return COLORS
    if channels == "bgr":
        return _COLORS_BGR
    raise ValueError(f"unknown channel order {channels!r}; use one of {list(CHANNELS)}")


_COLORS_BGR = {name: (b, g, r) for name, (r, g, b) in COLORS.items()}


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
    """The drawn image and the shapes drawn on it. ``decoded`` (one entry per shape, or empty)
    is what a renderer computed from each shape's recorded geometry (a contour's polygon as an
    array, a mask's decoded crop), so the alignment check need not parse it again."""

    image: np.ndarray
    shapes: tuple[DrawnShape, ...]
    decoded: tuple = field(default=(), compare=False, repr=False)


class Renderer(Protocol):
    """``draw`` paints on ``image`` in place. A renderer whose ``channels_aware`` is true also
    takes ``channels="bgr"`` (the built-in ones); :func:`render` converts for the others."""

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
    channels: str = "rgb",
) -> RenderResult:
    """Draw ``marks`` on a copy of ``image`` (RGB uint8, H x W x 3) with the ``kind`` renderer.

    ``kind`` is a prompt level (``image``, ``box``, ``contour``, ``mask``, ``point``, ``multi``,
    ``coord``); ``root`` resolves relative mask paths; ``image_index`` is recorded in each shape.
    ``channels="bgr"`` takes and returns a BGR image (the same pixels, channels swapped).
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
    channel_colors(channels)  # a known order
    renderer = RENDERERS.get(kind)
    root = Path(root) if root else None
    if channels == "rgb":
        result = renderer.draw(image.copy(), list(marks), style, root)
    elif getattr(renderer, "channels_aware", False):
        result = renderer.draw(image.copy(), list(marks), style, root, channels=channels)
    else:  # a renderer that draws RGB only: swap the channels around it
        result = renderer.draw(np.ascontiguousarray(image[..., ::-1]), list(marks), style, root)
        result = RenderResult(np.ascontiguousarray(result.image[..., ::-1]), result.shapes)
    if image_index:
        shapes = tuple(replace(s, image_index=image_index) for s in result.shapes)
        result = RenderResult(result.image, shapes, result.decoded)
    return result
