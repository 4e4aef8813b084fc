"""MedSG consistency grounding across views and time: ``multi_view`` (axial, coronal and
sagittal reformats of one volume; the structure boxed in the first is located in the last) and
``object_tracking`` (a structure followed across neighbouring slices or video frames).

MedSG-Bench's multi-view items are ``_front``/``_top``/``_side`` images of one 3-D case with
the reference box in the first (reference/spine_medsg.md B.2); here the reformats pass through
one voxel of the structure, so it is present in every view.

``params.spread`` (both; default 0: the pictures fill the canvas) shrinks each item's
pictures by a random share up to it and places them at a random place on the black canvas
(:func:`~.medsg_common.placement`, all pictures of an item alike), so where the answer box
lies is not the anatomy's prior (issue 32; ``recipes/medsg.yaml`` sets 0.5). Both name the
reference's red box without its coordinates (see ``REF``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..geometry import format_box
from ..media.volume import (
    AXES,
    VolumeProblem,
    load_label_slice,
    load_slice_rgb,
    load_volume,
    plane_to_voxel,
    voxel_index,
)
from ..records import Sample
from .base import TASKS, Candidate, GenContext, ItemProblem
from .columns import Columns, NotColumnar, attribute_values, run_ordinals
from .medsg_common import (
    MedSGTask,
    box_of,
    find_region,
    label_values,
    place_mask,
    place_rgb,
    placement,
    red_box,
    region_mask,
    root_for,
    sample_rgb,
)

# The red box is named without its coordinates (MedSG-Bench's multi-view wording writes them):
# a tracked structure barely moves between neighbouring slices, and an orthogonal view shares
# an axis with the reference, so the reference box written in the text was the answer to copy
# (every object_tracking item of the replica, 12 % of multi_view's; issue 32)
REF = "the object marked with a red bounding box in the first image"

MIN_VIEW_DEPTH = 4  # voxels along every axis: a 2-D frame or a 2-3 slice stack has no views


def _ref_fields(box, ctx: GenContext, size: int) -> dict:
    return {"ref_box": format_box(box, ctx.spec.coord_format, size, size)}


def _inner_pixel(mask: np.ndarray) -> tuple[int, int]:
    """The mask pixel nearest the mask's centroid (a voxel surely inside the structure)."""
    pts = np.argwhere(mask)
    centre = pts.mean(axis=0)
    row, col = pts[np.argmin(((pts - centre) ** 2).sum(axis=1))]
    return int(row), int(col)


@TASKS.register("multi_view")
class MultiView(MedSGTask):
    requires = frozenset({"regions", "attribute:label_volume"})
    name = "multi_view"
    per_sample = True  # one slice at a time: the pool is streamed
    needs = "volume slice samples with a label volume (attributes label_volume, label_values)"
    templates = (
        "These images share one object in common (" + REF + "). Recognize and locate this "
        "object in the {ordinal} image.",
        "The three images are orthogonal views of one scan. Find " + REF + " in the {ordinal} "
        "image.",
    )

    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        return [
            c
            for c in self.region_candidates(samples)
            if c.sample.slice is not None
            and "label_volume" in c.sample.attributes
            and c.truth in label_values(c.sample)
        ]

    plan_columns = (
        "regions.list.element.label",
        "regions.list.element.bbox",
        "slice",
        "attributes",
    )

    def column_candidates(self, batch, pool) -> Columns:
        """:meth:`candidates` from columns: the region candidates of slices with a label
        volume whose ``label_values`` (JSON, each distinct text read once) name their label."""
        at, labels = self.column_region_candidates(batch, pool)
        take = pa.array(at, pa.int64())
        ok = np.asarray(pc.is_valid(batch["slice"].take(take)))
        sub = {k: batch[k].take(take) for k in ("attributes",)}
        rows = np.arange(len(at))
        ok &= np.asarray(pc.is_valid(attribute_values(sub, rows, "label_volume")))
        raw = attribute_values(sub, rows, "label_values").fill_null("{}")
        pairs = pa.table({"raw": raw, "label": labels}).to_pydict()
        known: dict[tuple[str, str], bool] = {}
        for k, key in enumerate(zip(pairs["raw"], pairs["label"], strict=True)):
            if ok[k]:
                if key not in known:
                    try:
                        known[key] = key[1] in json.loads(key[0])
                    except (ValueError, TypeError):
                        raise NotColumnar("label_values that are not a JSON object") from None
                ok[k] = known[key]
        at = at[ok]
        return at, run_ordinals(at), labels.filter(pa.array(ok))

    def build(self, cand: Candidate, ctx: GenContext) -> dict:
        s, size = cand.sample, self.size
        root = root_for(ctx, s)
        value = label_values(s)[cand.truth]
        label_path = root / s.attributes["label_volume"]
        channel = s.attributes.get("channel")
        channel = int(channel) if channel is not None else None
        try:
            shape = load_volume(label_path).shape
            if min(shape[:3]) < MIN_VIEW_DEPTH:
                # a 2-D frame (CAMUS) or a thin stack: its reformats would be a few pixels thick
                raise ItemProblem(
                    f"volume {s.attributes['label_volume']} is {shape[:3]} voxels: too thin for "
                    f"three views (needs at least {MIN_VIEW_DEPTH} along every axis)"
                )
            row, col = _inner_pixel(region_mask(cand.region, s))
            voxel = plane_to_voxel(s.slice.axis, row, col, s.slice.index, shape)
            others = [a for a in AXES if a != s.slice.axis]
            if ctx.rng.random() < 0.5:
                others.reverse()
            views, masks = [], []
            for axis in [s.slice.axis, *others]:
                index = voxel_index(axis, voxel)
                views.append(
                    load_slice_rgb(
                        root / s.image,
                        axis,
                        index,
                        window=s.attributes.get("window"),
                        channel=channel,
                    )
                )
                masks.append(load_label_slice(label_path, axis, index) == value)
        except VolumeProblem as exc:
            raise ItemProblem(f"{s.sample_id}: {exc}") from None
        where = placement(float(self.param("spread", 0.0)), size, ctx.rng)
        images = [place_rgb(v, size, where) for v in views]
        masks = [place_mask(m, size, where) for m in masks]
        ref_box = box_of(masks[0], f"{cand.truth} in the reference view")
        shape0 = red_box(ref_box, cand.truth)
        return {
            "images": images,
            "box": box_of(masks[-1], f"{cand.truth} in the last view"),
            "target": len(images) - 1,
            "shapes": (shape0,),
            "fields": _ref_fields(ref_box, ctx, size),
        }


def _position(s: Sample) -> int | None:
    return s.slice.index if s.slice is not None else s.frame


@TASKS.register("object_tracking")
class ObjectTracking(MedSGTask):
    name = "object_tracking"
    groups_pool = True  # runs never cross a sequence: planned a sequence at a time
    needs = "neighbouring slices of one volume or frames of one video, with region masks"
    default_params = {"n_images": 4, "max_gap": 2}
    templates = (
        "These {n} images are consecutive slices or frames. Track " + REF + " and locate "
        "it in the {ordinal} image.",
        "Follow " + REF + " through the sequence and find it in the {ordinal} image.",
    )

    def answer_key(self, candidate: Candidate) -> str:
        return candidate.truth  # the structure followed: its box is the same in every channel

    def repeat_scope(self, candidate: Candidate) -> tuple:
        """One run of slices of one case, whatever its channel: a case's MR sequences are
        co-registered, so the same run in FLAIR, T1, T1ce and T2 has one answer box, and four
        items of it tell a reader who remembers one the others' answer (on the BraTS replica
        12 of 50 items were three boxes, and the mean answer box of the others hit 30 %
        against 16 % for another item's box; issue 32)."""
        s = candidate.sample
        axis = s.slice.axis if s.slice is not None else "frame"
        positions = tuple(_position(x) for x in candidate.all_samples)
        return (s.source, s.group_id, axis, *positions)

    def pool_group(self, sample: Sample) -> tuple | None:
        """One volume's slices along one axis (one channel), or one video's frames."""
        if _position(sample) is None:
            return None
        s = sample
        axis = s.slice.axis if s.slice is not None else "frame"
        return (s.source, s.group_id, s.image, axis, s.attributes.get("channel", ""))

    def candidates(self, samples: Sequence[Sample]) -> list[Candidate]:
        n, gap = int(self.param("n_images")), int(self.param("max_gap"))
        if not 2 <= n <= 6:
            raise ItemProblem(f"object_tracking: n_images must be 2..6, got {n}")
        groups: dict[tuple, list[Sample]] = defaultdict(list)
        for s in samples:
            key = self.pool_group(s)
            if key is not None:
                groups[key].append(s)
        out = []
        for key in sorted(groups):
            seq = sorted(groups[key], key=_position)
            labels = sorted({r.label for s in seq for r in s.regions})
            for label in labels:
                run: list[Sample] = []
                for s in seq:
                    has = find_region(s, label) is not None
                    if has and run and _position(s) - _position(run[-1]) <= gap:
                        run.append(s)
                    else:
                        run = [s] if has else []
                    if len(run) == n:
                        first = run[0]
                        k = next(i for i, r in enumerate(first.regions) if r.label == label)
                        out.append(Candidate(first, label, first.regions[k], k, tuple(run)))
                        run = []
        return out

    def build(self, cand: Candidate, ctx: GenContext) -> dict:
        size = self.size
        where = placement(float(self.param("spread", 0.0)), size, ctx.rng)
        images, masks = [], []
        for s in cand.samples:
            images.append(place_rgb(sample_rgb(s, root_for(ctx, s)), size, where))
            masks.append(place_mask(region_mask(find_region(s, cand.truth), s), size, where))
        ref_box = box_of(masks[0], f"{cand.truth} in the first image")
        shape0 = red_box(ref_box, cand.truth)
        return {
            "images": images,
            "box": box_of(masks[-1], f"{cand.truth} in the last image"),
            "target": len(images) - 1,
            "shapes": (shape0,),
            "fields": _ref_fields(ref_box, ctx, size),
        }
