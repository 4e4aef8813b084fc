import numpy as np
import pytest

from medvqa_build.records import Region
from medvqa_build.render import COLORS, Mark, Style, render


def test_marker_at_mask_centroid(clean, disc, to_region):
    out = render("point", clean, [Mark(to_region(disc))], Style(point_radius_px=3))
    (shape,) = out.shapes
    assert shape.point == (60.0, 40.0) and shape.thickness_px == 3
    assert np.all(out.image[40, 57:64] == COLORS["red"])
    changed = np.any(out.image != clean, axis=-1)
    ys, xs = np.nonzero(changed)
    assert xs.min() >= 57 and xs.max() <= 63 and ys.min() >= 37 and ys.max() <= 43


def test_box_centre_and_given_point(clean):
    box_only = Region("x", bbox=(10, 10, 21, 31))
    assert render("point", clean, [Mark(box_only)]).shapes[0].point == (15.0, 20.0)
    given = Mark(box_only, point=(100, 80))
    assert render("point", clean, [given]).shapes[0].point == (100.0, 80.0)


def test_centroid_outside_a_ring_moves_onto_the_mask(clean, make_disc, to_region):
    ring = make_disc(96, 128, 60, 40, 20) & ~make_disc(96, 128, 60, 40, 14)
    x, y = render("point", clean, [Mark(to_region(ring))]).shapes[0].point
    assert ring[int(y), int(x)]


def test_point_outside_image_raises(clean):
    with pytest.raises(ValueError, match="outside the image"):
        render("point", clean, [Mark(Region("x", bbox=(1, 1, 5, 5)), point=(500, 5))])
