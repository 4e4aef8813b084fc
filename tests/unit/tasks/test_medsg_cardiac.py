"""MedSG generators on the issue-10 sources: object_tracking through ACDC short-axis stacks,
multi_view reformats of ACDC and AbdomenCT-1K volumes, crossmodal pairs of one structure seen
by MRI (ACDC) and ultrasound (CAMUS); every answer box is checked against its mask."""

import pytest

from medvqa_build.api import load_source
from medvqa_build.geometry import mask_to_xyxy
from medvqa_build.recipe import Recipe
from medvqa_build.sources import get_source
from medvqa_build.stages.generate import generate_items
from medvqa_build.tasks.medsg_common import ORDINALS, find_region, region_mask, resize_mask

from ...fixtures.sources import abdomenct_1k, acdc, camus

SIZE = 336
TASKS = ("object_tracking", "multi_view", "crossmodal")


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("medsg-cardiac")
    roots = {
        "acdc": acdc.write(tmp / "acdc"),
        "camus": camus.write(tmp / "camus"),
        "abdomenct-1k": abdomenct_1k.write(tmp / "abdomenct-1k"),
    }
    samples = [s for sid, root in roots.items() for s in load_source(sid, root).samples]
    tasks = [
        {
            "name": key,
            "generator": key,
            "category": "Sequence Grounding",
            "task": key,
            "quota": 12,
            "params": {"n_images": 3} if key == "object_tracking" else {},
        }
        for key in TASKS
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
    result = generate_items(recipe, samples, manifests, progress=False, out_dir=tmp / "out")
    return result, {s.sample_id: s for s in samples}


def _items(result, task):
    return [i for i in result.items if i.task == task]


def _box(sample, label):
    return mask_to_xyxy(resize_mask(region_mask(find_region(sample, label), sample), SIZE))


def test_object_tracking_follows_a_structure_through_an_acdc_stack(build):
    result, samples = build
    items = _items(result, "object_tracking")
    assert "acdc" in {i.source for i in items}, result.dropped[:5]
    for item in items:
        seq = [samples[sid] for sid in item.sample_ids]
        assert len({s.image for s in seq}) == 1  # one frame's stack (ED or ES)
        assert [s.slice.index for s in seq] == sorted(s.slice.index for s in seq)
        last = seq[-1]
        assert any(_box(last, r.label) == tuple(item.answer_bbox) for r in last.regions)


def test_multi_view_reformats_the_volumes(build):
    result, _ = build
    sources = {i.source for i in _items(result, "multi_view")}
    assert {"acdc", "abdomenct-1k"} <= sources, result.dropped[:5]


def test_crossmodal_pairs_mri_and_ultrasound_hearts(build):
    result, samples = build
    pairs = []
    for item in _items(result, "crossmodal"):
        modalities = [samples[sid].modality for sid in item.sample_ids]
        pairs.append(tuple(sorted(set(modalities))))
        target = samples[item.sample_ids[-1]]
        assert any(_box(target, r.label) == tuple(item.answer_bbox) for r in target.regions)
        assert ORDINALS[len(item.images) - 1] in item.question
    assert ("mri", "ultrasound") in pairs, (pairs, result.dropped[:5])


def test_multi_view_leaves_single_frame_images_alone(build):
    result, _ = build
    assert "camus" not in {i.source for i in _items(result, "multi_view")}
