"""Grounding scores: IoU of an answer with itself is 1, with a shifted box as computed by hand,
and predictions parse in any box convention."""

import pytest

from medvqa_build.eval.grounding import parse_prediction, score_items
from medvqa_build.geometry import iou
from medvqa_build.records import Item


def _item(item_id, box, task="referring"):
    return Item(
        item_id=item_id,
        benchmark="b",
        category="c",
        task=task,
        subtask=task,
        source="s",
        sample_ids=("s:1",),
        images=("generated://a.png",),
        question="q",
        options=(),
        answer="",
        gt="",
        answer_bbox=box,
    )


def test_iou_self_and_shifted():
    box = (100.0, 100.0, 140.0, 120.0)
    assert iou(box, box) == 1.0
    assert iou(box, (120.0, 100.0, 160.0, 120.0)) == pytest.approx(1 / 3)  # half overlap


@pytest.mark.parametrize(
    "text",
    [
        "[100, 100, 140, 120]",
        "<|box_start|>(100,100),(140,120)<|box_end|>",
        "It's in the first image. [0.2976, 0.2976, 0.4167, 0.3571]",
        "<box>[298, 298, 417, 357]</box>",
    ],
)
def test_any_convention_parses(text):
    box = parse_prediction(text, 336, 336)
    assert iou(box, (100, 100, 140, 120)) > 0.97


def test_score_items():
    items = [_item("a", (100.0, 100.0, 140.0, 120.0)), _item("b", (0.0, 0.0, 10.0, 10.0), "patch")]
    scores = score_items(items, {"a": "[100, 100, 140, 120]", "b": "no box here"})
    assert scores["all"]["mean_iou"] == pytest.approx(0.5)
    assert scores["all"]["acc@0.5"] == 0.5 and scores["patch"]["iou@0.3"] == 0.0
    assert scores["referring"]["iou@0.7"] == 1.0
