import numpy as np
import pytest

from medvqa_build.geometry import (
    box_problem,
    iou,
    mask_components,
    mask_to_xyxy,
    rle_decode,
    rle_encode,
)


@pytest.mark.parametrize("fill", ["empty", "full", "corner", "blob"])
def test_rle_round_trip(fill):
    m = np.zeros((7, 5), bool)
    if fill == "full":
        m[:] = True
    elif fill == "corner":
        m[-1, -1] = True
    elif fill == "blob":
        m[1:4, 2:5] = True
    size, counts = rle_encode(m)
    assert size == (7, 5) and sum(counts) == 35
    assert (rle_decode(size, counts) == m).all()


def test_rle_is_coco_column_major():
    m = np.zeros((2, 2), bool)
    m[1, 0] = True  # column-major order: (0,0), (1,0), (0,1), (1,1)
    assert rle_encode(m)[1] == (1, 1, 2)


def test_mask_box_is_exclusive_and_components_sorted():
    m = np.zeros((10, 10), bool)
    m[1:3, 1:3] = True
    m[5:9, 4:9] = True
    assert mask_to_xyxy(m) == (1.0, 1.0, 9.0, 9.0)
    comps = mask_components(m)
    assert [mask_to_xyxy(c) for c in comps] == [(4.0, 5.0, 9.0, 9.0), (1.0, 1.0, 3.0, 3.0)]
    assert mask_to_xyxy(np.zeros((3, 3), bool)) is None


def test_iou_and_box_problems():
    assert iou((0, 0, 2, 2), (1, 1, 3, 3)) == pytest.approx(1 / 7)
    assert box_problem((0, 0, 10, 10), 10, 10) is None
    assert "x2 <= x1" in box_problem((5, 0, 2, 4), 10, 10)
    assert "outside" in box_problem((0, 0, 11, 4), 10, 10)
