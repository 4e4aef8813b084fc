"""The render stage's BGR path gives exactly the RGB path's pixels, records and verdicts.

A plain JPEG/PNG is decoded, drawn on, checked and encoded in cv2's BGR order (no whole-image
colour conversion), and the renderers hand the check what they decoded (contour polygons as
arrays, mask crops). Each test compares that with the RGB path as it was.
"""

from __future__ import annotations

import re
from dataclasses import replace

import cv2
import numpy as np
import pytest

from medvqa_build.geometry import rle_decode_box, rle_encode
from medvqa_build.media.encode import encode_image
from medvqa_build.media.refs import source_ref
from medvqa_build.recipe import RenderSpec
from medvqa_build.records import DrawnShape, Item, MaskRef, Region
from medvqa_build.render import COLORS, RENDERERS, Mark, RenderResult, Style, render
from medvqa_build.render.alignment import check_alignment
from medvqa_build.render.base import channel_colors
from medvqa_build.stages.render import RenderJob, _load, _read_file, render_one

from .test_fast_paths import _faults, _random_masks, _ref_check, _rle_region

KINDS = ["box", "contour", "mask", "point", "multi", "multi_contour", "coord", "image"]


def _cases(seed: int, n: int):
    """(clean RGB image, marks, style) for masks with holes, border contact, single pixels."""
    rng = np.random.default_rng(seed)
    for mask in _random_masks(seed, n, max_side=40):
        if not mask.any():
            continue
        h, w = mask.shape
        clean = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        colors = [str(c) for c in rng.permutation(list(COLORS))]
        x1, y1 = int(rng.integers(0, w)), int(rng.integers(0, h))
        box = (x1, y1, int(rng.integers(x1 + 1, w + 1)), int(rng.integers(y1 + 1, h + 1)))
        marks = [
            Mark(_rle_region(mask), colors[0], str(rng.choice(["box", "contour"]))),
            Mark(Region("b", bbox=box, mask=_rle_region(mask).mask), colors[1]),
        ]
        style = Style(thickness_px=int(rng.integers(1, 5)), alpha=float(rng.random()))
        yield clean, marks, style


def _decoded_matches(result: RenderResult) -> None:
    assert len(result.decoded) in (0, len(result.shapes))
    for shape, known in zip(result.shapes, result.decoded, strict=False):
        if known is None:
            continue
        if shape.kind == "contour":  # as traced (int32, cv2's layout) or crack vertices
            assert known.dtype in (np.int32, np.float64)
            pts = known.reshape(-1, 2).astype(np.float64)
            assert np.array_equal(pts, np.asarray(shape.polygon, np.float64))
        else:
            box, crop = rle_decode_box(shape.mask.size_hw, shape.mask.counts)
            assert tuple(known[0]) == box and np.array_equal(known[1], crop)


@pytest.mark.parametrize("kind", KINDS)
def test_bgr_render_is_the_rgb_render_with_channels_swapped(kind):
    seen = 0
    for clean, marks, style in _cases(sum(map(ord, kind)), 60):
        if kind not in ("multi", "multi_contour"):
            marks = marks[:1]
        try:
            want = render(kind, clean, marks, style)
        except ValueError as exc:
            with pytest.raises(ValueError, match=str(exc)[:20]):
                render(kind, clean[..., ::-1].copy(), marks, style, channels="bgr")
            continue
        got = render(kind, np.ascontiguousarray(clean[..., ::-1]), marks, style, channels="bgr")
        assert np.array_equal(got.image[..., ::-1], want.image)
        assert got.shapes == want.shapes
        assert repr(got.shapes) == repr(want.shapes)  # -0.0 stays -0.0
        _decoded_matches(got)
        _decoded_matches(want)
        seen += 1
    assert seen > 20


def test_a_renderer_that_draws_rgb_only_gets_the_channels_swapped(monkeypatch, clean):
    class RgbOnly:
        name = "rgb-only"

        def draw(self, image, marks, style, root=None):
            image[2:5, 3:9] = COLORS["red"]
            return RenderResult(image, ())

    monkeypatch.setitem(RENDERERS._entries, "rgb-only", RgbOnly())
    want = render("rgb-only", clean, [])
    got = render("rgb-only", np.ascontiguousarray(clean[..., ::-1]), [], channels="bgr")
    assert np.array_equal(got.image[..., ::-1], want.image)
    assert (got.image[3, 4] == channel_colors("bgr")["red"]).all()
    with pytest.raises(ValueError, match="channel order"):
        render("box", clean, [], channels="hsv")


def _known(result: RenderResult, shapes) -> list:
    """The renderer's decoded geometry for the shapes a fault left as recorded, else None."""
    decoded = result.decoded or (None,) * len(shapes)
    return [
        known if shape is drawn else None
        for shape, drawn, known in zip(shapes, result.shapes, decoded, strict=True)
    ]


@pytest.mark.parametrize("kind", ["box", "contour", "mask", "point", "coord", "multi"])
def test_check_in_bgr_with_decoded_geometry_gives_the_same_verdicts(kind):
    rng = np.random.default_rng(7 + len(kind))
    seen = problems = 0
    for clean, marks, style in _cases(40 + len(kind), 50):
        marks = marks if kind == "multi" else marks[:1]
        out = render(kind, np.ascontiguousarray(clean[..., ::-1]), marks, style, channels="bgr")
        rgb_image = np.ascontiguousarray(out.image[..., ::-1])
        for image, shapes in _faults(rng, rgb_image, out.shapes, clean):
            want = check_alignment(clean, image, shapes, "i")
            got = check_alignment(
                np.ascontiguousarray(clean[..., ::-1]),
                np.ascontiguousarray(image[..., ::-1]),
                shapes,
                "i",
                channels="bgr",
                decoded=_known(out, shapes),
            )
            assert got == want
            seen += 1
            problems += bool(want)
    assert seen > 100 and problems > 30


def test_points_off_pixel_centres_are_checked_as_before():
    rng = np.random.default_rng(9)
    for _ in range(200):
        h, w = (int(v) for v in rng.integers(5, 30, 2))
        clean = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        x, y = float(rng.uniform(0, w - 1)), float(rng.uniform(0, h - 1))
        if rng.random() < 0.5:
            x, y = float(round(x)), float(round(y))
        t = int(rng.integers(1, 4))
        rendered = clean.copy()
        cv2.circle(rendered, (round(x), round(y)), t + int(rng.integers(0, 3)), (255, 0, 0), -1)
        box = (max(0.0, x - t), max(0.0, y - t), min(float(w), x + t + 1), min(float(h), y + t + 1))
        shape = DrawnShape(0, "point", "p", "red", bbox=box, point=(x, y), thickness_px=t)
        assert check_alignment(clean, rendered, [shape], "p") == _ref_check(
            clean, rendered, [shape], "p"
        )


# --- the render stage -------------------------------------------------------------------------


def _write_sources(root):
    rng = np.random.default_rng(10)
    root.mkdir(parents=True)
    colour = rng.integers(0, 256, (40, 56, 3), dtype=np.uint8)
    cv2.imwrite(str(root / "colour.jpg"), colour)
    cv2.imwrite(str(root / "colour.png"), colour)
    cv2.imwrite(str(root / "grey.png"), rng.integers(0, 256, (40, 56), dtype=np.uint8))
    cv2.imwrite(str(root / "rgba.png"), rng.integers(0, 256, (40, 56, 4), dtype=np.uint8))
    data = bytearray(cv2.imencode(".png", colour)[1].tobytes())
    data[128:132] = b"DICM"  # DICOM's magic bytes: read as DICOM, as before
    (root / "magic.png").write_bytes(bytes(data))
    (root / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a JPEG")
    return ["colour.jpg", "colour.png", "grey.png", "rgba.png", "magic.png", "broken.jpg"]


def _stage_item(item_id, name, level, shapes, question="What is marked?"):
    return Item(
        item_id,
        "B",
        "C",
        "T",
        "S",
        "s",
        ("s:a",),
        (source_ref("s", name),),
        question,
        ("a", "b"),
        "A",
        "a",
        prompt_level=level,
        prompt_geometry=tuple(shapes),
        coord_format="abs" if level == "coord" else None,
    )


def _rgb_pipeline(item, job):
    """render_one's result by the RGB path as it was: (item, problems, encoded bytes) or the
    quarantine reason."""
    try:
        clean = _load(item.images[0], job)
        marks = [
            Mark(Region(s.label or "", bbox=s.bbox, mask=s.mask), s.color or "red")
            for s in item.prompt_geometry
        ]
        result = render(item.prompt_level, clean, marks, Style(), root=job.roots["s"])
    except Exception as exc:  # noqa: BLE001  (the reason is compared)
        return str(exc)
    problems = tuple(check_alignment(clean, result.image, result.shapes, item.item_id))
    return result.shapes, problems, encode_image(result.image, "jpeg", job.spec.jpeg_quality)


@pytest.mark.parametrize("level", ["box", "contour", "mask", "point", "multi", "coord"])
def test_render_one_writes_the_rgb_pipelines_bytes(tmp_path, level):
    names = _write_sources(tmp_path / "src")
    job = RenderJob(roots={"s": tmp_path / "src"}, out=tmp_path / "out", spec=RenderSpec())
    disc = np.zeros((40, 56), np.uint8)
    cv2.circle(disc, (0, 20), 12, 1, -1)  # touches the left border
    size_hw, counts = rle_encode(disc > 0)
    mask = MaskRef(size_hw=size_hw, counts=counts)
    kind = {"multi": "box", "coord": "text"}.get(level, level)
    shapes = [DrawnShape(0, kind, "a", "green", bbox=(0.0, 8.0, 12.0, 33.0), mask=mask)]
    if level == "multi":
        shapes.append(DrawnShape(0, "box", "b", "blue", bbox=(30.0, 2.0, 50.0, 20.0)))
    for k, name in enumerate(names):
        item = _stage_item(f"{level}-{k}", name, level, shapes)
        want = _rgb_pipeline(item, job)
        done = render_one(item, job)
        if isinstance(want, str):
            assert done.item is None and done.quarantined["reason"] == want
            continue
        shapes_want, problems_want, data = want
        assert done.quarantined is None and done.problems == problems_want
        assert done.item.prompt_geometry == shapes_want
        assert repr(done.item.prompt_geometry) == repr(shapes_want)
        if level == "coord" and name.endswith((".jpg", ".png")) and name != "magic.png":
            assert done.item.images == item.images  # the source file itself is published
            continue
        written = tmp_path / "out" / done.item.images[0].removeprefix("render://")
        assert written.read_bytes() == data
    assert not list((tmp_path / "out").rglob(".*.tmp"))


def test_the_check_reads_a_moved_mask_from_the_shape(clean, disc, to_region):
    out = render("mask", clean, [Mark(to_region(disc), "red")])
    assert check_alignment(clean, out.image, out.shapes, "m", decoded=out.decoded) == []
    moved = replace(out.shapes[0], mask=to_region(np.roll(disc, 9, axis=1)).mask)
    assert check_alignment(clean, out.image, [moved], "m")  # without the renderer's crop


def test_read_file_is_numpys_fromfile(tmp_path):
    rng = np.random.default_rng(13)
    for size in (0, 1, 131, 132, 4097, 1 << 20):
        path = tmp_path / f"f{size}"
        path.write_bytes(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
        got, want = _read_file(str(path)), np.fromfile(str(path), np.uint8)
        assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
    for bad in (tmp_path / "missing", tmp_path):  # the same errors, raised by numpy
        with pytest.raises(OSError) as want:
            np.fromfile(str(bad), np.uint8)
        with pytest.raises(type(want.value), match=re.escape(str(want.value))):
            _read_file(str(bad))
