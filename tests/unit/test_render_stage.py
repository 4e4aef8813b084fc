"""The render stage on real items: bad geometry is quarantined with a reason, coordinates in
the question follow the resized image, and the clean source image is never modified; a chunk
rendered in three passes (read, plan, paint) gives what its items give one by one."""

import cv2
import numpy as np
import pytest

from medvqa_build.geometry import rle_encode
from medvqa_build.media.image import load_rgb
from medvqa_build.media.refs import source_ref
from medvqa_build.recipe import RenderSpec
from medvqa_build.records import DrawnShape, Item, MaskRef
from medvqa_build.stages.render import (
    CHUNK,
    RenderJob,
    _render_chunk,
    draw_kind,
    render_items,
    render_one,
)
from medvqa_build.store.parquet import ItemWriter
from medvqa_build.store.tables import ItemTable

from ..fixtures.images import write_jpeg


def _item(item_id, level, shape, question="What is in the red box?", coord_format=None):
    return Item(
        item_id,
        "B",
        "C",
        "Region Recognition",
        "Box",
        "s",
        ("s:a",),
        (source_ref("s", "a.jpg"),),
        question,
        ("polyp", "ulcer"),
        "A",
        "polyp",
        prompt_level=level,
        prompt_geometry=(shape,),
        coord_format=coord_format,
    )


def test_bad_geometry_is_quarantined_and_the_rest_renders(tmp_path):
    write_jpeg(tmp_path / "src" / "a.jpg", 1, size_wh=(80, 60))
    before = (tmp_path / "src" / "a.jpg").read_bytes()
    size, counts = rle_encode(np.zeros((60, 80), bool))
    items = [
        _item("good", "box", DrawnShape(0, "box", "polyp", "red", bbox=(10, 10, 40, 30))),
        _item("outside", "box", DrawnShape(0, "box", "polyp", "red", bbox=(10, 10, 90, 30))),
        _item("flipped", "box", DrawnShape(0, "box", "polyp", "red", bbox=(40, 10, 10, 30))),
        _item(
            "empty",
            "contour",
            DrawnShape(0, "contour", "polyp", "red", mask=MaskRef(size_hw=size, counts=counts)),
        ),
    ]
    job = RenderJob(
        roots={"s": tmp_path / "src"}, out=tmp_path / "out", spec=RenderSpec(format="png")
    )
    done, bad, problems = render_items(items, job, progress=False)
    assert [i.item_id for i in done] == ["good"] and problems == []
    reasons = {b["item_id"]: b["reason"] for b in bad}
    assert set(reasons) == {"outside", "flipped", "empty"}
    assert (
        "outside" in reasons["outside"]
        and "x2" in reasons["flipped"]
        and "empty" in reasons["empty"]
    )
    rendered = load_rgb(tmp_path / "out" / done[0].images[0].removeprefix("render://"))
    clean = load_rgb(tmp_path / "src" / "a.jpg")
    assert (rendered[10, 20] == [255, 0, 0]).all() and (rendered[20, 20] == clean[20, 20]).all()
    assert (tmp_path / "src" / "a.jpg").read_bytes() == before  # the original is never touched


def test_coordinates_follow_the_resize(tmp_path):
    write_jpeg(tmp_path / "src" / "a.jpg", 2, size_wh=(400, 200))
    item = _item(
        "c",
        "coord",
        DrawnShape(0, "text", "polyp", "red", bbox=(100, 50, 200, 150)),
        question="What is at {box}?",
        coord_format="abs",
    )
    job = RenderJob(
        roots={"s": tmp_path / "src"},
        out=tmp_path / "out",
        spec=RenderSpec(format="png", max_side=200),
    )
    (done,), bad, _ = render_items([item], job, progress=False)
    assert not bad and done.question == "What is at [50, 25, 100, 75]?"
    assert done.images[0].startswith("render://")  # the resized clean image is what the model sees
    assert load_rgb(tmp_path / "out" / done.images[0].removeprefix("render://")).shape == (
        100,
        200,
        3,
    )


def test_workers_render_the_same_bytes(tmp_path):
    write_jpeg(tmp_path / "src" / "a.jpg", 3, size_wh=(80, 60))
    items = [
        _item(f"i{k}", "box", DrawnShape(0, "box", "polyp", "red", bbox=(k, k, k + 20, k + 20)))
        for k in range(150)
    ]
    outs = []
    for workers, name in ((1, "one"), (2, "two")):
        job = RenderJob(roots={"s": tmp_path / "src"}, out=tmp_path / name, spec=RenderSpec())
        done, _, _ = render_items(items, job, workers=workers, progress=False)
        outs.append(
            (done, sorted((p.name, p.read_bytes()) for p in (tmp_path / name / "images").iterdir()))
        )
    assert outs[0] == outs[1]


def test_grounding_options_follow_the_resize(tmp_path):
    write_jpeg(tmp_path / "src" / "a.jpg", 4, size_wh=(400, 200))
    options = (
        "[100, 50, 200, 150]",
        "[250, 20, 350, 120]",
        "[10, 100, 110, 198]",
        "[0, 0, 90, 90]",
    )
    item = Item(
        "vg",
        "B",
        "C",
        "Visual Grounding",
        "Visual Grounding",
        "s",
        ("s:a",),
        (source_ref("s", "a.jpg"),),
        "Where is the polyp?",
        options,
        "A",
        options[0],
        prompt_level="image",
        answer_bbox=(100, 50, 200, 150),
        coord_format="abs",
    )
    job = RenderJob(
        roots={"s": tmp_path / "src"},
        out=tmp_path / "out",
        spec=RenderSpec(format="png", max_side=200),
    )
    (done,), _, _ = render_items([item], job, progress=False)
    assert done.options[0] == "[50, 25, 100, 75]" and done.gt == done.options[0]
    assert done.answer_bbox == (50.0, 25.0, 100.0, 75.0) and len(set(done.options)) == 4


# --- a chunk in three passes --------------------------------------------------------------


def _chunk_sources(root):
    """The sources of test_channels (JPEG, PNG, grey, RGBA, a DICOM named .png, a broken
    JPEG, all 56 x 40) and a JPEG whose EXIF orientation swaps its header's size; for the
    resize, a JPEG, a PNG and a turned JPEG of 140 x 100."""
    from PIL import Image

    from .render.test_channels import _write_sources

    names = _write_sources(root)
    rng = np.random.default_rng(12)
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees on display: cv2 decodes it turned
    Image.fromarray(rng.integers(0, 256, (40, 56, 3), dtype=np.uint8)).save(
        root / "turned.jpg", exif=exif.tobytes()
    )
    big = rng.integers(0, 256, (100, 140, 3), dtype=np.uint8)
    cv2.imwrite(str(root / "big.jpg"), big)
    cv2.imwrite(str(root / "big.png"), big)
    Image.fromarray(big).save(root / "big-turned.jpg", exif=exif.tobytes())
    return [*names, "turned.jpg"], ["big.jpg", "big.png", "big-turned.jpg"]


def _chunk_items(names, size_hw=(40, 56)):
    from .render.test_channels import _stage_item

    h, w = size_hw
    disc = np.zeros((h, w), np.uint8)
    cv2.circle(disc, (0, h // 2), h * 3 // 10, 1, -1)  # touches the left border
    cv2.circle(disc, (w * 5 // 7, h * 3 // 10), h // 7, 1, -1)
    size_hw, counts = rle_encode(disc > 0)
    mask = MaskRef(size_hw=size_hw, counts=counts)
    box = (0.0, h / 5, w / 4, h * 4 / 5)
    items = []
    for color in ("green", "red"):
        for level in ("contour", "box", "mask", "point", "multi", "coord", "image"):
            kind = {"multi": "box", "coord": "text"}.get(level, level)
            shapes = [DrawnShape(0, kind, "a", color, bbox=box, mask=mask)]
            if level == "multi":
                shapes.append(DrawnShape(0, "box", "b", "blue", bbox=(30.0, 2.0, 50.0, 20.0)))
            for name in names:
                items.append(_stage_item(f"{level}-{color}-{name}", name, level, shapes))
    return items


def test_a_chunk_renders_what_single_items_render(tmp_path):
    """Read ahead, planned ahead, then painted: the same items, reasons, problems and bytes
    as rendering each item alone, for every level and file (including ones that fail, or
    whose header size is not the decoded size), at native size and resized."""
    names, big = _chunk_sources(tmp_path / "src")
    cases = [
        (RenderSpec(), _chunk_items(names)),
        (RenderSpec(format="png", max_side=64, thickness_px=3), _chunk_items(big, (100, 140))),
    ]
    assert len(cases[0][1]) > CHUNK  # two chunks
    for spec, items in cases:
        jobs = [
            RenderJob(roots={"s": tmp_path / "src"}, out=tmp_path / f"{k}-{spec.format}", spec=spec)
            for k in ("one", "chunk")
        ]
        single = [render_one(item, jobs[0]) for item in items]
        chunked = [
            r
            for i in range(0, len(items), CHUNK)
            for r in _render_chunk((items[i : i + CHUNK], jobs[1]))
        ]
        assert chunked == single
        assert sum(r.item is None for r in single) >= 4  # broken, and the turned ones' masks
        assert sum(r.item is not None for r in single) > 20
        files = [
            sorted((p.name, p.read_bytes()) for p in (job.out / "images").iterdir()) for job in jobs
        ]
        assert files[0] == files[1] and len(files[0]) > 20
    # a file gone since the convert stage stops the stage either way, with the same error
    (missing,) = _chunk_items(["missing.jpg"])[:1]
    with pytest.raises(FileNotFoundError, match="missing.jpg"):
        render_one(missing, jobs[0])
    with pytest.raises(FileNotFoundError, match="missing.jpg"):
        _render_chunk(([missing], jobs[1]))


def test_a_header_size_that_is_not_the_decoded_size_is_planned_again(tmp_path, monkeypatch):
    """A header that says another size than the decoded pixels (EXIF orientation, which
    plain headers never carry, or a lying file): the plan made for it is dropped."""
    from medvqa_build.stages import render as render_stage

    names, _ = _chunk_sources(tmp_path / "src")
    items = _chunk_items(names[:2])
    job = RenderJob(roots={"s": tmp_path / "src"}, out=tmp_path / "out", spec=RenderSpec())
    want = [render_stage.render_one(item, job) for item in items]
    monkeypatch.setattr(render_stage, "plain_header_size", lambda head: (40, 56))  # turned
    planned = []
    real = render_stage._plan_ahead
    monkeypatch.setattr(
        render_stage, "_plan_ahead", lambda *a: real(*a) or planned.append(a[2].strokes)
    )
    assert render_stage._render_chunk((items, job)) == want
    assert any(planned)


def test_a_chunk_holds_at_most_the_read_ahead_bytes(tmp_path, monkeypatch):
    from medvqa_build.stages import render as render_stage

    names, _ = _chunk_sources(tmp_path / "src")
    items = [i for i in _chunk_items(names) if i.prompt_level == "contour"]
    job = RenderJob(roots={"s": tmp_path / "src"}, out=tmp_path / "out", spec=RenderSpec())
    want = [render_stage.render_one(item, job) for item in items]
    read = []
    real = render_stage._read_ahead
    monkeypatch.setattr(render_stage, "READ_AHEAD_BYTES", 1)  # the first file only
    monkeypatch.setattr(
        render_stage, "_read_ahead", lambda item, job: read.append(item) or real(item, job)
    )
    assert render_stage._render_chunk((items, job)) == want
    assert read == items[:1]


def test_the_stage_catches_a_contour_drawn_off_its_mask(tmp_path, monkeypatch):
    """A stroke buffer shifted six pixels (a renderer fault): the item is rendered, and the
    stage reports the alignment problem, planned ahead or not."""
    from medvqa_build.render import contour

    write_jpeg(tmp_path / "src" / "a.jpg", 5, size_wh=(80, 60))
    disc = np.zeros((60, 80), np.uint8)
    cv2.circle(disc, (40, 30), 12, 1, -1)
    size, counts = rle_encode(disc > 0)
    shape = DrawnShape(0, "contour", "polyp", "red", mask=MaskRef(size_hw=size, counts=counts))
    real = contour.plan_contour_mark

    def shifted(*args):
        stroke = real(*args)
        return contour.buffer_stroke(
            stroke.shapes,
            stroke.decoded,
            stroke.reach,
            np.roll(stroke.pixels, 6, axis=1),
            stroke.color_px,
            stroke.outlined,
        )

    monkeypatch.setattr(contour.ContourRenderer, "plan_mark", staticmethod(shifted))
    job = RenderJob(roots={"s": tmp_path / "src"}, out=tmp_path / "out", spec=RenderSpec())
    items = [_item(f"c{k}", "contour", shape) for k in range(3)]
    done, bad, problems = render_items(items, job, progress=False)  # planned ahead
    assert len(done) == 3 and not bad
    assert {p.item_id for p in problems} == {"c0", "c1", "c2"}
    assert {p.check for p in problems} == {"alignment"}
    assert any("outside the recorded prompt geometry" in p.message for p in problems)
    alone = render_one(items[0], job)  # planned after decoding
    assert alone.item is not None and alone.problems == tuple(
        p for p in problems if p.item_id == "c0"
    )


def test_shapes_planned_at_the_image_level_are_drawn_by_their_kind(tmp_path):
    """A reference box planned on an ``image``-level item (MedSG's red box) is drawn by the
    ``box`` renderer; shapes of two kinds on one image are quarantined with the reason; the
    item table names the kinds so the render stage's address covers their renderers."""
    write_jpeg(tmp_path / "src" / "a.jpg", 1, size_wh=(80, 60))
    box = DrawnShape(0, "box", "polyp", "red", bbox=(10, 10, 40, 30))
    point = DrawnShape(0, "point", "polyp", "red", point=(20.0, 20.0))
    items = [
        _item("ref", "image", box),
        _item("mixed", "image", box).replace(prompt_geometry=(box, point)),
        _item("clean", "image", box).replace(prompt_geometry=()),
    ]
    assert [draw_kind(i, list(i.prompt_geometry)) for i in (items[0], items[2])] == ["box", "image"]
    job = RenderJob(
        roots={"s": tmp_path / "src"}, out=tmp_path / "out", spec=RenderSpec(format="png")
    )
    done, bad, problems = render_items(items, job, progress=False)
    assert [i.item_id for i in done] == ["ref", "clean"] and problems == []
    assert [b["item_id"] for b in bad] == ["mixed"] and "kinds ['box', 'point']" in bad[0]["reason"]
    ref, clean = done
    assert ref.images[0] == "render://images/ref_0.png" and ref.prompt_level == "image"
    (drawn,) = ref.prompt_geometry
    assert drawn.kind == "box" and drawn.bbox == box.bbox and drawn.thickness_px == 2
    pixels = load_rgb(tmp_path / "out" / "images" / "ref_0.png")
    assert tuple(pixels[10, 10]) == (255, 0, 0)
    assert clean.images == items[2].images  # nothing planned: the source file itself
    with ItemWriter(tmp_path / "items.parquet") as writer:
        for item in items:
            writer.add(item)
    table = ItemTable(tmp_path / "items.parquet")
    assert table.shape_kinds("image") == ["box", "point"] and table.shape_kinds("box") == []
