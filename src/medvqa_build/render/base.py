"""The renderer interface: clean RGB image + marks in clean-image pixels -> new image + shapes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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


Rect = tuple[int, int, int, int]  # x0, y0, x1, y1 (x1/y1 exclusive) in image pixels


@dataclass(frozen=True)
class Stroke:
    """One mark, planned before anything is painted: the shapes it records, what was decoded
    for them (see :attr:`RenderResult.decoded`), the pixels it may touch (``reach``, inside
    the image; None: the whole image) and ``paint(view, ox, oy)`` (None: it paints nothing),
    which draws it on ``view``, the image's pixels from ``(ox, oy)`` on, a window that holds
    the reach.

    Knowing the reach first lets the render stage draw on a view of the decoded image cut to
    it: no copy of the whole image is made, and no pixel outside the window can change, so the
    alignment check compares the window alone."""

    shapes: tuple[DrawnShape, ...]
    decoded: tuple = ()
    reach: Rect | None = None
    paint: Callable[[np.ndarray, int, int], None] | None = None


class Renderer(Protocol):
    """``draw`` paints on ``image`` in place. A renderer whose ``channels_aware`` is true also
    takes ``channels="bgr"`` (the built-in ones); :func:`render` converts for the others.

    A renderer may also offer ``plan(marks, style, height, width, root, channels)`` returning
    one :class:`Stroke` per drawn primitive, in painting order (the built-in ones do); then
    ``draw`` is the plan painted on the whole image, and :func:`render_in_place` can draw
    inside the marks' reach only."""

    name: str

    def draw(
        self, image: np.ndarray, marks: list[Mark], style: Style, root: Path | None = None
    ) -> RenderResult: ...


class PlannedRenderer:
    """Base of the built-in renderers: ``plan`` gives the strokes (by default one per mark,
    from ``plan_mark``), ``draw`` paints them on the whole image. Channel-order aware."""

    name: str
    channels_aware = True
    plan_mark: Callable[..., Stroke]

    def plan(
        self,
        marks: list[Mark],
        style: Style,
        h: int,
        w: int,
        root: Path | None = None,
        channels: str = "rgb",
    ) -> list[Stroke]:
        return [self.plan_mark(mark, style, h, w, root, channels) for mark in marks]

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


def paint_plan(image: np.ndarray, strokes: Sequence[Stroke]) -> RenderResult:
    """Paint planned strokes on the whole ``image`` in place (a plan's ``draw``)."""
    for stroke in strokes:
        if stroke.paint is not None:
            stroke.paint(image, 0, 0)
    return _result(image, strokes)


def _result(image: np.ndarray, strokes: Sequence[Stroke]) -> RenderResult:
    if len(strokes) == 1:
        return RenderResult(image, strokes[0].shapes, strokes[0].decoded)
    shapes = tuple(shape for stroke in strokes for shape in stroke.shapes)
    decoded = tuple(d for stroke in strokes for d in stroke.decoded or (None,) * len(stroke.shapes))
    return RenderResult(image, shapes, decoded if any(d is not None for d in decoded) else ())


RENDERERS: Registry[Renderer] = Registry("renderer")


def _checked(
    kind: str, image: np.ndarray, marks: Sequence[Mark], style: Style | None, channels: str
) -> tuple[Renderer, Style]:
    """The renderer for ``kind`` and the style, after the checks every render makes."""
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"expected an RGB uint8 image, got shape {image.shape} {image.dtype}")
    style = style or Style()
    if not 0.0 <= style.alpha <= 1.0:
        raise ValueError(f"style alpha must lie in [0, 1], got {style.alpha}")
    for mark in marks:
        if mark.color not in COLORS:
            raise ValueError(f"unknown colour {mark.color!r}; use one of {sorted(COLORS)}")
    channel_colors(channels)  # a known order
    return RENDERERS.get(kind), style


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
    renderer, style = _checked(kind, image, marks, style, channels)
    root = Path(root) if root else None
    if channels == "rgb":
        result = renderer.draw(image.copy(), list(marks), style, root)
    elif getattr(renderer, "channels_aware", False):
        result = renderer.draw(image.copy(), list(marks), style, root, channels=channels)
    else:  # a renderer that draws RGB only: swap the channels around it
        result = renderer.draw(np.ascontiguousarray(image[..., ::-1]), list(marks), style, root)
        result = RenderResult(np.ascontiguousarray(result.image[..., ::-1]), result.shapes)
    return _at_index(result, image_index)


# The window is grown by the alignment check's slack around a stroke (one pixel, and one
# more for a contour of thickness 1), so the crops the check clears fall inside it and it
# maps the window alone; a smaller window is still checked correctly, at the cost of a map
# of the crops' union.
_CHECK_MARGIN = 2


@dataclass(frozen=True)
class InPlace:
    """What :func:`render_in_place` did: the result (its image is the image drawn on), the
    clean pixels of the window that may have changed (a copy taken before painting; an empty
    array when nothing was painted) and the window's top-left pixel ``(x, y)``."""

    result: RenderResult
    before: np.ndarray
    origin: tuple[int, int]


def render_in_place(
    kind: str,
    image: np.ndarray,
    marks: list[Mark],
    style: Style | None = None,
    *,
    root: str | Path | None = None,
    channels: str = "rgb",
) -> InPlace:
    """:func:`render` on ``image`` itself (writable), painting on a view cut to the marks'
    reach: only that window is copied first, and no pixel outside it can change (a view
    bounds every write). A renderer without ``plan`` draws on the whole image (the window).
    The same pixels, shapes and errors as :func:`render`."""
    renderer, style = _checked(kind, image, marks, style, channels)
    if root is not None and not isinstance(root, Path):
        root = Path(root) if root else None
    plan = getattr(renderer, "plan", None)
    if plan is None or (channels != "rgb" and not getattr(renderer, "channels_aware", False)):
        before = image.copy()
        result = render(kind, before, marks, style, root=root, channels=channels)
        image[...] = result.image
        return InPlace(RenderResult(image, result.shapes, result.decoded), before, (0, 0))
    h, w = image.shape[:2]
    strokes = plan(list(marks), style, h, w, root, channels)
    # a stroke that paints without saying where may paint anywhere: the whole image
    reaches = [s.reach or (0, 0, w, h) for s in strokes if s.paint is not None]
    if not reaches:
        return InPlace(_result(image, strokes), image[:0, :0], (0, 0))
    x0s, y0s, x1s, y1s = zip(*reaches, strict=True)
    m = _CHECK_MARGIN
    x0, y0 = max(0, min(x0s) - m), max(0, min(y0s) - m)
    x1, y1 = min(w, max(x1s) + m), min(h, max(y1s) + m)
    view = image[y0:y1, x0:x1]
    before = view.copy()
    for stroke in strokes:
        if stroke.paint is not None:
            stroke.paint(view, x0, y0)
    return InPlace(_result(image, strokes), before, (x0, y0))


def _at_index(result: RenderResult, image_index: int) -> RenderResult:
    if image_index:
        shapes = tuple(replace(s, image_index=image_index) for s in result.shapes)
        result = RenderResult(result.image, shapes, result.decoded)
    return result
