"""The fast paths of rendering and the alignment check give exactly the reference results.

Each reference below is the straightforward implementation the fast path replaced (full-image
numpy/scipy/skimage, per-pixel blend, per-segment lines); random masks with holes, diagonal
contacts (marching-squares saddles), border contact and single pixels exercise the crops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import cv2
import numpy as np
import pytest
from scipy import ndimage
from skimage import measure

from medvqa_build.geometry import (
    box_problem,
    crop_contours,
    mask_to_contours,
    mask_to_xyxy,
    rle_decode,
    rle_decode_box,
    rle_encode,
)
from medvqa_build.records import DrawnShape, MaskRef, Region, RLECounts
from medvqa_build.render import COLORS, Mark, Style, alignment, render
from medvqa_build.render.alignment import check_alignment
from medvqa_build.render.base import paint_plan
from medvqa_build.render.mask import plan_mask_mark
from medvqa_build.render.masks import load_region_crop, load_region_mask
from medvqa_build.render.point import mark_point


def _random_masks(seed: int, n: int, max_side: int = 48, salt: bool = True):
    rng = np.random.default_rng(seed)
    for i in range(n):
        h, w = (int(v) for v in rng.integers(1, max_side, 2))
        if i % 3 == 0 and salt:  # many diagonal contacts and holes
            yield rng.random((h, w)) < rng.random()
            continue
        m = np.zeros((h, w), np.uint8)
        for _ in range(int(rng.integers(1, 5))):
            centre = (int(rng.integers(-4, w + 4)), int(rng.integers(-4, h + 4)))
            cv2.circle(m, centre, int(rng.integers(0, 18)), 1, -1)
        if i % 3 == 1:
            m[rng.random((h, w)) < 0.05] ^= 1
        yield m.astype(bool)


def _layouts(m: np.ndarray):
    """The same mask as arrays cv2 cannot take directly and as other dtypes."""
    return [m, np.asfortranarray(m), m[::-1], m[:, ::-1], m.astype(np.uint8) * 7, m * 0.5]


# --- geometry -------------------------------------------------------------------------------


def _ref_contours(mask):
    padded = np.pad(np.asarray(mask) > 0, 1).astype(np.uint8)
    return [
        np.stack([c[:, 1] - 1, c[:, 0] - 1], axis=1) for c in measure.find_contours(padded, 0.5)
    ]


def _ref_rle_encode(mask):
    h, w = mask.shape[:2]
    flat = (np.ascontiguousarray(np.asarray(mask).T).reshape(-1) != 0).view(np.uint8)
    if flat.size == 0:
        return (h, w), ()
    change = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    counts = np.diff(np.concatenate(([0], change, [flat.size])))
    if flat[0]:
        counts = np.concatenate(([0], counts))
    return (h, w), tuple(counts.tolist())


def _ref_rle_decode(size_hw, counts):
    values = np.zeros(len(counts), np.uint8)
    values[1::2] = 1
    flat = np.repeat(values, np.asarray(counts, np.int64))
    return flat.reshape(tuple(size_hw), order="F").astype(bool)


def _ref_xyxy(mask):
    ys, xs = np.nonzero(mask)
    if xs.size == 0:
        return None
    return (float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1))


def test_contours_equal_skimage_find_contours():
    for mask in _random_masks(0, 150):
        for layout in _layouts(mask):
            got, want = mask_to_contours(layout), _ref_contours(layout)
            assert len(got) == len(want)
            for a, b in zip(got, want, strict=True):
                assert a.dtype == b.dtype and np.array_equal(a, b)


def test_rle_and_box_equal_the_reference():
    for mask in _random_masks(1, 300):
        for layout in _layouts(mask):
            size_hw, counts = rle_encode(layout)
            assert (size_hw, counts) == _ref_rle_encode(layout)
            assert all(type(v) is int for v in counts)
            assert mask_to_xyxy(layout) == _ref_xyxy(layout)
        decoded = rle_decode(size_hw, counts)
        assert decoded.dtype == bool and decoded.flags.c_contiguous
        assert np.array_equal(decoded, _ref_rle_decode(size_hw, counts))
        box, crop = rle_decode_box(size_hw, counts)
        # the runs as records hold them (packed int32, read without a copy), as a numpy array
        # and past the short-list path: one answer
        for runs in (RLECounts(counts), np.asarray(counts), list(counts) + [0] * 4096):
            other_box, other_crop = rle_decode_box(size_hw, runs)
            assert other_box == box and np.array_equal(other_crop, crop)
        if mask.any():
            assert tuple(map(float, box)) == _ref_xyxy(mask)
            x0, y0, x1, y1 = box
            assert crop.flags.c_contiguous and np.array_equal(crop, mask[y0:y1, x0:x1])
            assert all(
                np.array_equal(a, b)
                for a, b in zip(crop_contours(crop, x0, y0), _ref_contours(mask), strict=True)
            )
        else:
            assert box is None and crop.size == 0
    # runs as other tools write them: empty runs inside, an all-zero or all-one mask
    for size_hw, counts in [((2, 3), (0, 0, 2, 3, 1)), ((2, 3), (6,)), ((2, 3), (0, 6))]:
        assert np.array_equal(rle_decode(size_hw, counts), _ref_rle_decode(size_hw, counts))
    for runs in ((1, 2), RLECounts((1, 2)), np.array((1, 2))):
        with pytest.raises(ValueError, match="sum to 3"):
            rle_decode((2, 3), runs)
    for runs in ((7, -1), RLECounts((7, -1)), RLECounts((2, 5, -1))):
        with pytest.raises(ValueError):
            rle_decode((2, 3), runs)


# --- renderers ------------------------------------------------------------------------------


def test_region_crop_equals_the_whole_mask_cut_to_its_box(tmp_path):
    disc = np.zeros((30, 40), np.uint8)
    cv2.circle(disc, (12, 20), 6, 255, -1)
    cv2.imwrite(str(tmp_path / "m.png"), disc)
    size_hw, counts = rle_encode(disc > 0)
    regions = [
        Region("rle", mask=MaskRef(size_hw=size_hw, counts=counts)),
        Region("file", mask=MaskRef(path="m.png")),
        Region("poly", polygon=((3.0, 4.0), (20.0, 6.0), (9.0, 25.0))),
    ]
    for region in regions:
        whole = load_region_mask(region, 30, 40, tmp_path)
        (x0, y0, x1, y1), crop = load_region_crop(region, 30, 40, tmp_path)
        assert (x0, y0, x1, y1) == tuple(int(v) for v in _ref_xyxy(whole))
        assert np.array_equal(crop, whole[y0:y1, x0:x1])
    empty = Region("e", mask=MaskRef(size_hw=(30, 40), counts=(1200,)))
    for load in (load_region_mask, load_region_crop):
        with pytest.raises(ValueError, match="'e': mask is empty"):
            load(empty, 30, 40)
        with pytest.raises(ValueError, match="RLE mask is 30x40"):
            load(empty, 31, 40)


def _ref_blend(image, mask, color, alpha):
    out = image.copy()
    rgb = np.asarray(COLORS[color], np.float32)
    inside = out[mask].astype(np.float32)
    blended = (1.0 - alpha) * inside + alpha * rgb
    out[mask] = np.clip(np.floor(blended + 0.5), 0, 255).astype(np.uint8)
    return out


def _ref_centroid(mask):
    ys, xs = np.nonzero(mask)
    x, y = float(np.round(xs.mean())), float(np.round(ys.mean()))
    if not mask[int(y), int(x)]:
        nearest = np.argmin((xs - x) ** 2 + (ys - y) ** 2)
        x, y = float(xs[nearest]), float(ys[nearest])
    return (x, y)


def _rle_region(mask, counts=None):
    size_hw, runs = rle_encode(mask)
    return Region("r", mask=MaskRef(size_hw=size_hw, counts=counts or runs))


@pytest.mark.parametrize("alpha", [0.0, 0.35, 0.5, 0.77, 1.0])
def test_mask_fill_and_record_equal_the_reference(alpha):
    rng = np.random.default_rng(2)
    for mask in _random_masks(2, 80):
        if not mask.any():
            continue
        image = rng.integers(0, 256, (*mask.shape, 3), dtype=np.uint8)
        size_hw, counts = rle_encode(mask)
        # canonical runs are reused as recorded; runs with an empty run inside are re-encoded
        for runs in (counts, (counts[0], 0, 0, *counts[1:])):
            color = str(rng.choice(list(COLORS)))
            out = image.copy()
            mark = Mark(_rle_region(mask, runs), color)
            h, w = out.shape[:2]
            (shape,) = paint_plan(out, [plan_mask_mark(mark, Style(alpha=alpha), h, w)]).shapes
            assert np.array_equal(out, _ref_blend(image, mask, color, alpha))
            assert shape.bbox == _ref_xyxy(mask)
            assert (tuple(shape.mask.size_hw), tuple(shape.mask.counts)) == (size_hw, counts)


def test_point_centroid_equals_the_reference_also_off_a_crescent():
    crescent = np.zeros((40, 50), bool)
    yy, xx = np.ogrid[:40, :50]
    crescent[(xx - 25) ** 2 + (yy - 20) ** 2 <= 15**2] = True
    crescent[(xx - 31) ** 2 + (yy - 20) ** 2 <= 13**2] = False
    assert not crescent[20, 25]  # the plain centroid falls off the mask
    masks = [crescent, *(m for m in _random_masks(3, 200) if m.any())]
    for mask in masks:
        h, w = mask.shape
        assert mark_point(Mark(_rle_region(mask)), h, w) == _ref_centroid(mask)


# --- alignment check ------------------------------------------------------------------------


def _ref_line(points, h, w):
    """The closed centre line as cv2 rasterises a one-pixel polyline (8-connected), drawn on
    the whole image."""
    pts = np.clip(np.round(np.asarray(points, float)).astype(int), 0, [w - 1, h - 1])
    line = np.zeros((h, w), np.uint8)
    cv2.polylines(line, [pts.astype(np.int32).reshape(-1, 1, 2)], True, 1, 1, cv2.LINE_8)
    return line.astype(bool)


def _ref_check(clean, rendered, shapes: Sequence[DrawnShape], item_id):
    """check_alignment as it was: full-image masks, scipy distance transforms."""
    tol, h, w = alignment.TOLERANCE_PX, clean.shape[0], clean.shape[1]
    problems, allowed = [], np.zeros((h, w), bool)
    for i, shape in enumerate(shapes):
        name = f"{item_id}: {shape.kind} shape {i} ({shape.label!r}, {shape.color})"
        pts = np.asarray(shape.polygon, float).reshape(-1, 2)
        if problem := alignment._shape_problem(shape, h, w, pts):
            problems.append(f"{name} {problem}")
            continue
        t, line = max(1, shape.thickness_px or 1), None
        if shape.kind == "box":
            x1, y1, x2, y2 = (int(round(v)) for v in shape.bbox)
            here = np.zeros((h, w), bool)
            here[max(0, y1 - tol) : y2 + tol, max(0, x1 - tol) : x2 + tol] = True
            iy1, iy2 = y1 + t + tol, max(0, y2 - t - tol)
            ix1, ix2 = x1 + t + tol, max(0, x2 - t - tol)
            if iy2 > iy1 and ix2 > ix1:
                here[iy1:iy2, ix1:ix2] = False
            line = np.zeros((h, w), bool)
            line[y1:y2, x1:x2] = True
            line[y1 + 1 : y2 - 1, x1 + 1 : x2 - 1] = False
        elif shape.kind == "contour":
            line = _ref_line(shape.polygon, h, w)
            here = ndimage.distance_transform_edt(~line) <= t / 2 + tol + 0.5
        elif shape.kind == "mask":
            here = rle_decode(shape.mask.size_hw, shape.mask.counts)
        elif shape.kind == "point":
            x, y = shape.point
            yy, xx = np.ogrid[:h, :w]
            here = (xx - x) ** 2 + (yy - y) ** 2 <= (t + tol) ** 2
            line = np.zeros((h, w), bool)
            line[int(y), int(x)] = True
        else:
            here = np.zeros((h, w), bool)
        allowed |= here
        if line is not None and line.any():
            painted = np.all(rendered == COLORS[shape.color], axis=-1)
            if shape.kind == "contour":
                near = ndimage.distance_transform_edt(~painted) <= t / 2 + tol
                shown = float(near[line].mean())
            else:
                if shape.kind == "box":  # a ring pixel under a box drawn later counts as shown
                    for later in shapes[i + 1 :]:
                        if later.color in COLORS and later.color != shape.color:
                            painted |= np.all(rendered == COLORS[later.color], axis=-1)
                shown = float(painted[line].mean())
            if shown < alignment.MIN_COVERAGE:
                problems.append(
                    f"{name}: only {shown:.0%} of its outline shows {shape.color} (expected at "
                    f"least {alignment.MIN_COVERAGE:.0%}); the drawing does not match the shape"
                )
    stray = np.any(clean != rendered, axis=-1) & ~allowed
    if stray.any():
        ys, xs = np.nonzero(stray)
        problems.append(
            f"{item_id}: {int(stray.sum())} changed pixels lie outside the recorded prompt "
            f"geometry (in x {xs.min()}..{xs.max()}, y {ys.min()}..{ys.max()}); "
            "the overlay and the question's geometry disagree"
        )
    return problems


def _faults(rng, image, shapes, clean):
    """The rendered result as drawn, and with one thing wrong (pixels or geometry)."""
    h, w = image.shape[:2]
    yield image, list(shapes)
    for fault in range(6):
        out, bad = image.copy(), list(shapes)
        if fault == 0:
            out[rng.integers(0, h), rng.integers(0, w)] = rng.integers(0, 256, 3)
        elif fault == 1:
            out = np.roll(out, int(rng.integers(1, 4)), axis=1)
        elif fault == 2:
            out = clean.copy()
        elif bad and fault == 3:
            s = bad[0]
            if s.polygon:
                dx, dy = (int(v) for v in rng.integers(-4, 5, 2))
                bad[0] = replace(s, polygon=tuple((x + dx, y + dy) for x, y in s.polygon))
            elif s.point is not None:
                bad[0] = replace(s, point=(float(min(w - 1, s.point[0] + 3)), s.point[1]))
            else:
                x1, y1, x2, y2 = s.bbox
                bad[0] = replace(s, bbox=(max(0.0, x1 - 2), y1, min(w, x2 - 2), y2))
        elif bad and fault == 4:
            bad[0] = replace(bad[0], thickness_px=int(rng.integers(1, 6)))
        elif bad and fault == 5:
            bad[0] = replace(bad[0], color=str(rng.choice(list(COLORS))))
        yield out, bad


def _no_paint_anywhere(image, shapes):
    # scipy's transform of an image with no painted pixel at all measures from a point just
    # outside the corner (a reference quirk); the fast path reports 0% coverage instead
    return any(
        s.kind == "contour"
        and s.color in COLORS
        and not cv2.inRange(image, *[COLORS[s.color]] * 2).any()
        for s in shapes
    )


@pytest.mark.parametrize("kind", ["box", "contour", "mask", "point", "coord", "multi"])
def test_check_alignment_equals_the_full_image_reference(kind):
    rng = np.random.default_rng(sum(map(ord, kind)))
    seen = problems = 0
    for mask in _random_masks(4, 60, max_side=64, salt=False):
        if not mask.any() or len(_ref_contours(mask)) > 12:  # keep the reference quick
            continue
        h, w = mask.shape
        clean = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        if rng.random() < 0.5:
            clean[:] = rng.integers(0, 256, 3, dtype=np.uint8)
        marks = [Mark(_rle_region(mask), "red", str(rng.choice(["box", "contour"])))]
        if kind == "multi":
            x1, y1 = int(rng.integers(0, w)), int(rng.integers(0, h))
            box = (x1, y1, int(rng.integers(x1 + 1, w + 1)), int(rng.integers(y1 + 1, h + 1)))
            marks.append(Mark(Region("b", bbox=box), "blue"))
        out = render(kind, clean, marks, Style(thickness_px=int(rng.integers(1, 6))))
        for image, shapes in _faults(rng, out.image, out.shapes, clean):
            got = check_alignment(clean, image, shapes, "i")
            want = _ref_check(clean, image, shapes, "i")
            if got != want and _no_paint_anywhere(image, shapes):
                assert [p for p in got if "outline" not in p] == [
                    p for p in want if "outline" not in p
                ]
                continue
            assert got == want
            seen += 1
            problems += bool(want)
    assert seen > 60 and problems > 20  # the faults were caught, and caught alike


def test_check_alignment_on_non_rgb_images_uses_the_full_map():
    clean = np.full((20, 30), 9, np.uint8)
    rendered = clean.copy()
    rendered[2, 3] = 200
    shape = DrawnShape(0, "text", "x", "red", bbox=(0.0, 0.0, 5.0, 5.0))
    assert check_alignment(clean, rendered, [shape], "g") == [
        "g: 1 changed pixels lie outside the recorded prompt geometry (in x 3..3, y 2..2); "
        "the overlay and the question's geometry disagree"
    ]
    assert box_problem((0, 0, 5, 5), 30, 20) is None


def test_disc_dilation_equals_a_distance_threshold():
    rng = np.random.default_rng(5)
    for radius in (1.0, 1.5, 2.0, 2.5, 3.0, 4.5, 5.5):
        pixels = (rng.random((30, 40)) < 0.02).astype(np.uint8)
        pixels[0, 0] = 1
        want = ndimage.distance_transform_edt(pixels == 0) <= radius
        assert np.array_equal(alignment._within(pixels, radius) != 0, want)
