import numpy as np
import pytest

from medvqa_build.geometry import parse_box
from medvqa_build.records import Region
from medvqa_build.render import COLORS, COORD_HINTS, Mark, Style, coord_text, render

BOXES = [(5, 5, 30, 30), (40, 10, 70, 40), (80, 50, 120, 90), (10, 60, 35, 90)]


def test_four_marks_in_distinct_colours(clean):
    marks = [
        Mark(Region(f"r{i}", bbox=b), c) for i, (b, c) in enumerate(zip(BOXES, COLORS, strict=True))
    ]
    out = render("multi", clean, marks, Style(thickness_px=2))
    assert [s.color for s in out.shapes] == list(COLORS)
    for (x1, y1, _, _), color in zip(BOXES, COLORS, strict=True):
        assert tuple(out.image[y1, x1]) == COLORS[color]
        assert np.array_equal(out.image[y1 + 5, x1 + 5], clean[y1 + 5, x1 + 5])


def test_mixed_box_and_contour(clean, disc, to_region):
    marks = [Mark(Region("a", bbox=BOXES[0]), "red"), Mark(to_region(disc), "blue", "contour")]
    assert [s.kind for s in render("multi", clean, marks).shapes] == ["box", "contour"]
    assert [
        s.kind
        for s in render(
            "multi_contour", clean, marks[1:] * 1 + [Mark(to_region(disc), "green")]
        ).shapes
    ] == ["contour", "contour"]


@pytest.mark.parametrize("n", [1, 5])
def test_mark_count_is_checked(clean, n):
    marks = [Mark(Region("a", bbox=(1, 1, 4, 4)), c) for c in (list(COLORS) * 2)[:n]]
    with pytest.raises(ValueError, match="2-4 marks"):
        render("multi", clean, marks)


def test_duplicate_colours_are_refused(clean):
    marks = [Mark(Region("a", bbox=(1, 1, 4, 4)), "red")] * 2
    with pytest.raises(ValueError, match="distinct colours"):
        render("multi", clean, marks)


def test_coord_and_image_levels_leave_pixels_alone(clean, disc, to_region):
    out = render("coord", clean, [Mark(to_region(disc))])
    assert np.array_equal(out.image, clean)
    (shape,) = out.shapes
    assert shape.kind == "text" and shape.bbox == (45.0, 25.0, 76.0, 56.0)
    assert coord_text(shape.bbox, "abs", 128, 96) == "[45, 25, 76, 56]"
    assert "[x1, y1, x2, y2]" in COORD_HINTS["abs"]
    plain = render("image", clean, [Mark(to_region(disc))])
    assert np.array_equal(plain.image, clean) and plain.shapes == ()


@pytest.mark.parametrize("convention", ["abs", "norm1000", "norm1", "qwen"])
def test_coord_text_parses_back(convention):
    text = coord_text((45, 25, 76, 56), convention, 128, 96)
    back = parse_box(text, convention, 128, 96)
    assert max(abs(a - b) for a, b in zip(back, (45, 25, 76, 56), strict=True)) <= 1


def test_unknown_level_names_the_choices(clean):
    with pytest.raises(Exception, match="use one of"):
        render("sparkles", clean, [])
