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

import numpy as np

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
    """The task's pool by structure label and by group, built once per pool, so that each
    item's partner and fillers are drawn from short lists instead of a scan of the whole
    pool (which made a MedSG build quadratic in its size). The draws are those of the scan:
    the same candidates in pool order and the same calls on the item's generator."""

    def __init__(self, pool: Sequence[Sample]):
        self.pool = tuple(pool)
        self.by_label: dict[str, list[Sample]] = defaultdict(list)
        self.positions: dict[str | None, list[int]] = defaultdict(list)  # group -> positions
        for i, s in enumerate(self.pool):
            for label in {r.label for r in s.regions}:
                self.by_label[label].append(s)
            self.positions[s.group_id].append(i)
        self._without: dict[str, np.ndarray] = {}
        self._by_case: dict[tuple[str, str | None], list[Sample]] = {}
        self._other_modality: dict[tuple[str, str], list[Sample]] = {}

    def without(self, label: str) -> np.ndarray:
        """Positions of the pool's samples with regions, none of them ``label``."""
        if label not in self._without:
            self._without[label] = np.array(
                [i for i, s in enumerate(self.pool) if s.regions and find_region(s, label) is None],
                np.int64,
            )
        return self._without[label]

    def of_group(self, label: str, group: str | None) -> list[Sample]:
        """The samples showing ``label`` in ``group`` (``by_label`` order)."""
        key = (label, group)
        if key not in self._by_case:
            groups: dict[str | None, list[Sample]] = defaultdict(list)
            for s in self.by_label.get(label, ()):
                groups[s.group_id].append(s)
            for g, members in groups.items():
                self._by_case[(label, g)] = members
            self._by_case.setdefault(key, [])
        return self._by_case[key]

    def not_of_modality(self, label: str, modality: str) -> list[Sample]:
        """The samples showing ``label`` in another modality (``by_label`` order)."""
        key = (label, modality)
        if key not in self._other_modality:
            self._other_modality[key] = [
                s for s in self.by_label.get(label, ()) if s.modality != modality
            ]
        return self._other_modality[key]


class _PoolTask(MedSGTask):
    _index: _PoolIndex | None = None

    def index(self, ctx: GenContext) -> _PoolIndex:
        if self._index is None or self._index.pool is not ctx.pool:
            self._index = _PoolIndex(ctx.pool)
        return self._index

    def fillers(
        self, ctx: GenContext, anchor: Sample, label: str, k: int, other_modality: bool
    ) -> list[Sample]:
        """``k`` samples of other groups that do not show ``label`` (so the answer is unique):
        a uniform draw without replacement from those samples in pool order."""
        if other_modality:
            return _fillers_by_scan(ctx, anchor, label, k)
        if k == 0:
            return []  # a draw of none: no number is taken from the generator
        index = self.index(ctx)
        eligible = index.without(label)
        # the anchor's group among them: skipped when a draw is mapped to a position
        mine = np.asarray(index.positions.get(anchor.group_id, ()), np.int64)
        at = np.searchsorted(eligible, mine)
        skipped = sorted(
            int(j) for j, p in zip(at, mine, strict=True) if j < len(eligible) and eligible[j] == p
        )
        n = len(eligible) - len(skipped)
        if n < k:
            raise ItemProblem(f"only {n} images without {label!r} to add, need {k}")
        out = []
        for j in sorted(ctx.rng.choice(n, size=k, replace=False)):
            p = int(j)
            for s in skipped:  # the j-th eligible position once the anchor's group is left out
                if s > p:
                    break
                p += 1
            out.append(index.pool[int(eligible[p])])
        return out

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
        index = self.index(ctx)
        same_case = [
            s
            for s in index.of_group(label, a.group_id)
            if s.slice == a.slice
            and s.attributes.get("sequence", "") != a.attributes.get("sequence", "")
        ]
        other = same_case or index.not_of_modality(label, a.modality)
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


def _fillers_by_scan(ctx: GenContext, anchor: Sample, label: str, k: int) -> list[Sample]:
    """:meth:`_PoolTask.fillers` of another modality than the anchor's, by a scan of the
    pool (no built-in task asks for it)."""
    pool = [
        s
        for s in ctx.pool
        if s.group_id != anchor.group_id
        and find_region(s, label) is None
        and s.regions
        and s.modality != anchor.modality
    ]
    if len(pool) < k:
        raise ItemProblem(f"only {len(pool)} images without {label!r} to add, need {k}")
    return [pool[i] for i in sorted(ctx.rng.choice(len(pool), size=k, replace=False))]
