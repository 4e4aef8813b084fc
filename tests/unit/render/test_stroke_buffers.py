"""Contours drawn into their own stroke buffers (render.base.buffer_stroke): compositing a
buffer gives the pixels drawing on the image gives, and the stroke checks
(validate.alignment.check_strokes) pass every drawing and catch a stroke, a record or a
composite that is off.

The checks rest on one fact about the traced outlines: their centre line is the mask's edge,
its pixels with a background 4-neighbour (the first test)."""

from __future__ import annotations

from dataclasses import replace

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medvqa_build.records import Region
from medvqa_build.render import COLORS, Mark, Style, render
from medvqa_build.render.alignment import (
    check_alignment,
    check_composite,
    check_stroke_buffers,
    check_strokes,
)
from medvqa_build.render.base import (
    buffer_stroke,
    channel_colors,
    composite,
    paint_in_place,
    plan_marks,
    render_in_place,
)
from medvqa_build.render.contour import _pixel_outlines, plan_contour_mark

from .test_channels import _cases
from .test_fast_paths import _faults, _random_masks, _rle_region

_ALL = 2**31 - 1
_CROSS = cv2.getStructuringElement(cv2.MORPH_CROSS, (3, 3))


def _edge(mask: np.ndarray) -> np.ndarray:
    m = mask.astype(np.uint8)
    return m - cv2.erode(m, _CROSS, borderType=cv2.BORDER_CONSTANT, borderValue=0)


def _traced(mask: np.ndarray):
    ys, xs = np.nonzero(mask)
    x0, y0 = int(xs.min()), int(ys.min())
    return _pixel_outlines(mask[y0 : ys.max() + 1, x0 : xs.max() + 1], x0, y0)


def test_the_traced_centre_line_is_the_masks_edge():
    """Drawn one pixel wide, the outlines ``cv2.findContours`` traces (outer borders and
    holes) cover exactly the mask's pixels with a background 4-neighbour: the check finds
    the centre line from the mask, and it is the one the polygon gives."""
    seen = 0
    for mask in _random_masks(21, 400, max_side=70):
        if not mask.any() or (outlines := _traced(mask)) is None:
            continue  # crack outlines (one pixel thin parts) are checked on the image
        line = np.zeros(mask.shape, np.uint8)
        cv2.drawContours(line, outlines, -1, 1, 1, cv2.LINE_8, None, _ALL)
        assert np.array_equal(line, _edge(mask))
        seen += 1
    assert seen > 100


@pytest.mark.parametrize("channels", ["rgb", "bgr"])
def test_a_composited_buffer_is_the_drawing_on_the_image(channels):
    rng = np.random.default_rng(5 + len(channels))
    seen = 0
    for mask in _random_masks(22, 200, max_side=60):
        if not mask.any() or (outlines := _traced(mask)) is None:
            continue
        h, w = mask.shape
        clean = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        color = str(rng.choice(list(COLORS)))
        t = int(rng.integers(1, 9))
        stroke = plan_contour_mark(
            Mark(_rle_region(mask), color), Style(thickness_px=t), h, w, None, channels
        )
        assert stroke.pixels is not None and stroke.pixels.shape == (
            stroke.reach[3] - stroke.reach[1],
            stroke.reach[2] - stroke.reach[0],
        )
        want = clean.copy()
        colour = channel_colors(channels)[color]
        cv2.drawContours(want, outlines, -1, colour, t, cv2.LINE_8, None, _ALL)
        got = clean.copy()
        stroke.paint(got, 0, 0)
        assert np.array_equal(got, want)
        seen += 1
    assert seen > 50


def test_composite_copies_the_colour_under_the_buffer_only():
    rng = np.random.default_rng(3)
    for h, w in [(5, 7), (256, 256), (300, 520), (1, 600)]:  # within and across tiles
        view = rng.integers(0, 256, (h + 4, w + 6, 3), dtype=np.uint8)
        pixels = (rng.random((h, w)) < 0.3).astype(np.uint8)
        want = view.copy()
        want[3 : 3 + h, 2 : 2 + w][pixels != 0] = (1, 2, 3)
        composite(view, pixels, (1, 2, 3), 2, 3)
        assert np.array_equal(view, want)
    with pytest.raises(ValueError, match="leaves"):
        composite(np.zeros((4, 4, 3), np.uint8), np.ones((3, 3), np.uint8), (1, 2, 3), 2, 2)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 40),
    st.integers(0, 30),
    st.integers(1, 20),
    st.integers(1, 20),
    st.sampled_from([1, 2, 3, 8]),
    st.sampled_from(["rgb", "bgr"]),
)
def test_the_stroke_checks_pass_every_drawing(x, y, bw, bh, thickness, channels):
    mask = np.zeros((50, 60), bool)
    mask[y : y + bh, x : x + bw] = True
    yy, xx = np.ogrid[:50, :60]
    mask |= (xx - x) ** 2 + (yy - y) ** 2 < bw * bh
    image = np.full((50, 60, 3), 100, np.uint8)
    done = render_in_place(
        "contour",
        image,
        [Mark(_rle_region(mask), "blue")],
        Style(thickness_px=thickness),
        channels=channels,
    )
    if not done.strokes:  # a crack outline (a mask one pixel thin): checked on the image
        shapes = done.result.shapes
        assert (
            check_alignment(done.before, image, shapes, "p", channels=channels, origin=done.origin)
            == []
        )
        return
    assert (
        check_strokes(done.before, image, done.strokes, "p", origin=done.origin, channels=channels)
        == []
    )


@pytest.mark.parametrize("kind", ["contour", "multi_contour"])
def test_the_stroke_checks_pass_random_masks_and_overlaps(kind):
    seen = 0
    for clean, marks, style in _cases(31 + len(kind), 80):
        marks = [replace(m, shape=None) for m in marks] if kind == "multi_contour" else marks[:1]
        image = clean.copy()
        try:
            done = render_in_place(kind, image, marks, style)
        except ValueError:
            continue
        if not done.strokes:
            continue  # a crack outline: painted on the image, checked there
        assert check_strokes(done.before, image, done.strokes, "i", origin=done.origin) == []
        seen += 1
    assert seen > 20


def _contour(clean, mask, t=2, color="green"):
    image = clean.copy()
    done = render_in_place(
        "contour", image, [Mark(_rle_region(mask), color)], Style(thickness_px=t)
    )
    return image, done


def test_a_shifted_stroke_is_caught(clean, disc):
    """A stroke six pixels off its mask: its pixels leave the edge's band and the edge is
    left bare; drawn so, the composite is checked against the buffer and passes, so the
    buffer check is what catches it."""
    image, done = _contour(clean, disc)
    (stroke,) = done.strokes
    shifted = replace(stroke, pixels=np.roll(stroke.pixels, 6, axis=1))
    problems = check_stroke_buffers([shifted], "c")
    assert any("outside the recorded prompt geometry" in p for p in problems)
    assert any("covers only" in p for p in problems)
    assert all(p.startswith("c: ") for p in problems)
    assert check_stroke_buffers(done.strokes, "c") == []


def test_a_stroke_drawn_off_its_buffer_is_caught(clean, disc):
    """The buffer is right but the image shows it elsewhere (a wrong offset, a pixel more,
    a pixel less): the composite check catches each."""
    image, done = _contour(clean, disc)
    (stroke,) = done.strokes
    x0, y0 = done.origin
    ys, xs = np.nonzero(stroke.pixels)
    on = stroke.reach[1] + ys[0], stroke.reach[0] + xs[0]
    for fault in range(5):
        bad = clean.copy()
        if fault == 0:  # composited three pixels to the right
            composite(bad, stroke.pixels, stroke.color_px, stroke.reach[0] + 3, stroke.reach[1])
        else:
            bad[...] = image
            if fault == 1:
                bad[y0 + 1, x0 + 1] = (1, 2, 3)  # off the stroke
            elif fault == 2:
                bad[on] = (1, 2, 3)  # on it
            else:  # on it, one channel off (green is 0, 255, 0)
                bad[on] = (0, 254, 0) if fault == 3 else (1, 255, 0)
        problems = check_composite(done.before, bad, done.strokes, "c", origin=done.origin)
        assert problems and all(p.startswith("c: ") for p in problems)
    assert check_composite(done.before, image, done.strokes, "c", origin=done.origin) == []


def test_a_record_that_does_not_match_the_stroke_is_caught(clean, disc):
    image, done = _contour(clean, disc)
    (stroke,) = done.strokes
    moved = replace(stroke.shapes[0], bbox=(50.0, 25.0, 81.0, 56.0))
    assert any("span" in p for p in check_stroke_buffers([replace(stroke, shapes=(moved,))], "c"))
    recoloured = replace(stroke.shapes[0], color="red")
    problems = check_stroke_buffers([replace(stroke, shapes=(recoloured,))], "c")
    assert any("paints" in p for p in problems)
    image, done = _contour(clean, disc, color="red")  # red's channels swap in BGR
    assert any("paints" in p for p in check_stroke_buffers(done.strokes, "c", channels="bgr"))


def test_the_stroke_checks_catch_what_the_image_check_catches():
    """On the drawing and on image faults inside the window (pixels changed, the image
    rolled, nothing drawn), whenever check_alignment flags the image, check_strokes does."""
    rng = np.random.default_rng(8)
    seen = flagged = 0
    for clean, marks, style in _cases(41, 80):
        image = clean.copy()
        try:
            done = render_in_place("contour", image, marks[:1], style)
        except ValueError:
            continue
        if not done.strokes:
            continue
        (x0, y0), (wh, ww) = done.origin, done.before.shape[:2]
        for faulty, shapes in _faults(rng, image, done.result.shapes, clean):
            if shapes != list(done.result.shapes):
                continue  # a record fault: the strokes carry their own records
            outside = faulty.copy()
            outside[y0 : y0 + wh, x0 : x0 + ww] = clean[y0 : y0 + wh, x0 : x0 + ww]
            if not np.array_equal(outside, clean):
                continue  # a change outside the window breaks the in-place contract
            want = check_alignment(clean, faulty, shapes, "i")
            got = check_strokes(done.before, faulty, done.strokes, "i", origin=done.origin)
            assert bool(got) >= bool(want)
            flagged += bool(got)
        seen += 1
    assert seen > 20 and flagged > 10


def test_plan_then_paint_is_render_in_place(clean, disc):
    mark = [Mark(_rle_region(disc), "yellow"), Mark(Region("b", bbox=(5, 5, 30, 20)), "red")]
    for kind, marks in [("contour", mark[:1]), ("box", mark[1:]), ("multi", mark)]:
        want = clean.copy()
        done = render_in_place(kind, want, marks, Style(thickness_px=3), channels="bgr")
        strokes = plan_marks(kind, marks, Style(thickness_px=3), 96, 128, channels="bgr")
        got = clean.copy()
        again = paint_in_place(got, strokes)
        assert np.array_equal(got, want) and again.origin == done.origin
        assert np.array_equal(again.before, done.before)
        assert again.result.shapes == done.result.shapes
        assert bool(again.strokes) == bool(done.strokes) == (kind == "contour")


def test_a_buffer_stroke_through_render_is_the_same_image(clean, disc):
    """render() paints the plan on a copy of the whole image: the buffer lands at its reach."""
    out = render("contour", clean, [Mark(_rle_region(disc), "green")], Style(thickness_px=2))
    image, done = _contour(clean, disc)
    assert np.array_equal(out.image, image)
    stroke = done.strokes[0]
    again = buffer_stroke(stroke.shapes, stroke.decoded, stroke.reach, stroke.pixels, [0, 255, 0])
    copy = clean.copy()
    again.paint(copy, 0, 0)
    assert np.array_equal(copy, image) and again.color_px == (0, 255, 0)
