"""Score grounding predictions against a build: IoU per item, mean IoU, Acc@0.5 and
IoU@0.3/0.7, the way MedSG-Bench reports them (reference/spine_medsg.md B.5).

The first box in a prediction is scored, an unparseable prediction scores IoU 0, and boxes
may come in any convention ``geometry.parse_box`` reads (absolute pixels, 0-1000, 0-1, Qwen
``<|box_start|>`` tags); ``convention="auto"`` applies MedSG's rule: numbers all <= 1 are
0-1 fractions, otherwise values above the image side are 0-1000, else absolute pixels.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from ..geometry import BoxXYXY, iou, parse_box
from ..records import Item

THRESHOLDS = (0.3, 0.5, 0.7)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def parse_prediction(
    text: str, width: int, height: int, convention: str = "auto"
) -> BoxXYXY | None:
    """The first box in ``text`` as xyxy pixel edges, or ``None`` when there is none."""
    try:
        if convention != "auto":
            return parse_box(text, convention, width, height)
        if "<|box_start|>" in text:
            return parse_box(text, "qwen", width, height)
        numbers = [float(v) for v in _NUMBER.findall(text)[:4]]
        if len(numbers) < 4:
            return None
        if max(numbers) <= 1.0:
            x1, y1, x2, y2 = numbers
            return (x1 * width, y1 * height, x2 * width, y2 * height)
        if max(numbers) > max(width, height):
            x1, y1, x2, y2 = numbers
            return (x1 * width / 1000, y1 * height / 1000, x2 * width / 1000, y2 * height / 1000)
        return tuple(numbers)  # type: ignore[return-value]
    except ValueError:
        return None


def summarize(ious: Sequence[float]) -> dict[str, float]:
    """``{"n", "mean_iou", "acc@0.5", "iou@0.3", "iou@0.5", "iou@0.7"}``, shares in [0, 1]."""
    n = len(ious)
    out = {"n": float(n), "mean_iou": sum(ious) / n if n else 0.0}
    for t in THRESHOLDS:
        out[f"iou@{t}"] = sum(v >= t for v in ious) / n if n else 0.0
    out["acc@0.5"] = out["iou@0.5"]
    return out


def score_items(
    items: Iterable[Item],
    predictions: Mapping[str, str],
    image_size: int = 336,
    convention: str = "auto",
) -> dict[str, dict[str, float]]:
    """Per task and ``"all"``: the summary of IoUs between each item's ``answer_bbox`` and the
    prediction for its ``item_id`` (missing or unparseable = IoU 0)."""
    by_task: dict[str, list[float]] = defaultdict(list)
    for item in items:
        if item.answer_bbox is None:
            continue
        box = parse_prediction(
            predictions.get(item.item_id, ""), image_size, image_size, convention
        )
        value = iou(box, item.answer_bbox) if box is not None else 0.0
        by_task[item.task].append(value)
        by_task["all"].append(value)
    return {task: summarize(values) for task, values in sorted(by_task.items())}
