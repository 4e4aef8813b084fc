import numpy as np

from medvqa_build.geometry import rle_decode
from medvqa_build.render import COLORS, Mark, Style, render


def test_fill_blends_inside_only(clean, disc, to_region):
    out = render("mask", clean, [Mark(to_region(disc), "yellow")], Style(alpha=0.5))
    expected = np.floor(0.5 * clean[disc].astype(float) + 0.5 * np.array(COLORS["yellow"]) + 0.5)
    assert np.array_equal(out.image[disc], expected.astype(np.uint8))
    assert np.array_equal(out.image[~disc], clean[~disc])
    (shape,) = out.shapes
    assert np.array_equal(rle_decode(shape.mask.size_hw, shape.mask.counts), disc)


def test_alpha_zero_and_one(clean, disc, to_region):
    assert np.array_equal(
        render("mask", clean, [Mark(to_region(disc))], Style(alpha=0)).image, clean
    )
    full = render("mask", clean, [Mark(to_region(disc), "blue")], Style(alpha=1)).image
    assert np.all(full[disc] == COLORS["blue"])
