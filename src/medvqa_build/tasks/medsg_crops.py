"""MedSG grounding from crops: ``concept`` (a cut-out of a structure located in the full
image) and ``patch`` (a source image and 3-4 of its crops; locate the k-th crop).

MedSG-Bench's concept items pair a derived image of one structure with the original slice of
the same case, the answer box in the original; patch items show a source image followed by
``_0 .. _3`` crops (reference/spine_medsg.md B.2).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..geometry import iou
from ..records import Sample
from .base import TASKS, Candidate, GenContext, ItemProblem
from .columns import Columns, first_label_or_modality, run_ordinals
from .medsg_common import (
    ORDINALS,
    BoxInt,
    MedSGTask,
    box_of,
    region_mask,
    resize_mask,
    resize_rgb,
    root_for,
    sample_rgb,
)


def concept_image(rgb: np.ndarray, mask: np.ndarray, margin: float) -> np.ndarray:
    """The structure alone: pixels outside its mask blacked out, cropped to its box plus a
    ``margin`` (fraction of the box's longer side)."""
    ys, xs = np.nonzero(mask)
    pad = int(round(margin * max(xs.max() - xs.min() + 1, ys.max() - ys.min() + 1)))
    y1, y2 = max(0, ys.min() - pad), min(mask.shape[0], ys.max() + 1 + pad)
    x1, x2 = max(0, xs.min() - pad), min(mask.shape[1], xs.max() + 1 + pad)
    cut = np.where(mask[..., None], rgb, 0).astype(np.uint8)
    return cut[y1:y2, x1:x2]


@TASKS.register("concept")
class Concept(MedSGTask):
    name = "concept"
    per_sample = True  # one sample at a time: the pool is streamed
    default_params = {"margin": 0.15}
    templates = (
        "The first image shows one object cut out of a medical image. Find where this object "
        "is located in the {ordinal} image.",
        "Locate the object shown alone in the first image within the {ordinal} image.",
    )

    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        return self.region_candidates(samples)

    plan_columns = ("regions.list.element.label", "regions.list.element.bbox")

    def column_candidates(self, batch, pool) -> Columns:
        """:meth:`candidates` from the ``regions`` column (:mod:`.columns`)."""
        at, labels = self.column_region_candidates(batch, pool)
        return at, run_ordinals(at), labels

    def build(self, cand: Candidate, ctx: GenContext) -> dict:
        s, size = cand.sample, self.size
        rgb = sample_rgb(s, root_for(ctx, s))
        mask = region_mask(cand.region, s)
        if mask.shape != rgb.shape[:2] or not mask.any():
            raise ItemProblem(f"{s.sample_id}: mask of {cand.truth!r} does not fit the image")
        concept = resize_rgb(concept_image(rgb, mask, float(self.param("margin"))), size)
        box = box_of(resize_mask(mask, size), f"{cand.truth}")
        return {"images": [concept, resize_rgb(rgb, size)], "box": box, "target": 1}


def crop_boxes(
    grey: np.ndarray, n: int, rng: np.random.Generator, min_std: float = 8.0
) -> list[BoxInt]:
    """``n`` square-ish boxes of 20-35 % of the side, textured (grey std >= ``min_std``) and
    hardly overlapping (IoU < 0.1), so every crop has one clear place in the source."""
    h, w = grey.shape
    boxes: list[BoxInt] = []
    for _ in range(400):
        bw, bh = (int(rng.uniform(0.2, 0.35) * s) for s in (w, h))
        x1, y1 = int(rng.integers(0, w - bw + 1)), int(rng.integers(0, h - bh + 1))
        box = (x1, y1, x1 + bw, y1 + bh)
        if grey[y1 : y1 + bh, x1 : x1 + bw].std() < min_std:
            continue
        if all(iou(box, b) < 0.1 for b in boxes):
            boxes.append(box)
            if len(boxes) == n:
                return boxes
    raise ItemProblem(f"could not place {n} textured, separate crops")


@TASKS.register("patch")
class Patch(MedSGTask):
    requires = frozenset()
    name = "patch"
    per_sample = True  # one sample at a time: the pool is streamed
    default_params = {"n_patches": 3}
    templates = (
        "You are given a source image followed by its {n_patches} regions. Please locate the "
        "{which} region picture in the source image.",
        "The first image is a source image; the next {n_patches} images are crops of it. Find "
        "where the {which} crop comes from in the source image.",
    )

    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        return [Candidate(s, s.labels[0] if s.labels else s.modality) for s in samples]

    plan_columns = ("labels",)

    def column_candidates(self, batch, pool) -> Columns:
        """:meth:`candidates` from the ``labels`` and ``modality`` columns."""
        return first_label_or_modality(batch, pool)

    def build(self, cand: Candidate, ctx: GenContext) -> dict:
        n = int(self.param("n_patches"))
        if not 3 <= n <= 5:
            raise ItemProblem(f"patch: n_patches must be 3..5, got {n}")
        src = resize_rgb(sample_rgb(cand.sample, root_for(ctx, cand.sample)), self.size)
        boxes = crop_boxes(src.mean(axis=2), n, ctx.rng)
        crops = [resize_rgb(src[y1:y2, x1:x2], self.size) for x1, y1, x2, y2 in boxes]
        k = int(ctx.rng.integers(n))
        return {
            "images": [src, *crops],
            "box": boxes[k],
            "target": 0,
            "fields": {"n_patches": n, "which": ORDINALS[k]},
        }
