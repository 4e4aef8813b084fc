import cv2
import numpy as np
import pytest

from medvqa_build.records import MaskRef, Region
from medvqa_build.render import load_region_mask, region_box


def test_rle_round_trip(disc, to_region):
    assert np.array_equal(load_region_mask(to_region(disc), 96, 128), disc)


def test_png_path_with_label_value(tmp_path, disc):
    labels = np.zeros((96, 128), np.uint8)
    labels[disc] = 2
    labels[:5, :5] = 1
    cv2.imwrite(str(tmp_path / "m.png"), labels)
    two = load_region_mask(Region("x", mask=MaskRef(path="m.png", value=2)), 96, 128, tmp_path)
    assert np.array_equal(two, disc)
    nonzero = load_region_mask(Region("x", mask=MaskRef(path="m.png")), 96, 128, tmp_path)
    assert nonzero.sum() == disc.sum() + 25


def test_jpeg_mask_ignores_compression_noise(tmp_path, disc):
    cv2.imwrite(str(tmp_path / "m.jpg"), np.where(disc, 255, 0).astype(np.uint8))
    mask = load_region_mask(Region("x", mask=MaskRef(path="m.jpg")), 96, 128, tmp_path)
    assert np.mean(mask != disc) < 0.01


def test_polygon_fallback():
    region = Region("x", polygon=((10, 10), (20, 10), (20, 20), (10, 20)))
    assert region_box(region, 96, 128) == (10.0, 10.0, 21.0, 21.0)


def test_empty_mask_raises(to_region):
    with pytest.raises(ValueError, match="empty"):
        load_region_mask(to_region(np.zeros((96, 128), bool)), 96, 128)


def test_wrong_size_rle_and_png_raise(tmp_path, disc, to_region):
    with pytest.raises(ValueError, match="96x128"):
        load_region_mask(to_region(disc), 64, 64)
    cv2.imwrite(str(tmp_path / "m.png"), np.ones((10, 10), np.uint8))
    with pytest.raises(ValueError, match="m.png is 10x10"):
        load_region_mask(Region("x", mask=MaskRef(path="m.png")), 96, 128, tmp_path)


def test_missing_file_relative_path_and_no_mask(tmp_path):
    with pytest.raises(ValueError, match="missing"):
        load_region_mask(Region("x", mask=MaskRef(path="nope.png")), 96, 128, tmp_path)
    with pytest.raises(ValueError, match="relative"):
        load_region_mask(Region("x", mask=MaskRef(path="nope.png")), 96, 128)
    with pytest.raises(ValueError, match="no mask"):
        load_region_mask(Region("x", bbox=(1, 1, 2, 2)), 96, 128)


def test_disc_helper_matches_expectation(make_disc):
    assert make_disc(10, 10, 5, 5, 0).sum() == 1
