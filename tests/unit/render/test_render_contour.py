import numpy as np
from scipy import ndimage

from medvqa_build.render import COLORS, Mark, Style, render


def test_outline_follows_the_mask_boundary(clean, disc, to_region):
    out = render("contour", clean, [Mark(to_region(disc), "green")], Style(thickness_px=2))
    changed = np.any(out.image != clean, axis=-1)
    boundary = disc ^ ndimage.binary_erosion(disc)
    dist = ndimage.distance_transform_edt(~boundary)
    assert changed.any()
    assert dist[changed].max() <= 2.0  # every drawn pixel hugs the boundary
    assert np.all(out.image[changed] == COLORS["green"])
    # the boundary pixels themselves are painted, the deep interior is untouched
    assert np.all(out.image[boundary] == COLORS["green"])
    deep = ndimage.binary_erosion(disc, iterations=4)
    assert np.array_equal(out.image[deep], clean[deep])


def test_shape_records_polygon_and_box(clean, disc, to_region):
    (shape,) = render("contour", clean, [Mark(to_region(disc))]).shapes
    assert shape.kind == "contour" and len(shape.polygon) > 20
    assert shape.bbox == (45.0, 25.0, 76.0, 56.0)
    xs = [p[0] for p in shape.polygon]
    assert min(xs) >= 44 and max(xs) <= 76


def test_two_components_give_two_shapes(clean, make_disc, to_region):
    mask = make_disc(96, 128, 20, 20, 8) | make_disc(96, 128, 100, 70, 8)
    shapes = render("contour", clean, [Mark(to_region(mask))]).shapes
    assert len(shapes) == 2 and {s.label for s in shapes} == {"polyp"}
