"""The renderer interface: clean RGB image + marks in clean-image pixels -> new image + shapes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import cv2
import numpy as np

from ..geometry import format_box
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
    alignment check compares the window alone.

    A stroke drawn into its own buffer (:func:`buffer_stroke`) also carries ``pixels``, a
    uint8 map the size of the reach (1 where it paints), ``color_px``, the channel values it
    paints there, and ``outlined``, the mask it outlines cut to its box ``((x0, y0, x1, y1),
    bool crop)``: the render stage checks the buffer against that geometry instead of
    comparing the image's pixels (:func:`render.alignment.check_strokes`)."""

    shapes: tuple[DrawnShape, ...]
    decoded: tuple = ()
    reach: Rect | None = None
    paint: Callable[[np.ndarray, int, int], None] | None = None
    pixels: np.ndarray | None = field(default=None, compare=False, repr=False)
    color_px: tuple[int, int, int] | None = None
    outlined: tuple[Rect, np.ndarray] | None = field(default=None, compare=False, repr=False)


def buffer_stroke(
    shapes: tuple[DrawnShape, ...],
    decoded: tuple,
    reach: Rect,
    pixels: np.ndarray,
    color_px: tuple[int, int, int],
    outlined: tuple[Rect, np.ndarray] | None = None,
) -> Stroke:
    """A stroke drawn into ``pixels`` (uint8, the size of ``reach``, non-zero where it paints)
    whose ``paint`` composites that buffer: every pixel under it takes ``color_px``, no other
    pixel changes. A solid stroke so composited gives the pixels that drawing it on the image
    gives (the same rasterisation; only where it lands is coloured)."""
    x0, y0, _, _ = reach
    color_px = tuple(int(v) for v in color_px)

    def paint(view: np.ndarray, ox: int, oy: int) -> None:
        composite(view, pixels, color_px, x0 - ox, y0 - oy)

    return Stroke(shapes, decoded, reach, paint, pixels, color_px, outlined)


# Solid tiles of a colour, the source of a composite's masked copy; a larger buffer is
# composited a tile at a time (at most a few tiles of 192 KiB are kept)
_TILE = 256
_SOLID: dict[tuple[int, int, int], np.ndarray] = {}


def _solid(color_px: tuple[int, int, int]) -> np.ndarray:
    tile = _SOLID.get(color_px)
    if tile is None:
        tile = np.empty((_TILE, _TILE, 3), np.uint8)
        tile[...] = color_px
        tile.flags.writeable = False
        _SOLID[color_px] = tile
    return tile


def composite(
    view: np.ndarray, pixels: np.ndarray, color_px: tuple[int, int, int], x: int, y: int
) -> None:
    """Give the pixels of ``view`` (H x W x 3 uint8) under the non-zero pixels of ``pixels``
    (uint8, its top-left pixel at ``(x, y)`` of ``view``, inside it) the colour ``color_px``
    (a tuple): one masked copy from a solid tile of the colour (``cv2.copyTo``, in place)."""
    h, w = pixels.shape
    if x < 0 or y < 0 or view.shape[0] < y + h or view.shape[1] < x + w:
        raise ValueError(f"a {h}x{w} stroke buffer at ({x}, {y}) leaves the {view.shape} view")
    tile = _solid(color_px)
    if h <= _TILE and w <= _TILE:
        cv2.copyTo(tile[:h, :w], pixels, view[y : y + h, x : x + w])
        return
    for r in range(0, h, _TILE):
        for c in range(0, w, _TILE):
            mask = pixels[r : r + _TILE, c : c + _TILE]
            mh, mw = mask.shape
            cv2.copyTo(tile[:mh, :mw], mask, view[y + r : y + r + mh, x + c : x + c + mw])


class Renderer(Protocol):
    """``draw`` paints on ``image`` in place. A renderer whose ``channels_aware`` is true also
    takes ``channels="bgr"`` (the built-in ones); :func:`render` converts for the others.

    A renderer may also offer ``plan(marks, style, height, width, root, channels)`` returning
    one :class:`Stroke` per drawn primitive, in painting order (the built-in ones do); then
    ``draw`` is the plan painted on the whole image, and :func:`render_in_place` can draw
    inside the marks' reach only."""

    name: str
    # a prompt level recipes may name (``tasks[].prompt_level``), and the kind of shape
    # (box, contour, mask, point, text; None: nothing) one prompt mark records, which is what
    # a task plans for the render stage to draw
    prompt_level: bool
    shape_kind: str | None

    def draw(
        self, image: np.ndarray, marks: list[Mark], style: Style, root: Path | None = None
    ) -> RenderResult: ...


class PlannedRenderer:
    """Base of the built-in renderers: ``plan`` gives the strokes (by default one per mark,
    from ``plan_mark``), ``draw`` paints them on the whole image. Channel-order aware."""

    name: str
    prompt_level = True
    shape_kind: str | None = None
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


def prompt_levels() -> tuple[str, ...]:
    """The prompt levels a recipe may name: the renderers that are one, in the order they
    were registered (``render/__init__`` imports the built-in ones in the documented order)."""
    return tuple(
        name
        for name in RENDERERS.registered()
        if getattr(RENDERERS.get(name), "prompt_level", False) and RENDERERS.get(name).name == name
    )


def _checked(
    kind: str, image: np.ndarray, marks: Sequence[Mark], style: Style | None, channels: str
) -> tuple[Renderer, Style]:
    """The renderer for ``kind`` and the style, after the checks every render makes."""
    _check_image(image)
    return _checked_marks(kind, marks, style, channels)


def _check_image(image: np.ndarray) -> None:
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"expected an RGB uint8 image, got shape {image.shape} {image.dtype}")


def _checked_marks(
    kind: str, marks: Sequence[Mark], style: Style | None, channels: str
) -> tuple[Renderer, Style]:
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
    array when nothing was painted) and the window's top-left pixel ``(x, y)``. ``strokes``
    holds the plan when every stroke was drawn into its own buffer (:func:`buffer_stroke`);
    then the window is the union of their reaches and the check can take the buffers
    (:func:`render.alignment.check_strokes`); else it is empty."""

    result: RenderResult
    before: np.ndarray
    origin: tuple[int, int]
    strokes: tuple[Stroke, ...] = ()


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
    return paint_in_place(image, plan(list(marks), style, h, w, root, channels))


def plan_marks(
    kind: str,
    marks: list[Mark],
    style: Style | None,
    h: int,
    w: int,
    *,
    root: str | Path | None = None,
    channels: str = "rgb",
) -> list[Stroke] | None:
    """The strokes :func:`render_in_place` paints on an ``h`` x ``w`` image, planned before
    there is one (they depend on its size alone); None for a renderer without ``plan`` (or
    one that draws RGB only, asked for ``channels="bgr"``). Raises what :func:`render` raises
    for these marks; :func:`paint_in_place` paints the plan."""
    renderer, style = _checked_marks(kind, marks, style, channels)
    if root is not None and not isinstance(root, Path):
        root = Path(root) if root else None
    plan = getattr(renderer, "plan", None)
    if plan is None or (channels != "rgb" and not getattr(renderer, "channels_aware", False)):
        return None
    return plan(list(marks), style, h, w, root, channels)


def paint_in_place(image: np.ndarray, strokes: Sequence[Stroke]) -> InPlace:
    """Paint planned strokes on ``image`` (writable, the size they were planned for) through
    a view cut to their reach: the second half of :func:`render_in_place`."""
    _check_image(image)
    h, w = image.shape[:2]
    # a stroke that paints without saying where may paint anywhere: the whole image
    reaches = [s.reach or (0, 0, w, h) for s in strokes if s.paint is not None]
    if not reaches:
        return InPlace(_result(image, strokes), image[:0, :0], (0, 0))
    x0s, y0s, x1s, y1s = zip(*reaches, strict=True)
    # buffered strokes are checked on their buffers, not on crops around the shapes: no margin
    buffered = all(s.pixels is not None for s in strokes)
    m = 0 if buffered else _CHECK_MARGIN
    x0, y0 = max(0, min(x0s) - m), max(0, min(y0s) - m)
    x1, y1 = min(w, max(x1s) + m), min(h, max(y1s) + m)
    view = image[y0:y1, x0:x1]
    before = view.copy()
    for stroke in strokes:
        if stroke.paint is not None:
            stroke.paint(view, x0, y0)
    return InPlace(_result(image, strokes), before, (x0, y0), tuple(strokes) if buffered else ())


def _at_index(result: RenderResult, image_index: int) -> RenderResult:
    if image_index:
        shapes = tuple(replace(s, image_index=image_index) for s in result.shapes)
        result = RenderResult(result.image, shapes, result.decoded)
    return result


def coord_text(box_xyxy: Sequence[float], convention: str, width: int, height: int) -> str:
    """The box (x2/y2 exclusive pixels) as prompt text: abs, norm1000, norm1 or qwen (the
    ``coord`` level's question; here, not in ``coord.py``, so that the stages writing it do
    not carry the ``coord`` renderer's code in their own fingerprint)."""
    return format_box(box_xyxy, convention, width, height)
