import numpy as np
import pytest

from medvqa_build.records import Region
from medvqa_build.render import COLORS, Mark, Style, render


def test_outline_is_exactly_the_colour_and_the_rest_unchanged(clean):
    region = Region("polyp", bbox=(10, 20, 50, 60))
    out = render("box", clean, [Mark(region, "blue")], Style(thickness_px=3))
    band = np.zeros(clean.shape[:2], bool)
    band[20:60, 10:50] = True
    band[23:57, 13:47] = False
    assert np.all(out.image[band] == COLORS["blue"])
    assert np.array_equal(out.image[~band], clean[~band])
    (shape,) = out.shapes
    assert (shape.kind, shape.color, shape.bbox, shape.thickness_px) == (
        "box",
        "blue",
        (10.0, 20.0, 50.0, 60.0),
        3,
    )


def test_clean_image_is_not_modified(clean):
    before = clean.copy()
    render("box", clean, [Mark(Region("x", bbox=(0, 0, 128, 96)))])
    assert np.array_equal(clean, before)


def test_box_at_image_edge_stays_inside(clean):
    out = render("box", clean, [Mark(Region("x", bbox=(0, 0, 128, 96)))], Style(thickness_px=2))
    assert np.all(out.image[0, :] == COLORS["red"]) and np.all(out.image[:, -1] == COLORS["red"])
    assert np.array_equal(out.image[2:-2, 2:-2], clean[2:-2, 2:-2])


def test_fractional_box_is_expanded_and_recorded_as_drawn(clean):
    out = render("box", clean, [Mark(Region("x", bbox=(10.4, 20.6, 30.2, 40.9)))])
    assert out.shapes[0].bbox == (10.0, 20.0, 31.0, 41.0)


def test_box_from_mask_when_no_bbox(clean, disc, to_region):
    out = render("box", clean, [Mark(to_region(disc))])
    assert out.shapes[0].bbox == (45.0, 25.0, 76.0, 56.0)


def test_thickness_scales_with_image_size():
    small = Style().thickness_for(360, 360)
    large = Style().thickness_for(1080, 1920)
    assert small == 2 and large > small


def test_image_index_is_recorded(clean):
    out = render("box", clean, [Mark(Region("x", bbox=(1, 1, 9, 9)))], image_index=2)
    assert out.shapes[0].image_index == 2


@pytest.mark.parametrize(
    ("bbox", "reason"),
    [
        ((50, 20, 10, 60), "x2 <= x1"),
        ((10, 20, 200, 60), "outside"),
        ((-5, 0, 10, 10), "outside"),
    ],
)
def test_bad_boxes_raise_clear_errors(clean, bbox, reason):
    with pytest.raises(ValueError, match=reason):
        render("box", clean, [Mark(Region("x", bbox=bbox))])


def test_unknown_colour_and_bad_image(clean):
    with pytest.raises(ValueError, match="unknown colour"):
        render("box", clean, [Mark(Region("x", bbox=(1, 1, 5, 5)), "purple")])
    with pytest.raises(ValueError, match="RGB uint8"):
        render("box", clean[..., 0], [])
