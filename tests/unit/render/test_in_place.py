"""Drawing in place, on a view cut to the marks' reach, gives exactly :func:`render`'s pixels
and records, and the alignment check of that window gives the whole-image check's verdicts.

The render stage relies on both: it copies only the window before painting and compares only
the window, because a write through the view cannot land outside it.
"""

from __future__ import annotations

import numpy as np
import pytest

from medvqa_build.records import DrawnShape
from medvqa_build.render import COLORS, RENDERERS, RenderResult, render
from medvqa_build.render.alignment import check_alignment
from medvqa_build.render.base import render_in_place

from .test_channels import KINDS, _cases, _decoded_matches
from .test_fast_paths import _faults


def _in_place(kind, clean, marks, style, channels="rgb"):
    image = clean.copy()
    return image, render_in_place(kind, image, marks, style, channels=channels)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("channels", ["rgb", "bgr"])
def test_in_place_gives_the_pixels_and_records_of_render(kind, channels):
    seen = 0
    for clean, marks, style in _cases(sum(map(ord, kind)) + len(channels), 60):
        if kind not in ("multi", "multi_contour"):
            marks = marks[:1]
        try:
            want = render(kind, clean, marks, style, channels=channels)
        except ValueError as exc:
            with pytest.raises(ValueError, match=str(exc)[:20]):
                _in_place(kind, clean, marks, style, channels)
            continue
        image, done = _in_place(kind, clean, marks, style, channels)
        assert done.result.image is image
        assert np.array_equal(image, want.image)
        assert repr(done.result.shapes) == repr(want.shapes)
        _decoded_matches(done.result)
        # the window holds every changed pixel, and ``before`` is its clean pixels
        x0, y0 = done.origin
        wh, ww = done.before.shape[:2]
        assert np.array_equal(done.before, clean[y0 : y0 + wh, x0 : x0 + ww])
        ys, xs = np.nonzero((image != clean).any(axis=2))
        assert ((ys >= y0) & (ys < y0 + wh) & (xs >= x0) & (xs < x0 + ww)).all()
        if kind in ("coord", "image"):
            assert done.before.size == 0  # nothing painted: nothing copied
        seen += 1
    assert seen > 20


def _inside(window_origin, before, image, clean):
    """Whether ``image`` equals ``clean`` outside the window (the in-place contract)."""
    x0, y0 = window_origin
    wh, ww = before.shape[:2]
    outside = np.ones(image.shape[:2], bool)
    outside[y0 : y0 + wh, x0 : x0 + ww] = False
    return np.array_equal(image[outside], clean[outside])


@pytest.mark.parametrize("kind", ["box", "contour", "mask", "point", "coord", "multi"])
def test_the_window_check_gives_the_whole_image_verdicts(kind):
    rng = np.random.default_rng(11 + len(kind))
    seen = problems = 0
    for clean, marks, style in _cases(70 + len(kind), 50):
        marks = marks if kind == "multi" else marks[:1]
        image, done = _in_place(kind, clean, marks, style)
        for faulty, shapes in _faults(rng, image, done.result.shapes, clean):
            if not _inside(done.origin, done.before, faulty, clean):
                continue  # a change outside the window breaks the contract: not comparable
            want = check_alignment(clean, faulty, shapes, "i")
            known = [
                d if s is r else None
                for s, r, d in zip(
                    shapes,
                    done.result.shapes,
                    done.result.decoded or (None,) * len(shapes),
                    strict=True,
                )
            ]
            got = check_alignment(
                done.before, faulty, shapes, "i", decoded=known, origin=done.origin
            )
            assert got == want
            seen += 1
            problems += bool(want)
    assert seen > 60 and problems > (2 if kind == "coord" else 10)  # coord: nothing painted


def test_a_stray_pixel_in_the_window_is_reported_where_it_is():
    clean = np.zeros((40, 60, 3), np.uint8)
    shape = DrawnShape(0, "box", "a", "red", bbox=(10.0, 10.0, 30.0, 25.0), thickness_px=2)
    image = clean.copy()
    image[10:25, 10:12] = COLORS["red"]
    image[10:25, 28:30] = COLORS["red"]
    image[10:12, 10:30] = COLORS["red"]
    image[23:25, 10:30] = COLORS["red"]
    before = clean[5:35, 5:50].copy()
    assert check_alignment(before, image, [shape], "w", origin=(5, 5)) == []
    image[30, 45] = (1, 2, 3)  # inside the window, outside the box's band
    assert check_alignment(before, image, [shape], "w", origin=(5, 5)) == [
        "w: 1 changed pixels lie outside the recorded prompt geometry (in x 45..45, y 30..30); "
        "the overlay and the question's geometry disagree"
    ]
    # a window that does not fit the image is refused, not read past its edge
    problem = check_alignment(before, image, [shape], "w", origin=(20, 20))
    assert len(problem) == 1 and "does not fit the rendered image" in problem[0]


def test_a_renderer_without_a_plan_draws_on_the_whole_image(monkeypatch):
    class Planless:
        name = "planless"

        def draw(self, image, marks, style, root=None):
            image[0, 0] = COLORS["red"]
            image[-1, -1] = COLORS["red"]
            return RenderResult(image, ())

    monkeypatch.setitem(RENDERERS._entries, "planless", Planless())
    clean = np.full((12, 16, 3), 7, np.uint8)
    image = clean.copy()
    done = render_in_place("planless", image, [])
    assert done.origin == (0, 0) and np.array_equal(done.before, clean)
    assert (image[0, 0] == COLORS["red"]).all() and (image[-1, -1] == COLORS["red"]).all()
    problems = check_alignment(done.before, image, done.result.shapes, "p", origin=done.origin)
    assert problems and "2 changed pixels" in problems[0]


def test_a_stroke_that_paints_without_a_reach_gets_the_whole_image(monkeypatch):
    from medvqa_build.render.base import Stroke

    class Vague:
        name = "vague"

        def plan(self, marks, style, h, w, root=None, channels="rgb"):
            def paint(view, ox, oy):
                view[h - 1 - oy, w - 1 - ox] = COLORS["red"]

            return [Stroke((), (), None, paint)]

        def draw(self, image, marks, style, root=None):
            raise AssertionError("render_in_place uses the plan")

    monkeypatch.setitem(RENDERERS._entries, "vague", Vague())
    clean = np.zeros((9, 11, 3), np.uint8)
    image = clean.copy()
    done = render_in_place("vague", image, [])
    assert done.origin == (0, 0) and done.before.shape == clean.shape
    assert (image[8, 10] == COLORS["red"]).all()


@pytest.mark.parametrize("kind", ["box", "contour", "mask", "point", "multi", "multi_contour"])
def test_the_checks_crops_fall_inside_the_window(kind, monkeypatch):
    """The window carries the check's slack around each stroke, so the check maps the window
    alone (a crop past it costs a map of the union: at 1,056 px, multi fell 1.1 -> 0.83).
    Strokes drawn into their own buffers are checked on the buffers (``check_strokes``), not
    on crops: their window is their reach, no more."""
    from medvqa_build.render import alignment

    seen, buffered = [], 0
    real = alignment._window_changes

    def spy(clean, rendered, origin, rects):
        (ox, oy), (ch, cw) = origin, clean.shape[:2]
        seen.append(
            alignment._union([*rects, (ox, oy, ox + cw, oy + ch)]) == (ox, oy, ox + cw, oy + ch)
        )
        return real(clean, rendered, origin, rects)

    monkeypatch.setattr(alignment, "_window_changes", spy)
    for clean, marks, style in _cases(90 + len(kind), 40):
        marks = marks if kind.startswith("multi") else marks[:1]
        try:
            image, done = _in_place(kind, clean, marks, style)
        except ValueError:
            continue
        if done.strokes:
            x0s, y0s, x1s, y1s = zip(*(s.reach for s in done.strokes), strict=True)
            assert done.origin == (min(x0s), min(y0s))
            assert done.before.shape[:2] == (max(y1s) - min(y0s), max(x1s) - min(x0s))
            buffered += 1
            continue
        shapes, decoded = done.result.shapes, done.result.decoded or None
        # overlapping marks may legitimately fail coverage: only the mapping is tested
        check_alignment(done.before, image, shapes, "i", decoded=decoded, origin=done.origin)
    assert len(seen) + buffered > 20 and all(seen)
    assert buffered if kind == "contour" else not buffered or kind == "multi_contour"
