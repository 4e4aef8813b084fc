"""MedSG consistency grounding by meaning: ``crossmodal`` (a red box in a reference image; the
corresponding structure in an image of another modality or MR sequence) and ``referring`` (a
structure named in text, found among several images).

MedSG-Bench pairs the same structure across datasets and modalities (AbdomenCT-1K spleen with
AMOS MRI spleen) and across BraTS sequences of one case; referring names bare structures in
``<|object_ref_start|>...<|object_ref_end|>`` (reference/spine_medsg.md B.2).
"""

from __future__ import annotations

from array import array
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
    find_region,
    red_box,
    region_mask,
    resize_mask,
    resize_rgb,
    root_for,
    sample_rgb,
)


class _Codes:
    """Small ints for the values of one field over the pool (-1: a value it never has)."""

    def __init__(self) -> None:
        self.of: dict = {}

    def add(self, value) -> int:
        return self.of.setdefault(value, len(self.of))

    def get(self, value) -> int:
        return self.of.get(value, -1)


class _PoolIndex:
    """The task's pool as positions by structure label and by group, with each sample's
    group, modality, slice and MR sequence as codes, built in one pass over the pool (which
    may be streamed: nothing of a sample but these codes is kept, ~40 bytes). Each item's
    partner and fillers are drawn from short position lists instead of a scan of the whole
    pool (which made a MedSG build quadratic), and only the drawn samples are read back. The
    draws are those of the scan: the same candidates in pool order and the same calls on the
    item's generator."""

    def __init__(self, pool: Sequence[Sample]):
        self.pool = pool
        self.by_label: dict[str, array] = defaultdict(lambda: array("q"))
        self.positions: dict[str | None, array] = defaultdict(lambda: array("q"))
        self.groups, self.modalities = _Codes(), _Codes()
        self.slices, self.sequences = _Codes(), _Codes()
        group, modality, slice_, sequence = (array("i") for _ in range(4))
        has_regions = bytearray()
        for i, s in enumerate(pool):
            for label in {r.label for r in s.regions}:
                self.by_label[label].append(i)
            self.positions[s.group_id].append(i)
            group.append(self.groups.add(s.group_id))
            modality.append(self.modalities.add(s.modality))
            slice_.append(self.slices.add(s.slice))
            sequence.append(self.sequences.add(s.attributes.get("sequence", "")))
            has_regions.append(bool(s.regions))
        self.group, self.modality = np.asarray(group), np.asarray(modality)
        self.slice, self.sequence = np.asarray(slice_), np.asarray(sequence)
        self.has_regions = np.frombuffer(bytes(has_regions), np.uint8).astype(bool)
        self._without: dict[str, np.ndarray] = {}

    def labelled(self, label: str) -> np.ndarray:
        """Positions of the samples showing ``label``, in pool order."""
        return (
            np.frombuffer(self.by_label[label], np.int64)
            if label in self.by_label
            else (np.zeros(0, np.int64))
        )

    def without(self, label: str) -> np.ndarray:
        """Positions of the pool's samples with regions, none of them ``label``."""
        if label not in self._without:
            mask = self.has_regions.copy()
            mask[self.labelled(label)] = False
            self._without[label] = np.flatnonzero(mask).astype(np.int64)
        return self._without[label]

    def of_group(self, label: str, group: str | None) -> np.ndarray:
        """Positions of the samples showing ``label`` in ``group`` (pool order)."""
        at = self.labelled(label)
        return at[self.group[at] == self.groups.get(group)]

    def not_of_modality(self, label: str, modality: str) -> np.ndarray:
        """Positions of the samples showing ``label`` in another modality (pool order)."""
        at = self.labelled(label)
        return at[self.modality[at] != self.modalities.get(modality)]


class _PoolTask(MedSGTask):
    per_sample = True  # candidates are one slice's structures; the pool is read through codes
    draws_from_pool = True
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
            return _fillers_of_other_modality(self.index(ctx), anchor, label, k, ctx.rng)
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
        # no coordinates: a co-registered sequence of the same case (BraTS) has the reference's
        # box, which a text-only reader would copy (half the replica's items, issue 32)
        "The first image marks a structure with a red box. Locate the same structure in the "
        "{ordinal} image, which was acquired differently.",
    )

    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        return self.region_candidates(samples)

    def partner(self, ctx: GenContext, a: Sample, label: str) -> Sample:
        """Same case and slice in another MR sequence when there is one (BraTS), else the same
        structure in another modality (another dataset, another patient)."""
        index = self.index(ctx)
        case = index.of_group(label, a.group_id)
        same_case = case[
            (index.slice[case] == index.slices.get(a.slice))
            & (index.sequence[case] != index.sequences.get(a.attributes.get("sequence", "")))
        ]
        other = same_case if len(same_case) else index.not_of_modality(label, a.modality)
        if not len(other):
            raise ItemProblem(f"no image of {label!r} in another modality or sequence")
        return index.pool[int(other[int(ctx.rng.integers(len(other)))])]

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
        shape0 = red_box(ref_box, label)
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


def _fillers_of_other_modality(
    index: _PoolIndex, anchor: Sample, label: str, k: int, rng: np.random.Generator
) -> list[Sample]:
    """:meth:`_PoolTask.fillers` of another modality than the anchor's: a uniform draw
    without replacement, in pool order, among the samples of other groups and modalities that
    have regions but not ``label`` (no built-in task asks for it)."""
    at = index.without(label)
    at = at[
        (index.group[at] != index.groups.get(anchor.group_id))
        & (index.modality[at] != index.modalities.get(anchor.modality))
    ]
    if len(at) < k:
        raise ItemProblem(f"only {len(at)} images without {label!r} to add, need {k}")
    return [index.pool[int(at[i])] for i in sorted(rng.choice(len(at), size=k, replace=False))]
