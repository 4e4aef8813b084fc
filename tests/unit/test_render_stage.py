"""The render stage on real items: bad geometry is quarantined with a reason, coordinates in
the question follow the resized image, and the clean source image is never modified."""

import numpy as np

from medvqa_build.geometry import rle_encode
from medvqa_build.images import source_ref
from medvqa_build.media.image import load_rgb
from medvqa_build.recipe import RenderSpec
from medvqa_build.records import DrawnShape, Item, MaskRef
from medvqa_build.render_stage import RenderJob, render_items

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
