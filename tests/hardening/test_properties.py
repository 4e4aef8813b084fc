"""Property-based tests (hypothesis) of what the existing ones in tests/unit/render and
tests/unit/negatives leave out: masks <-> boxes <-> RLE, box validity, IoU, and option
placement with any number of options and any slot sequence."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from medvqa_build.geometry import (
    box_problem,
    components_with_boxes,
    iou,
    mask_to_xyxy,
    rle_decode,
    rle_encode,
)
from medvqa_build.negatives import BalancedSlots, place_answer

masks = arrays(np.bool_, st.tuples(st.integers(1, 24), st.integers(1, 24)))
finite = st.floats(-1e4, 1e4, allow_nan=False)
SETTINGS = settings(max_examples=60, deadline=None)


@SETTINGS
@given(masks)
def test_rle_round_trip_and_counts_cover_the_image(mask):
    size_hw, counts = rle_encode(mask)
    assert size_hw == mask.shape and sum(counts) == mask.size
    assert all(c >= 0 for c in counts) and all(c > 0 for c in counts[1:])
    assert np.array_equal(rle_decode(size_hw, counts), mask)


@SETTINGS
@given(masks)
def test_mask_box_is_tight_and_exclusive(mask):
    box = mask_to_xyxy(mask)
    if not mask.any():
        assert box is None
        return
    x1, y1, x2, y2 = (int(v) for v in box)
    assert box_problem(box, mask.shape[1], mask.shape[0]) is None
    inside = np.zeros_like(mask)
    inside[y1:y2, x1:x2] = True
    assert not (mask & ~inside).any()  # nothing outside the box
    assert mask[y1].any() and mask[y2 - 1].any() and mask[:, x1].any() and mask[:, x2 - 1].any()


@SETTINGS
@given(masks, st.integers(1, 5))
def test_components_partition_the_mask(mask, min_area):
    parts = components_with_boxes(mask, min_area)
    union = np.zeros_like(mask)
    for component, box in parts:
        assert not (union & component).any() and component.sum() >= min_area
        assert mask_to_xyxy(component) == box
        union |= component
    assert not (union & ~mask).any()
    areas = [c.sum() for c, _ in parts]
    assert areas == sorted(areas, reverse=True)


@SETTINGS
@given(st.tuples(finite, finite, finite, finite), st.integers(1, 4000), st.integers(1, 4000))
def test_box_problem_accepts_exactly_the_boxes_inside(box, width, height):
    x1, y1, x2, y2 = box
    ok = x1 < x2 and y1 < y2 and x1 >= 0 and y1 >= 0 and x2 <= width and y2 <= height
    assert (box_problem(box, width, height) is None) == ok


@given(st.sampled_from([float("nan"), float("inf"), -float("inf")]), st.integers(0, 3))
def test_box_problem_names_non_finite_coordinates(bad, index):
    box = [1.0, 1.0, 5.0, 5.0]
    box[index] = bad
    assert "non-finite" in box_problem(box, 10, 10)


boxes = st.tuples(
    st.integers(0, 50), st.integers(0, 50), st.integers(1, 30), st.integers(1, 30)
).map(lambda b: (b[0], b[1], b[0] + b[2], b[1] + b[3]))


@SETTINGS
@given(boxes, boxes)
def test_iou_is_symmetric_bounded_and_one_on_itself(a, b):
    a, b = tuple(map(float, a)), tuple(map(float, b))
    assert 0.0 <= iou(a, b) <= 1.0 and abs(iou(a, b) - iou(b, a)) < 1e-12
    assert iou(a, a) == 1.0


@SETTINGS
@given(
    st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=9, unique=True),
    st.integers(0, 10_000),
    st.integers(0, 2**32 - 1),
)
def test_place_answer_keeps_every_option_once(options, slot, seed):
    truth, distractors = options[0], options[1:]
    placed, pos = place_answer(truth, distractors, slot, np.random.default_rng(seed))
    assert placed[pos] == truth and pos == slot % len(options)
    assert sorted(placed) == sorted(options)


@SETTINGS
@given(st.integers(2, 8), st.integers(1, 60), st.integers(0, 2**32 - 1))
def test_balanced_slots_stay_within_one(n_options, n_items, seed):
    slots = BalancedSlots(np.random.default_rng(seed))
    counts = [0] * n_options
    for _ in range(n_items):
        counts[slots.next("t", n_options)] += 1
    assert max(counts) - min(counts) <= 1
