"""MedSG consistency grounding by meaning: ``crossmodal`` (a red box in a reference image; the
corresponding structure in an image of another modality or MR sequence) and ``referring`` (a
structure named in text, found among several images).

MedSG-Bench pairs the same structure across datasets and modalities (AbdomenCT-1K spleen with
AMOS MRI spleen) and across BraTS sequences of one case; referring names bare structures in
``<|object_ref_start|>...<|object_ref_end|>`` (reference/spine_medsg.md B.2).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from ..geometry import format_box
from ..records import Sample
from .base import TASKS, Candidate, GenContext, ItemProblem
from .medsg_common import (
    ORDINALS,
    MedSGTask,
    box_of,
    draw_red_box,
    find_region,
    region_mask,
    resize_mask,
    resize_rgb,
    root_for,
    sample_rgb,
)


class _PoolIndex:
    """The task's pool by structure label, built once per pool."""

    def __init__(self, pool: Sequence[Sample]):
        self.pool = tuple(pool)
        self.by_label: dict[str, list[Sample]] = defaultdict(list)
        for s in self.pool:
            for label in {r.label for r in s.regions}:
                self.by_label[label].append(s)


class _PoolTask(MedSGTask):
    _index: _PoolIndex | None = None

    def index(self, ctx: GenContext) -> _PoolIndex:
        if self._index is None or self._index.pool is not ctx.pool:
            self._index = _PoolIndex(ctx.pool)
        return self._index

    def fillers(
        self, ctx: GenContext, anchor: Sample, label: str, k: int, other_modality: bool
    ) -> list[Sample]:
        """``k`` samples of other groups that do not show ``label`` (so the answer is unique)."""
        pool = [
            s
            for s in ctx.pool
            if s.group_id != anchor.group_id
            and find_region(s, label) is None
            and s.regions
            and (not other_modality or s.modality != anchor.modality)
        ]
        if len(pool) < k:
            raise ItemProblem(f"only {len(pool)} images without {label!r} to add, need {k}")
        return [pool[i] for i in sorted(ctx.rng.choice(len(pool), size=k, replace=False))]

    def pixels(self, ctx: GenContext, s: Sample, label: str | None):
        rgb = resize_rgb(sample_rgb(s, root_for(ctx, s)), self.size)
        if label is None:
            return rgb, None
        return rgb, resize_mask(region_mask(find_region(s, label), s), self.size)


@TASKS.register("crossmodal")
class Crossmodal(_PoolTask):
    name = "crossmodal"
    default_params = {"n_images": 2}
    templates = (
        "The following are {n} images for you to consider. For the area marked by the red "
        "bounding box in the first image, identify and locate the corresponding area in the "
        "{ordinal} image that serves a similar function or shares a similar meaning.",
        "The first image marks a structure with a red box ({ref_box}). Locate the same "
        "structure in the {ordinal} image, which was acquired differently.",
    )

    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        return self.region_candidates(samples)

    def partner(self, ctx: GenContext, a: Sample, label: str) -> Sample:
        """Same case and slice in another MR sequence when there is one (BraTS), else the same
        structure in another modality (another dataset, another patient)."""
        with_label = self.index(ctx).by_label.get(label, [])
        same_case = [
            s
            for s in with_label
            if s.group_id == a.group_id
            and s.slice == a.slice
            and s.attributes.get("sequence", "") != a.attributes.get("sequence", "")
        ]
        other = same_case or [s for s in with_label if s.modality != a.modality]
        if not other:
            raise ItemProblem(f"no image of {label!r} in another modality or sequence")
        return other[int(ctx.rng.integers(len(other)))]

    def build(self, cand: Candidate, ctx: GenContext) -> dict:
        n = int(self.param("n_images"))
        if not 2 <= n <= 4:
            raise ItemProblem(f"crossmodal: n_images must be 2..4, got {n}")
        a, label = cand.sample, cand.truth
        b = self.partner(ctx, a, label)
        order = self.fillers(ctx, a, label, n - 2, other_modality=False)
        target = 1 + int(ctx.rng.integers(n - 1))
        order.insert(target - 1, b)
        ref, ref_mask = self.pixels(ctx, a, label)
        ref_box = box_of(ref_mask, f"{label} in the reference image")
        ref, shape0 = draw_red_box(ref, ref_box, label)
        images = [ref]
        for s in order:
            images.append(self.pixels(ctx, s, None)[0])
        _, target_mask = self.pixels(ctx, b, label)
        return {
            "images": images,
            "box": box_of(target_mask, f"{label} in the target image"),
            "target": target,
            "shapes": (shape0,),
            "samples": (a, *order),
            "fields": {"ref_box": format_box(ref_box, ctx.spec.coord_format, self.size, self.size)},
        }


@TASKS.register("referring")
class Referring(_PoolTask):
    name = "referring"
    default_params = {"n_images": 2, "ref_tokens": True}
    templates = (
        "Please find the bounding box coordinates for the area described by: {ref}.{where}",
        "Identify the bounding box of the region described by the following expression: "
        "{ref}.{where}",
    )

    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        return self.region_candidates(samples)

    def build(self, cand: Candidate, ctx: GenContext) -> dict:
        n = int(self.param("n_images"))
        if not 1 <= n <= 6:
            raise ItemProblem(f"referring: n_images must be 1..6, got {n}")
        a, label = cand.sample, cand.truth
        order = self.fillers(ctx, a, label, n - 1, other_modality=False)
        target = int(ctx.rng.integers(n))
        order.insert(target, a)
        images = [self.pixels(ctx, s, None)[0] for s in order]
        _, mask = self.pixels(ctx, a, label)
        ref = (
            f"<|object_ref_start|>{label}<|object_ref_end|>" if self.param("ref_tokens") else label
        )
        where = (
            f" The area is in exactly one of the {n} images; say which, then give its box."
            if n > 1
            else ""
        )
        prefix = f"It's in the {ORDINALS[target]} image. " if n > 1 else ""
        return {
            "images": images,
            "box": box_of(mask, label),
            "target": target,
            "samples": tuple(order),
            "fields": {"ref": ref, "where": where},
            "gt_prefix": prefix,
        }
