"""MedSG difference grounding: ``Registered_Diff`` (a slice and a copy with a synthetic local
change) and ``Non_Registered_Diff`` (the same, the copy also moved by a known affine).

MedSG-Bench's pairs are an original slice (``_ori_`` in the file name) and an edited copy of
the same case and slice id, not longitudinal scans (reference/spine_medsg.md B.2, B.3). The
change here is a smooth blob of brighter or darker tissue; its box is the tight box of the
pixels that differ, and :func:`check_local_change` proves no pixel changed outside it.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from ..geometry import mask_to_xyxy
from ..records import Sample
from .base import TASKS, Candidate, GenContext, ItemProblem
from .columns import Columns, first_label_or_modality
from .medsg_common import BoxInt, MedSGTask, resize_rgb, root_for, sample_rgb

DIFF_TEMPLATES = (
    "Compare these two images carefully and give me the coordinates of their difference.",
    "The second image differs from the first in one local area. Find that area.",
    "Two images of the same slice are shown; one region has changed. Locate the change.",
)


def changed_mask(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Pixels where any channel differs."""
    return np.any(before != after, axis=-1)


def check_local_change(before: np.ndarray, after: np.ndarray, box: BoxInt) -> None:
    """ItemProblem unless some pixel changed, the box lies inside the image and no pixel
    outside the box changed."""
    h, w = before.shape[:2]
    x1, y1, x2, y2 = box
    if not (0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h):
        raise ItemProblem(f"change box {list(box)} lies outside the {w}x{h} image")
    diff = changed_mask(before, after)
    if not diff.any():
        raise ItemProblem("the synthetic change altered no pixel")
    outside = diff.copy()
    outside[y1:y2, x1:x2] = False
    if outside.any():
        raise ItemProblem("the synthetic change altered pixels outside its box")


def add_local_change(
    rgb: np.ndarray, rng: np.random.Generator, min_area_px: int = 30
) -> tuple[np.ndarray, BoxInt]:
    """A copy of ``rgb`` with one smooth elliptical blob brightened or darkened inside the
    tissue, and the tight box (x2/y2 exclusive) of the changed pixels."""
    h, w = rgb.shape[:2]
    grey = rgb.mean(axis=2)
    for _ in range(20):
        bw, bh = (int(rng.integers(max(6, s // 14), max(7, s // 5))) for s in (w, h))
        tissue = np.argwhere(grey[bh // 2 : h - bh // 2, bw // 2 : w - bw // 2] > 20)
        if len(tissue):
            cy, cx = tissue[rng.integers(len(tissue))] + (bh // 2, bw // 2)
        else:
            cy = int(rng.integers(bh // 2, h - bh // 2))
            cx = int(rng.integers(bw // 2, w - bw // 2))
        yy, xx = np.mgrid[0:h, 0:w]
        dist = ((xx - cx) / (bw / 2)) ** 2 + ((yy - cy) / (bh / 2)) ** 2
        profile = np.clip(1.0 - dist, 0.0, 1.0)
        region_mean = float(grey[profile > 0].mean()) if (profile > 0).any() else 0.0
        delta = float(rng.uniform(50, 90)) * (-1.0 if region_mean > 128 else 1.0)
        after = np.clip(rgb.astype(np.float32) + (delta * profile)[..., None], 0, 255)
        after = np.round(after).astype(np.uint8)
        diff = changed_mask(rgb, after)
        if int(diff.sum()) >= min_area_px:
            box = tuple(int(v) for v in mask_to_xyxy(diff))  # type: ignore[arg-type]
            check_local_change(rgb, after, box)  # type: ignore[arg-type]
            return after, box  # type: ignore[return-value]
    raise ItemProblem("no synthetic change of enough pixels could be placed")


def random_affine(size: int, rng: np.random.Generator) -> np.ndarray:
    """A small rigid-plus-scale transform about the centre: rotation 2-8 degrees, scale
    0.92-1.08, shift 3-8 % of the side, each with a random sign."""
    angle = float(rng.uniform(2, 8)) * rng.choice([-1, 1])
    scale = float(rng.uniform(0.92, 1.08))
    m = cv2.getRotationMatrix2D((size / 2, size / 2), angle, scale)
    m[:, 2] += rng.uniform(0.03, 0.08, 2) * size * rng.choice([-1, 1], 2)
    return m


def warp(rgb: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    h, w = rgb.shape[:2]
    return cv2.warpAffine(
        rgb,
        matrix,
        (w, h),
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=(0, 0, 0),
    )


def shifted_change(
    rgb: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, BoxInt, np.ndarray]:
    """``(second image, answer box in its pixels, affine)``: the change is made on the first
    image, then the changed image is warped; the box is where warp(first) and the second
    image differ, so it lies in the second image's coordinates."""
    h, w = rgb.shape[:2]
    for _ in range(10):
        changed, box = add_local_change(rgb, rng)
        matrix = random_affine(w, rng)
        moved_before, moved_after = warp(rgb, matrix), warp(changed, matrix)
        diff = changed_mask(moved_before, moved_after)
        # the change must stay whole inside the moved image (its corners map inside)
        x1, y1, x2, y2 = box
        corners = np.array([[x1, y1, 1], [x2, y1, 1], [x1, y2, 1], [x2, y2, 1]], dtype=float)
        mapped = corners @ matrix.T
        inside = bool(
            (mapped >= 1).all() and (mapped[:, 0] < w - 1).all() and (mapped[:, 1] < h - 1).all()
        )
        if inside and diff.any():
            new_box = tuple(int(v) for v in mask_to_xyxy(diff))
            check_local_change(moved_before, moved_after, new_box)  # type: ignore[arg-type]
            return moved_after, new_box, matrix  # type: ignore[return-value]
    raise ItemProblem("the moved change kept leaving the image")


class _DiffTask(MedSGTask):
    requires = frozenset()
    templates = DIFF_TEMPLATES
    per_sample = True  # one slice at a time: the pool is streamed
    registered: bool = True

    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        # one item per slice; balanced over the slice's first structure (or its modality)
        return [Candidate(s, s.labels[0] if s.labels else s.modality) for s in samples]

    plan_columns = ("labels",)

    def column_candidates(self, batch, pool) -> Columns:
        """:meth:`candidates` from the ``labels`` and ``modality`` columns."""
        return first_label_or_modality(batch, pool)

    def build(self, cand: Candidate, ctx: GenContext) -> dict:
        rgb = resize_rgb(sample_rgb(cand.sample, root_for(ctx, cand.sample)), self.size)
        if self.registered:
            second, box = add_local_change(rgb, ctx.rng)
        else:
            second, box, _ = shifted_change(rgb, ctx.rng)
        return {"images": [rgb, second], "box": box, "target": 1}


@TASKS.register("Registered_Diff")
class RegisteredDiff(_DiffTask):
    name = "Registered_Diff"
    registered = True


@TASKS.register("Non_Registered_Diff")
class NonRegisteredDiff(_DiffTask):
    name = "Non_Registered_Diff"
    registered = False
