"""The alignment check (validate/alignment.py) against every renderer and deliberate faults."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medvqa_build.geometry import rle_encode
from medvqa_build.records import MaskRef, Region
from medvqa_build.render import COLORS, Mark, Style, render
from medvqa_build.render.alignment import check_alignment


def _rle(mask):
    size_hw, counts = rle_encode(mask)
    return Region("x", mask=MaskRef(size_hw=size_hw, counts=counts))


@pytest.mark.parametrize("kind", ["box", "contour", "mask", "point", "coord", "image"])
@pytest.mark.parametrize("thickness", [1, 2, 5])
def test_every_renderer_passes(clean, disc, kind, thickness, to_region):
    out = render(kind, clean, [Mark(to_region(disc), "yellow")], Style(thickness_px=thickness))
    assert check_alignment(clean, out.image, out.shapes, "item-1") == []


@pytest.mark.parametrize("shape", ["box", "contour"])
def test_multi_passes_with_overlaps(clean, disc, shape, to_region):
    marks = [
        Mark(to_region(disc), "red", shape),
        Mark(Region("b", bbox=(50, 30, 90, 70)), "blue"),
        Mark(Region("c", bbox=(0, 0, 128, 96)), "green"),
    ]
    out = render("multi", clean, marks)
    assert check_alignment(clean, out.image, out.shapes, "item-1") == []


def test_small_boxes_drawn_over_each_other_pass(clean):
    # option boxes of a tiny frame, overlapping as a coverage build allows (IoU < 0.6): the
    # boxes drawn later cover more than half of the first one's ring
    marks = [
        Mark(Region("a", bbox=(4, 4, 12, 12)), "blue"),
        Mark(Region("b", bbox=(4, 7, 11, 15)), "red"),
        Mark(Region("c", bbox=(3, 2, 12, 9)), "green"),
    ]
    out = render("multi", clean, marks, Style(thickness_px=2))
    assert check_alignment(clean, out.image, out.shapes, "item-1") == []
    # a box drawn last covers nothing of its own: left out, it is still caught
    undrawn = render("multi", clean, marks[:2], Style(thickness_px=2))
    problems = check_alignment(clean, undrawn.image, out.shapes, "item-1")
    assert any("box shape 2" in p and "outline shows green" in p for p in problems)


def test_catches_a_shifted_box(clean):
    out = render("box", clean, [Mark(Region("x", bbox=(20, 20, 60, 60)))], Style(thickness_px=2))
    shifted = replace(out.shapes[0], bbox=(25.0, 20.0, 65.0, 60.0))
    problems = check_alignment(clean, out.image, [shifted], "item-7")
    assert problems and all(p.startswith("item-7") for p in problems)
    assert any("outside the recorded prompt geometry" in p for p in problems)


def test_catches_pixels_drawn_off_the_box(clean):
    out = render("box", clean, [Mark(Region("x", bbox=(20, 20, 60, 60)))], Style(thickness_px=2))
    moved = np.roll(out.image, 3, axis=1)
    moved[:, :3] = clean[:, :3]
    assert check_alignment(clean, moved, out.shapes, "item-2")


def test_catches_a_missing_drawing_and_a_changed_coord_image(clean, disc, to_region):
    out = render("box", clean, [Mark(Region("x", bbox=(20, 20, 60, 60)))])
    problems = check_alignment(clean, clean, out.shapes, "item-3")
    assert any("of its outline shows red" in p for p in problems)
    coord = render("coord", clean, [Mark(to_region(disc))])
    touched = clean.copy()
    touched[0, 0] = COLORS["red"]
    assert any("changed pixels" in p for p in check_alignment(clean, touched, coord.shapes, "i"))


def test_catches_mask_fill_outside_the_mask(clean, disc, to_region):
    out = render("mask", clean, [Mark(to_region(disc))], Style(alpha=0.5))
    other = np.zeros_like(disc)
    other[:10, :10] = True
    wrong = replace(out.shapes[0], mask=to_region(other).mask)
    assert check_alignment(clean, out.image, [wrong], "item-4")


def test_invalid_primitives_are_named(clean):
    bad = [
        render("box", clean, [Mark(Region("x", bbox=(1, 1, 5, 5)))]).shapes[0],
    ]
    outside = replace(bad[0], bbox=(100.0, 1.0, 140.0, 5.0))
    flat = replace(bad[0], bbox=(5.0, 1.0, 5.0, 5.0))
    problems = check_alignment(clean, clean, [outside, flat], "item-5")
    assert any("outside" in p for p in problems) and any("x2 <= x1" in p for p in problems)
    assert check_alignment(clean, clean[:10], [], "item-6")[0].startswith("item-6: rendered image")


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 59),
    st.integers(0, 49),
    st.integers(1, 25),
    st.integers(1, 25),
    st.sampled_from(["box", "contour", "mask", "point"]),
    st.sampled_from([1, 2, 3, 8]),
)
def test_random_masks_pass_at_any_thickness(x, y, bw, bh, kind, thickness):
    mask = np.zeros((50, 60), bool)
    mask[y : y + bh, x : x + bw] = True
    yy, xx = np.ogrid[:50, :60]
    mask |= (xx - x) ** 2 + (yy - y) ** 2 < bw * bh
    image = np.full((50, 60, 3), 100, np.uint8)
    out = render(kind, image, [Mark(_rle(mask))], Style(thickness_px=thickness))
    assert check_alignment(image, out.image, out.shapes, "p") == []


def test_catches_a_shifted_contour(clean, disc, to_region):
    out = render("contour", clean, [Mark(to_region(disc))], Style(thickness_px=2))
    moved = tuple((px + 6, py) for px, py in out.shapes[0].polygon)
    assert check_alignment(clean, out.image, [replace(out.shapes[0], polygon=moved)], "c")
