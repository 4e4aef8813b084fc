"""Distractor boxes for region selection / grounding: similar size, elsewhere, low overlap.

EndoBench's distractors have "similar dimensions but overlap below a defined threshold"
(reference/endobench.md 1.4). Boxes are integer xyxy pixels with x2/y2 exclusive.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..geometry import BoxXYXY, box_problem, iou


def sample_distractor_boxes(
    target_xyxy: Sequence[float],
    width: int,
    height: int,
    n: int,
    rng: np.random.Generator,
    *,
    max_iou: float = 0.1,
    avoid: Sequence[Sequence[float]] = (),
    size_jitter: float = 0.2,
    max_tries: int = 2000,
    valid_mask: np.ndarray | None = None,
) -> list[BoxXYXY]:
    """``n`` boxes inside the image, each ``size_jitter``-close in width and height to the target,
    with IoU below ``max_iou`` to the target, to every ``avoid`` box and to each other.

    ``valid_mask`` (bool, H x W), when given, must be True at each box's centre pixel: e.g. the
    endoscope's circular field of view, so no distractor sits in the black corners.

    Raises ValueError when ``max_tries`` draws do not find them (the caller quarantines the item).
    """
    problem = box_problem(target_xyxy, width, height)
    if problem:
        raise ValueError(f"target {problem}")
    if n < 0 or not 0.0 <= size_jitter < 1.0:
        raise ValueError(f"need n >= 0 and 0 <= size_jitter < 1, got n={n}, {size_jitter=}")
    if valid_mask is not None and valid_mask.shape != (height, width):
        raise ValueError(f"valid_mask is {valid_mask.shape} (HxW), image is {(height, width)}")
    tx1, ty1, tx2, ty2 = (float(v) for v in target_xyxy)
    tw, th = tx2 - tx1, ty2 - ty1
    taken: list[BoxXYXY] = [(tx1, ty1, tx2, ty2)] + [tuple(map(float, b)) for b in avoid]
    found: list[BoxXYXY] = []
    for _ in range(max_tries):
        if len(found) == n:
            break
        jitter_w, jitter_h = rng.uniform(1 - size_jitter, 1 + size_jitter, size=2)
        bw = int(min(width, max(1, round(tw * jitter_w))))
        bh = int(min(height, max(1, round(th * jitter_h))))
        x1 = int(rng.integers(0, width - bw + 1))
        y1 = int(rng.integers(0, height - bh + 1))
        box = (float(x1), float(y1), float(x1 + bw), float(y1 + bh))
        if valid_mask is not None and not valid_mask[y1 + (bh - 1) // 2, x1 + (bw - 1) // 2]:
            continue
        if all(iou(box, other) < max_iou for other in taken + found):
            found.append(box)
    if len(found) < n:
        raise ValueError(
            f"found {len(found)} of {n} distractor boxes of about {tw:g}x{th:g} px with IoU < "
            f"{max_iou} in a {width}x{height} image after {max_tries} tries; the target is too "
            "large for the image or max_iou too strict"
        )
    return found
