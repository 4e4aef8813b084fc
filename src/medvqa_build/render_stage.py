"""The render stage: draw each item's planned prompt on its clean image, check the pixels
against the geometry, encode once. Items are independent, so a worker pool renders chunks in
parallel with results identical to one worker (same order, same bytes)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from .images import (
    encode_image,
    is_plain_image,
    render_ref,
    resolve_image,
    split_fragment,
    write_bytes_atomic,
)
from .media.image import ImageProblem
from .media.load import load_ref_rgb
from .media.video import VideoProblem
from .media.volume import VolumeProblem
from .recipe import RenderSpec
from .records import Item, Region
from .render import Mark, RenderResult, Style, coord_text, fit_max_side, render
from .validate.alignment import check_alignment

CHUNK = 64


@dataclass(frozen=True)
class RenderJob:
    """Everything a worker needs (picklable)."""

    roots: dict[str, Path]
    out: Path
    spec: RenderSpec
    generated_dir: Path | None = None


@dataclass(frozen=True)
class Rendered:
    item: Item | None
    quarantined: dict | None
    problems: tuple[str, ...] = ()


def _shape_region(shape) -> Region:
    return Region(label=shape.label or "", bbox=shape.bbox, mask=shape.mask, polygon=shape.polygon)


def render_one(item: Item, job: RenderJob) -> Rendered:
    """Render one item; geometry that cannot be drawn quarantines it with the reason.

    With ``max_side`` the image and its geometry are scaled down together first; a ``{box}``
    slot in the question is filled from the box as drawn, in the item's convention. The
    alignment check runs on the in-memory image, before lossy encoding.
    """
    spec = job.spec
    planned = [s for s in item.prompt_geometry if s.image_index == 0]
    plain = all(is_plain_image(ref) for ref in item.images)
    if item.prompt_level == "image" and spec.max_side is None and plain:
        return Rendered(item, None)
    root = job.roots.get(item.source)
    try:
        clean = _load(item.images[0], job)
        extra = _materialise_others(item, job)
        # multi-image items keep their size: their geometry spans several images
        rs = fit_max_side(
            clean.shape[0], clean.shape[1], spec.max_side if len(item.images) == 1 else None
        )
        clean = rs.image(clean)
        marks = [
            Mark(region=rs.region(_shape_region(s), root), color=s.color or "red") for s in planned
        ]
        if item.prompt_level == "image" or not planned:
            result = RenderResult(clean, ())
        else:
            result = render(
                item.prompt_level, clean, marks, Style(thickness_px=spec.thickness_px), root=root
            )
    except (ValueError, ImageProblem, VideoProblem, VolumeProblem) as exc:
        reason = {
            "item_id": item.item_id,
            "sample_ids": list(item.sample_ids),
            "task": item.task,
            "reason": str(exc),
        }
        return Rendered(None, reason)
    problems = tuple(check_alignment(clean, result.image, result.shapes, item.item_id))
    changes: dict = {"prompt_geometry": result.shapes}
    if item.answer_bbox is not None:
        changes["answer_bbox"] = rs.box(item.answer_bbox)
        if not rs.is_identity and item.coord_format and item.options:
            changes.update(_rescaled_box_options(item, rs, clean.shape[:2]))
    if "{box}" in item.question and result.shapes and result.shapes[0].bbox is not None:
        h, w = result.image.shape[:2]
        box_text = coord_text(result.shapes[0].bbox, item.coord_format or "abs", w, h)
        changes["question"] = item.question.replace("{box}", box_text)
    if (
        item.prompt_level in ("image", "coord")
        and rs.is_identity
        and is_plain_image(item.images[0])
    ):
        # nothing drawn on a plain JPEG/PNG: the model sees the source file itself
        return Rendered(item.replace(images=item.images[:1] + extra, **changes), None, problems)
    rel = f"images/{item.item_id}_0{'.jpg' if spec.format == 'jpeg' else '.png'}"
    data = encode_image(result.image, spec.format, spec.jpeg_quality, spec.png_level)
    write_bytes_atomic(job.out / rel, data)
    return Rendered(item.replace(images=(render_ref(rel),) + extra, **changes), None, problems)


def _rescaled_box_options(item: Item, rs, size_hw: tuple[int, int]) -> dict:
    """Coordinate options (visual grounding) rewritten in the resized image's pixels."""
    from .geometry import format_box, parse_box

    h0, w0 = rs.src_hw
    h, w = size_hw

    def rescale(text: str) -> str:
        box = parse_box(text, item.coord_format, w0, h0)
        return format_box(rs.box(box), item.coord_format, w, h)

    options = tuple(rescale(o) for o in item.options)
    return {"options": options, "gt": rescale(item.gt)}


def _load(ref: str, job: RenderJob):
    base, fragment = split_fragment(ref)
    return load_ref_rgb(resolve_image(base, job.roots, generated_dir=job.generated_dir), fragment)


def _materialise_others(item: Item, job: RenderJob) -> tuple[str, ...]:
    """Images 1.. of a multi-image item: a frame, slice, DICOM or other non-plain image is
    decoded and written as lossless PNG, so exporters only ever copy plain JPEG/PNG files."""
    out = []
    for k, ref in enumerate(item.images[1:], start=1):
        if is_plain_image(ref):
            out.append(ref)
            continue
        rel = f"images/{item.item_id}_{k}.png"
        write_bytes_atomic(job.out / rel, encode_image(_load(ref, job), "png"))
        out.append(render_ref(rel))
    return tuple(out)


def _render_chunk(args: tuple[list[Item], RenderJob]) -> list[Rendered]:
    items, job = args
    return [render_one(item, job) for item in items]


def render_items(
    items: list[Item],
    job: RenderJob,
    *,
    workers: int = 1,
    progress: bool = True,
    executor=None,
) -> tuple[list[Item], list[dict], list[str]]:
    """``(rendered items, quarantined items, alignment problems)``, in item order.

    Chunks of items run on ``executor`` (default: a local pool of ``workers`` processes)."""
    from .executors import make_executor

    chunks = [(items[i : i + CHUNK], job) for i in range(0, len(items), CHUNK)]
    bar = tqdm(total=len(items), desc="render", unit="item", disable=not progress, leave=False)
    results: list[Rendered] = []
    own = executor is None
    executor = make_executor("local", workers) if own else executor
    try:
        for part in executor.map(_render_chunk, chunks):
            results += part
            bar.update(len(part))
    finally:
        if own:
            executor.close()
    bar.close()
    done = [r.item for r in results if r.item is not None]
    quarantined = [r.quarantined for r in results if r.quarantined is not None]
    problems = [p for r in results for p in r.problems]
    return done, quarantined, problems
