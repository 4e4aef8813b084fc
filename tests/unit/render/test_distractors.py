import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medvqa_build.geometry import iou, sample_distractor_boxes


@settings(max_examples=50, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(10, 60),
    st.integers(10, 60),
    st.integers(0, 200),
    st.integers(0, 140),
)
def test_constraints_hold(seed, bw, bh, x1, y1):
    w, h = 320, 240
    target = (x1, y1, min(w, x1 + bw), min(h, y1 + bh))
    avoid = [(250, 180, 300, 230)]
    found = sample_distractor_boxes(target, w, h, 3, np.random.default_rng(seed), avoid=avoid)
    assert len(found) == 3
    tw, th = target[2] - target[0], target[3] - target[1]
    others = [target, *avoid]
    for i, box in enumerate(found):
        assert 0 <= box[0] < box[2] <= w and 0 <= box[1] < box[3] <= h
        assert all(float(v).is_integer() for v in box)
        assert 0.8 * tw - 1 <= box[2] - box[0] <= 1.2 * tw + 1
        assert 0.8 * th - 1 <= box[3] - box[1] <= 1.2 * th + 1
        assert all(iou(box, o) < 0.1 for o in others + found[:i])


def test_deterministic_given_the_generator():
    a = sample_distractor_boxes((10, 10, 40, 40), 200, 200, 3, np.random.default_rng(7))
    b = sample_distractor_boxes((10, 10, 40, 40), 200, 200, 3, np.random.default_rng(7))
    assert a == b


def test_impossible_raises_a_clear_error():
    with pytest.raises(ValueError, match="found 0 of 3 distractor boxes"):
        sample_distractor_boxes(
            (0, 0, 90, 90), 100, 100, 3, np.random.default_rng(0), max_tries=200
        )
    with pytest.raises(ValueError, match="outside"):
        sample_distractor_boxes((0, 0, 190, 90), 100, 100, 3, np.random.default_rng(0))


def test_valid_mask_keeps_box_centres_inside():
    valid = np.zeros((200, 200), bool)
    valid[:, 100:] = True
    found = sample_distractor_boxes(
        (120, 10, 140, 30), 200, 200, 4, np.random.default_rng(1), valid_mask=valid
    )
    assert all(valid[int(b[1] + b[3] - 1) // 2, int(b[0] + b[2] - 1) // 2] for b in found)
    with pytest.raises(ValueError, match="valid_mask"):
        sample_distractor_boxes(
            (0, 0, 5, 5), 200, 200, 1, np.random.default_rng(0), valid_mask=valid[:5]
        )
