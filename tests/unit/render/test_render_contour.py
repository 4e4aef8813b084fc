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


def test_outline_runs_through_border_pixel_centres_and_fills_back(clean, disc, to_region):
    """An outer outline passes through the centres of the component's border pixels (corners
    only), so ``cv2.fillPoly`` of it gives the component back, pixel for pixel."""
    import cv2

    from medvqa_build.render.alignment import check_alignment

    out = render("contour", clean, [Mark(to_region(disc), "green")], Style(thickness_px=2))
    (shape,) = out.shapes
    pts = np.asarray(shape.polygon)
    assert (
        np.array_equal(pts, np.round(pts))
        and disc[pts[:, 1].astype(int), pts[:, 0].astype(int)].all()
    )
    border = disc & ~ndimage.binary_erosion(disc)
    assert len(pts) < border.sum()  # corners only: fewer vertices than border pixels
    filled = np.zeros(disc.shape, np.uint8)
    cv2.fillPoly(filled, [pts.astype(np.int32)], 1)
    assert np.array_equal(filled.astype(bool), disc)
    assert check_alignment(clean, out.image, out.shapes, "i", decoded=out.decoded) == []


def test_a_one_pixel_thin_part_is_outlined_on_the_crack_boundary(clean, make_disc, to_region):
    """A line of pixels has no pixel-centre polygon with an area: such a mask is outlined on
    the boundary between its pixels and the background (half-pixel vertices), and the
    drawing still passes the alignment check."""
    from medvqa_build.geometry import mask_to_contours
    from medvqa_build.render.alignment import check_alignment

    mask = make_disc(96, 128, 30, 30, 9)
    mask[70, 60:100] = True  # a separate component one pixel thin
    out = render("contour", clean, [Mark(to_region(mask), "blue")], Style(thickness_px=2))
    want = mask_to_contours(mask)
    assert len(out.shapes) == len(want) == 2
    for shape, polygon in zip(out.shapes, want, strict=True):
        assert np.array_equal(np.asarray(shape.polygon), polygon)  # x.5 vertices
    assert check_alignment(clean, out.image, out.shapes, "i", decoded=out.decoded) == []
