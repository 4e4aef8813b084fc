"""What the eight MedSG-Bench grounding generators share: pixels of a sample (volume slice or
2-D file), every image resized to one square size, boxes taken from the resized masks, the
answer box text in the recipe's convention, and the open-ended grounding item itself.

MedSG-Bench resizes every image to 336 x 336 and answers ``[x1, y1, x2, y2]`` in absolute
pixels of that image (reference/spine_medsg.md B.3, B.4); ``size`` is a task param here.
The generators synthesise every image the model sees (``ctx.write_image``, clean pixels), so
the answer box is exact in the pixels written. They draw nothing: a reference image's red box
is planned (:func:`red_box`, in the item's ``prompt_geometry``) and the render stage draws it,
as it draws every prompt, passing the other images through.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from pathlib import Path
from typing import Any, ClassVar

import cv2
import numpy as np
import pyarrow as pa

from ..errors import ImageProblem
from ..geometry import format_box, mask_to_xyxy, rle_decode
from ..media.dicom import DicomProblem, is_dicom, load_dicom_rgb
from ..media.image import load_rgb
from ..media.volume import VolumeProblem, load_slice_rgb
from ..records import DrawnShape, Item, Region, Sample
from .base import Candidate, GenContext, ItemProblem, TaskGenerator
from .columns import region_boxes

ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")
BoxInt = tuple[int, int, int, int]

# How the answer is asked for, per coordinate convention (MedSG-Bench asks Qwen2.5-VL for
# absolute-pixel boxes; other conventions are for other model families, B.4).
FORMAT_HINTS = {
    "abs": "Answer with the box [x1, y1, x2, y2] in absolute pixels of the {ordinal} image "
    "({size}x{size}).",
    "qwen": "Answer with the box as <|box_start|>(x1,y1),(x2,y2)<|box_end|> in absolute pixels "
    "of the {ordinal} image ({size}x{size}).",
    "norm1000": "Answer with the box [x1, y1, x2, y2] of the {ordinal} image, coordinates "
    "scaled to 0-1000.",
    "norm1": "Answer with the box [x1, y1, x2, y2] of the {ordinal} image, coordinates as "
    "fractions of its width and height.",
}


def source_roots(ctx: GenContext) -> dict[str, Path]:
    """Where each source's files are: ``ctx.roots`` when the pipeline passes them, else the
    recipe's roots."""
    roots = getattr(ctx, "roots", None)
    if roots:
        return dict(roots)
    out = {}
    for spec in ctx.recipe.sources:
        root = ctx.recipe.resolved_root(spec)
        if root is not None:
            out[spec.id] = root
    return out


def root_for(ctx: GenContext, sample: Sample) -> Path:
    root = source_roots(ctx).get(sample.source)
    if root is None:
        raise ItemProblem(f"source {sample.source!r} has no root folder to read pixels from")
    return root


def sample_rgb(sample: Sample, root: Path) -> np.ndarray:
    """RGB uint8 pixels of a sample: a volume slice (windowed) or a 2-D image file."""
    path = root / sample.image
    try:
        if is_dicom(path):  # one slice a file (a DICOM series): the file is the image
            return load_dicom_rgb(path, window=None)
        if sample.slice is not None:
            channel = sample.attributes.get("channel")
            return load_slice_rgb(
                path,
                sample.slice.axis,
                sample.slice.index,
                window=sample.attributes.get("window"),
                channel=int(channel) if channel is not None else None,
            )
        return load_rgb(path)
    except (VolumeProblem, ImageProblem, DicomProblem) as exc:
        raise ItemProblem(f"{sample.sample_id}: {exc}") from None


def region_mask(region: Region, sample: Sample) -> np.ndarray:
    """The region's boolean mask in sample pixels (RLE), or its box filled when there is none."""
    if region.mask is not None and region.mask.counts is not None:
        return rle_decode(region.mask.size_hw, region.mask.counts)
    if region.bbox is None:
        raise ItemProblem(f"{sample.sample_id}: region {region.label!r} has no mask and no box")
    mask = np.zeros((sample.height, sample.width), dtype=bool)
    x1, y1, x2, y2 = (int(round(v)) for v in region.bbox)
    mask[y1:y2, x1:x2] = True
    return mask


def resize_rgb(rgb: np.ndarray, size: int) -> np.ndarray:
    h, w = rgb.shape[:2]
    interp = cv2.INTER_AREA if h * w > size * size else cv2.INTER_LINEAR
    return cv2.resize(rgb, (size, size), interpolation=interp)


def resize_mask(mask: np.ndarray, size: int) -> np.ndarray:
    return cv2.resize(mask.astype(np.uint8), (size, size), interpolation=cv2.INTER_NEAREST) > 0


Placement = tuple[int, int, int]  # side, x offset, y offset of the picture on the canvas


def placement(spread: float, size: int, rng: np.random.Generator) -> Placement | None:
    """Where an item's pictures go on its ``size`` x ``size`` canvas (params.spread, issue 32):
    each side shrunk by up to ``spread`` of the canvas, at a random place on it; ``None`` for
    ``spread`` 0 (the picture fills the canvas). Where a structure lies in its volume is a
    prior a text-only guess reads from the other items' answer boxes (the mean box hit 17-30 %
    of the replica's object_tracking items against 8-16 % for another item's box); drawn per
    item, the place and size of the answer box vary whatever the source's anatomy."""
    if spread <= 0:
        return None
    side = int(round(size * (1.0 - min(spread, 0.9) * float(rng.random()))))
    x, y = (int(v) for v in rng.integers(0, size - side + 1, 2))
    return side, x, y


def place_rgb(rgb: np.ndarray, size: int, where: Placement | None) -> np.ndarray:
    """``rgb`` resized to the canvas, or to ``where``'s side on a black canvas at its place."""
    if where is None:
        return resize_rgb(rgb, size)
    side, x, y = where
    out = np.zeros((size, size, *rgb.shape[2:]), rgb.dtype)
    out[y : y + side, x : x + side] = resize_rgb(rgb, side)
    return out


def place_mask(mask: np.ndarray, size: int, where: Placement | None) -> np.ndarray:
    """A mask placed as :func:`place_rgb` places its picture."""
    if where is None:
        return resize_mask(mask, size)
    side, x, y = where
    out = np.zeros((size, size), bool)
    out[y : y + side, x : x + side] = resize_mask(mask, side)
    return out


def box_of(mask: np.ndarray, what: str) -> BoxInt:
    """Tight integer box (x2/y2 exclusive) of a mask; ItemProblem when the mask is empty."""
    box = mask_to_xyxy(mask)
    if box is None:
        raise ItemProblem(f"{what} vanished when resized")
    return tuple(int(v) for v in box)  # type: ignore[return-value]


def find_region(sample: Sample, label: str) -> Region | None:
    return next((r for r in sample.regions if r.label == label), None)


def red_box(box: BoxInt, label: str, image_index: int = 0) -> DrawnShape:
    """The red box to draw on a reference image, planned (the render stage draws it with the
    ``box`` renderer and records what it drew)."""
    return DrawnShape(
        image_index=image_index,
        kind="box",
        label=label,
        color="red",
        bbox=tuple(float(v) for v in box),  # type: ignore[arg-type]
    )


def label_values(sample: Sample) -> dict[str, int]:
    return json.loads(sample.attributes.get("label_values", "{}"))


class MedSGTask(TaskGenerator):
    """Base of the MedSG generators: subclasses implement :meth:`build` and give templates."""

    needs = "regions with masks (volume slices or 2-D images)"
    default_params: ClassVar[dict[str, Any]] = {}
    answer_is_truth = False  # the answer is a box

    # what the task's candidates read (see tasks/requirements.py): the region tasks need boxed
    # regions (a mask is used when there is one), the whole-image ones (patch, diffs) any image
    requires: ClassVar[frozenset[str]] = frozenset({"regions"})

    @classmethod
    def requirements(cls, params: dict, prompt_level: str) -> list[set[str]]:
        return [set(cls.requires)]

    def param(self, key: str, default: Any = None) -> Any:
        return self.params.get(key, self.default_params.get(key, default))

    @property
    def size(self) -> int:
        return int(self.param("size", 336))

    def region_candidates(self, samples) -> list[Candidate]:
        """One candidate per (sample, structure region with a box)."""
        min_px = int(self.param("min_box_px", 4))
        out = []
        for s in samples:
            for k, r in enumerate(s.regions):
                if (
                    r.bbox is not None
                    and min(r.bbox[2] - r.bbox[0], r.bbox[3] - r.bbox[1]) >= min_px
                ):
                    out.append(Candidate(s, r.label, r, k))
        return out

    def column_region_candidates(self, batch, pool) -> tuple[np.ndarray, pa.Array]:
        """:meth:`region_candidates` from the ``regions`` column: positions and labels."""
        min_px = int(self.param("min_box_px", 4))
        at, labels, boxes = region_boxes(batch, pool, ())
        wide = np.minimum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]) >= min_px
        return at[wide], labels.filter(pa.array(wide))

    @abstractmethod
    def build(self, cand: Candidate, ctx: GenContext) -> dict:
        """``{"images": [rgb...], "box": BoxInt, "target": index of the image the box is in,
        "samples": (Sample...), "shapes": (DrawnShape...), "fields": template fields}``."""

    def answer_key(self, candidate: Candidate) -> None:
        return None  # the answer is the region's own box: never a repeat

    def make_item(self, cand: Candidate, ctx: GenContext, index: int) -> Item:
        built = self.build(cand, ctx)
        images, box, target = built["images"], built["box"], built["target"]
        size = self.size
        x1, y1, x2, y2 = box
        if not (0 <= x1 < x2 <= size and 0 <= y1 < y2 <= size):
            raise ItemProblem(f"answer box {list(box)} lies outside the {size}x{size} image")
        convention = ctx.spec.coord_format
        answer = format_box(box, convention, size, size)
        fields = {
            "n": len(images),
            "ordinal": ORDINALS[target],
            "size": size,
            **built.get("fields", {}),
        }
        k = index % len(self.templates)
        question = self.templates[k].format(**fields)
        hint = FORMAT_HINTS[convention].format(**fields)
        samples = built.get("samples") or cand.all_samples
        cand = Candidate(cand.sample, cand.truth, cand.region, cand.region_index, tuple(samples))
        item_id = ctx.item_id(cand)
        refs = tuple(ctx.write_image(f"medsg/{item_id}_{i}", rgb) for i, rgb in enumerate(images))
        gt = built.get("gt_prefix", "") + answer
        return ctx.base_item(
            cand,
            images=refs,
            question=f"{question} {hint}",
            options=(),
            answer=answer,
            gt=gt,
            answer_bbox=tuple(float(v) for v in box),
            coord_format=convention,
            prompt_level="image",
            prompt_geometry=tuple(built.get("shapes", ())),
            template_id=f"{self.name}/{k}",
        )
