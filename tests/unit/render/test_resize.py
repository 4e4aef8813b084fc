import numpy as np
import pytest

from medvqa_build.geometry import mask_to_xyxy
from medvqa_build.records import Region
from medvqa_build.render import fit_max_side, load_region_mask


def test_native_by_default(make_image):
    r = fit_max_side(480, 640)
    assert r.is_identity and r.box((1, 2, 3, 4)) == (1, 2, 3, 4)
    img = make_image(48, 64)
    assert r.__class__((48, 64), (48, 64)).image(img) is img


def test_max_side_scales_image_and_geometry_together(make_image):
    r = fit_max_side(480, 640, max_side=320)
    assert r.dst_hw == (240, 320) and r.scale_xy == (0.5, 0.5)
    assert r.image(make_image(480, 640)).shape == (240, 320, 3)
    assert r.box((100, 50, 300, 250)) == (50, 25, 150, 125)
    assert r.points([(0.5, 0.5)]) == ((0.0, 0.0),)  # pixel centres map like cv2.resize


def test_region_mask_and_box_stay_consistent(make_disc, to_region):
    mask = make_disc(480, 640, 300, 200, 60)
    region = to_region(mask)
    box = mask_to_xyxy(mask)
    r = fit_max_side(480, 640, max_side=320)
    small = r.region(Region("x", bbox=box, mask=region.mask))
    small_mask = load_region_mask(small, 240, 320)
    assert all(abs(a - b) <= 1 for a, b in zip(mask_to_xyxy(small_mask), small.bbox, strict=True))


def test_bad_inputs():
    with pytest.raises(ValueError, match="max_side"):
        fit_max_side(10, 10, 0)
    with pytest.raises(ValueError, match="expects"):
        fit_max_side(10, 10).image(np.zeros((5, 5, 3), np.uint8))
