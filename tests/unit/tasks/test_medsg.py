"""The eight MedSG generators on NIfTI replicas (msd CT + brats MRI): every item's answer box is
checked against the mask (or the synthetic change) it was taken from."""

import re

import cv2
import numpy as np
import pytest

from medvqa_build.api import load_source
from medvqa_build.geometry import format_box, mask_to_xyxy
from medvqa_build.media.refs import resolve_image
from medvqa_build.media.volume import load_label_slice
from medvqa_build.recipe import Recipe, RenderSpec
from medvqa_build.records import Region
from medvqa_build.render import Mark, render
from medvqa_build.sources import get_source
from medvqa_build.stages.generate import generate_items
from medvqa_build.stages.render import RenderJob, render_items
from medvqa_build.tasks.medsg_common import ORDINALS, find_region, region_mask, resize_mask
from medvqa_build.tasks.medsg_diff import changed_mask, check_local_change, shifted_change, warp

from ...fixtures.sources import brats, msd

TASK_KEYS = (
    "Registered_Diff",
    "Non_Registered_Diff",
    "multi_view",
    "object_tracking",
    "concept",
    "patch",
    "crossmodal",
    "referring",
)
SIZE = 336


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("medsg")
    roots = {"msd": msd.write(tmp / "msd"), "brats": brats.write(tmp / "brats")}
    samples = [s for sid, root in roots.items() for s in load_source(sid, root).samples]
    tasks = [
        {
            "name": key,
            "generator": key,
            "category": "Sequence Grounding",
            "task": key,
            "quota": 3,
            "params": {"n_images": 3} if key == "object_tracking" else {},
        }
        for key in TASK_KEYS
    ]
    recipe = Recipe.from_dict(
        {
            "name": "t",
            "benchmark": "MedSG-test",
            "seed": 1,
            "sources": [{"id": k, "root": str(v)} for k, v in roots.items()],
            "tasks": tasks,
        }
    )
    manifests = {k: get_source(k).manifest for k in roots}
    out = tmp / "out"
    result = generate_items(recipe, samples, manifests, progress=False, out_dir=out)
    return result, {s.sample_id: s for s in samples}, roots, out


def _png(out, ref):
    img = cv2.imread(str(out / ref.removeprefix("generated://")), cv2.IMREAD_COLOR)
    assert img is not None, ref
    return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)


def _target(item) -> int:
    return ORDINALS.index(re.search(r"of the (\w+) image \(", item.question).group(1))


def _region_box(sample, label):
    return mask_to_xyxy(resize_mask(region_mask(find_region(sample, label), sample), SIZE))


def test_every_task_makes_items(build):
    result, _, _, _ = build
    made = {i.task for i in result.items}
    assert made == set(TASK_KEYS), (made, result.dropped[:5])
    for item in result.items:
        assert 2 <= len(item.images) <= 6 and item.options == ()
        x1, y1, x2, y2 = item.answer_bbox
        assert 0 <= x1 < x2 <= SIZE and 0 <= y1 < y2 <= SIZE
        assert item.answer == format_box(item.answer_bbox, "abs", SIZE, SIZE)
        assert "{" not in item.question and item.coord_format == "abs"


def test_answer_boxes_match_masks(build):
    result, samples, roots, out = build
    for item in result.items:
        images = [_png(out, r) for r in item.images]
        assert all(im.shape == (SIZE, SIZE, 3) for im in images)
        box = tuple(item.answer_bbox)
        target = _target(item)
        if item.task == "Registered_Diff":
            assert mask_to_xyxy(changed_mask(images[0], images[1])) == box
            check_local_change(images[0], images[1], tuple(int(v) for v in box))
        elif item.task == "patch":
            which = re.search(r"the (\w+) (?:region|crop)", item.question).group(1)
            k = ORDINALS.index(which)
            x1, y1, x2, y2 = (int(v) for v in box)
            crop = cv2.resize(images[0][y1:y2, x1:x2], (SIZE, SIZE), interpolation=cv2.INTER_LINEAR)
            assert target == 0 and np.array_equal(crop, images[1 + k])
        elif item.task in ("concept", "object_tracking", "crossmodal", "referring"):
            sample = samples[item.sample_ids[-1 if item.task == "concept" else target]]
            labels = [r.label for r in sample.regions]
            assert any(_region_box(sample, lab) == box for lab in labels), item.task
        elif item.task == "multi_view":
            sample = samples[item.sample_ids[0]]
            lab_path = roots[sample.source] / sample.attributes["label_volume"]
            boxes = set()
            for axis in ("coronal", "sagittal"):
                for index in range(40):
                    try:
                        plane = load_label_slice(lab_path, axis, index)
                    except Exception:
                        break
                    for v in np.unique(plane[plane > 0]):
                        boxes.add(mask_to_xyxy(resize_mask(plane == v, SIZE)))
            assert box in boxes


def test_reference_boxes_are_planned_and_the_render_stage_draws_them(build, tmp_path):
    """Generators write clean pixels and plan the reference image's red box; the render stage
    draws it (issue 34.5), the pixels the generators once drew themselves."""
    result, _, roots, out = build
    refs = [i for i in result.items if i.task in ("multi_view", "object_tracking", "crossmodal")]
    assert {i.task for i in refs} == {"multi_view", "object_tracking", "crossmodal"}
    for item in refs:
        (shape,) = item.prompt_geometry
        assert (shape.kind, shape.color, shape.image_index) == ("box", "red", 0)
        assert item.prompt_level == "image"
        x1, y1, _, _ = (int(v) for v in shape.bbox)
        assert tuple(_png(out, item.images[0])[y1, x1]) != (255, 0, 0)  # clean
    job = RenderJob(roots=roots, out=tmp_path, spec=RenderSpec(format="png"), generated_dir=out)
    done, bad, problems = render_items(refs, job, progress=False)
    assert bad == [] and problems == [] and len(done) == len(refs)
    for planned, item in zip(refs, done, strict=True):
        assert item.images[0].startswith("render://") and item.images[1:] == planned.images[1:]
        (drawn,) = item.prompt_geometry
        assert drawn.bbox == planned.prompt_geometry[0].bbox and drawn.thickness_px == 2
        clean = _png(out, planned.images[0])
        region = Region(label=drawn.label, bbox=drawn.bbox)
        expected = render("box", clean, [Mark(region, "red")]).image
        path = resolve_image(item.images[0], roots, tmp_path, out)
        rendered = cv2.cvtColor(cv2.imread(str(path), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
        assert np.array_equal(rendered, expected)
        x1, y1, _, _ = (int(v) for v in drawn.bbox)
        assert tuple(rendered[y1, x1]) == (255, 0, 0)


def test_non_registered_change_is_local_in_the_moved_frame():
    rng = np.random.default_rng(3)
    base = np.zeros((SIZE, SIZE, 3), np.uint8)
    cv2.circle(base, (168, 168), 120, (90, 90, 90), -1)
    for seed in range(5):
        second, box, matrix = shifted_change(base, np.random.default_rng(seed))
        moved = warp(base, matrix)
        assert mask_to_xyxy(changed_mask(moved, second)) == box
        check_local_change(moved, second, box)
        assert not np.array_equal(moved, base)  # the second image really moved
    assert rng is not None


def test_referring_names_the_image(build):
    result, _, _, _ = build
    for item in result.items:
        if item.task == "referring":
            assert "<|object_ref_start|>" in item.question
            assert item.gt.startswith(f"It's in the {ORDINALS[_target(item)]} image. ")


def test_object_tracking_asks_one_run_of_a_case_once_whatever_its_sequence(build, tmp_path):
    """Issue 32: BraTS's four MR sequences are co-registered, so one run of slices has one
    answer box in all of them; a second sequence of the run is a repeat (dropped, counted)."""
    _, samples, roots, _ = build
    spec = {"name": "ot", "generator": "object_tracking", "category": "Sequence Grounding",
            "task": "object_tracking", "quota": 200, "params": {"n_images": 3}}  # fmt: skip
    recipe = Recipe.from_dict(
        {
            "name": "t",
            "benchmark": "MedSG-test",
            "seed": 1,
            "sources": [{"id": k, "root": str(v)} for k, v in roots.items()],
            "tasks": [spec],
        }
    )
    manifests = {k: get_source(k).manifest for k in roots}
    result = generate_items(
        recipe, list(samples.values()), manifests, progress=False, out_dir=tmp_path
    )
    runs = [
        (samples[i.sample_ids[0]].group_id, samples[i.sample_ids[0]].slice.axis, i.gt)
        + tuple(samples[x].slice.index for x in i.sample_ids)
        for i in result.items
    ]
    assert runs and len(runs) == len(set(runs))
    assert any(samples[i.sample_ids[0]].source == "brats" for i in result.items)
    repeats = [d for d in result.dropped if d["reason"].startswith("repeat:")]
    assert repeats and result.repeats["ot"] == len(repeats)


def test_spread_places_each_items_pictures_at_a_random_place_and_size():
    """Issue 32: params.spread shrinks an item's pictures and places them on the canvas, the
    mask with them, so the answer box moves with the picture (not the anatomy's prior)."""
    from medvqa_build.tasks.medsg_common import place_mask, place_rgb, placement

    rng = np.random.default_rng(0)
    assert placement(0.0, SIZE, rng) is None
    places = [placement(0.5, SIZE, rng) for _ in range(200)]
    sides = np.array([p[0] for p in places])
    assert sides.min() >= SIZE // 2 and sides.max() <= SIZE and sides.std() > 30
    assert all(0 <= x <= SIZE - side and 0 <= y <= SIZE - side for side, x, y in places)
    mask = np.zeros((40, 40), bool)
    mask[10:20, 0:40] = True  # a band a quarter of the picture tall, the full width
    side, x, y = 200, 30, 100
    placed = place_mask(mask, SIZE, (side, x, y))
    assert mask_to_xyxy(placed) == (30, 150, 230, 200)
    rgb = np.full((40, 40, 3), 200, np.uint8)
    canvas = place_rgb(rgb, SIZE, (side, x, y))
    assert canvas.shape == (SIZE, SIZE, 3) and canvas[0, 0].tolist() == [0, 0, 0]
    assert canvas[y, x].tolist() == [200, 200, 200] and canvas[y + side, x].tolist() == [0, 0, 0]
    assert np.array_equal(place_mask(mask, SIZE, None), resize_mask(mask, SIZE))


def test_reference_box_questions_write_no_coordinates(build):
    """Issue 32.3: the reference box written in the text was the answer to copy (a tracked
    structure barely moves, a co-registered MR sequence has the same box, an orthogonal view
    shares an axis): those questions name the red box without its coordinates."""
    from medvqa_build.validate.blind_free import question_box

    result, _, _, _ = build
    asked = {"object_tracking": 0, "crossmodal": 0, "multi_view": 0}
    for item in result.items:
        if item.task in asked:
            assert np.isnan(question_box(item.question)[0]), item.question
            assert "red bounding box" in item.question or "red box" in item.question
            asked[item.task] += 1
    assert all(asked.values())
