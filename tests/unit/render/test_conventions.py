import pytest
from hypothesis import given
from hypothesis import strategies as st

from medvqa_build.geometry import (
    format_box,
    format_qwen_box,
    norm1_to_xyxy,
    norm1000_to_xyxy,
    parse_box,
    parse_qwen_box,
    xyxy_to_abs,
    xyxy_to_norm1,
    xyxy_to_norm1000,
)


@st.composite
def boxes(draw, max_side=2000):
    w = draw(st.integers(2, max_side))
    h = draw(st.integers(2, max_side))
    x1 = draw(st.floats(0, w - 1, allow_nan=False))
    y1 = draw(st.floats(0, h - 1, allow_nan=False))
    x2 = draw(st.floats(x1 + 1, w, allow_nan=False))
    y2 = draw(st.floats(y1 + 1, h, allow_nan=False))
    return (x1, y1, x2, y2), w, h


def _close(a, b, tol=1.0):
    return max(abs(p - q) for p, q in zip(a, b, strict=True)) <= tol


@given(boxes())
def test_norm1000_round_trip_within_one_pixel(case):
    box, w, h = case
    n = xyxy_to_norm1000(box, w, h)
    assert all(isinstance(v, int) and 0 <= v <= 1000 for v in n)
    assert _close(norm1000_to_xyxy(n, w, h), box)


@given(boxes(max_side=10000))
def test_norm1_round_trip_within_one_pixel(case):
    box, w, h = case
    n = xyxy_to_norm1(box, w, h)
    assert all(0.0 <= v <= 1.0 for v in n)
    assert _close(norm1_to_xyxy(n, w, h), box)


@given(boxes(max_side=10000), st.sampled_from(["abs", "norm1000", "norm1", "qwen"]))
def test_format_parse_round_trip(case, convention):
    box, w, h = case
    if convention == "norm1000" and max(w, h) > 2000:
        return
    assert _close(parse_box(format_box(box, convention, w, h), convention, w, h), box)


def test_examples():
    assert format_box((251, 480, 343, 586), "abs", 1000, 1000) == "[251, 480, 343, 586]"
    assert format_box((0, 0, 168, 336), "norm1000", 336, 336) == "[0, 0, 500, 1000]"
    assert format_box((0, 0, 168, 336), "norm1", 336, 336) == "[0.0000, 0.0000, 0.5000, 1.0000]"
    assert format_box((87, 140, 103, 162), "qwen", 336, 336) == (
        "<|box_start|>(87,140),(103,162)<|box_end|>"
    )
    assert xyxy_to_abs((0.5, 1.5, 2.5, 3.49), 10, 10) == (1, 2, 3, 3)
    assert parse_qwen_box("The box is " + format_qwen_box((1, 2, 3, 4)) + ".") == (1, 2, 3, 4)


@pytest.mark.parametrize(
    ("box", "reason"),
    [((5, 5, 1, 9), "x2 <= x1"), ((0, 0, 11, 5), "outside"), ((0, 0, 1), "4 numbers")],
)
def test_bad_boxes(box, reason):
    with pytest.raises(ValueError, match=reason):
        format_box(box, "abs", 10, 10)


def test_unknown_convention_and_unparseable_text():
    with pytest.raises(ValueError, match="unknown box convention"):
        format_box((0, 0, 1, 1), "yxyx", 10, 10)
    with pytest.raises(ValueError, match="no <|box_start|>"):
        parse_qwen_box("[1, 2, 3, 4]")
    with pytest.raises(ValueError, match="no \\[x1"):
        parse_box("nothing here", "abs", 10, 10)
