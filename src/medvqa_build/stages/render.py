"""The render stage: draw each item's planned prompt on its clean image, check the pixels
against the geometry, encode once. Items are independent, so a worker pool renders chunks in
parallel with results identical to one worker (same order, same bytes).

A plain JPEG/PNG is decoded, drawn on, checked and encoded in cv2's BGR order, so no
whole-image colour conversion runs (each costs a pass over the image and wakes cv2's thread
pool); the pixels drawn are the same, channels swapped, so the bytes written are the same.

A chunk runs in three passes (:func:`_render_chunk`): read each plain image file and its
size from its header; plan every item's marks for that size and check the stroke buffers
(contours) against their geometry, one item after another, where that code stays warm;
then decode, paint, check, encode and write each image in turn, so a decoded image is
encoded while it is still in the cache. An item whose file or plan fails in the first two
passes is rendered as a single item would be, so reasons and their order do not change.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import cv2
import numpy as np
from tqdm.auto import tqdm

from ..errors import ImageProblem
from ..executors import make_executor
from ..geometry import format_box, parse_box
from ..media.encode import encode_bgr, encode_image
from ..media.image import (
    _imdecode,
    decode_limit,
    plain_header_size,  # the convert stage's header parser
)
from ..media.load import load_ref_rgb
from ..media.refs import PLAIN_SUFFIXES, is_plain_image, render_ref, resolve_image, split_fragment
from ..media.video import VideoProblem
from ..media.volume import VolumeProblem
from ..recipe import RenderSpec
from ..records import Item, QuarantineEntry, Region
from ..render import RENDERERS, Mark, RenderResult, Resize, Style, coord_text, fit_max_side
from ..render.alignment import check_alignment, check_composite, check_stroke_buffers
from ..render.base import InPlace, Stroke, paint_in_place, plan_marks, render_in_place
from ..store.atomic import write_atomic
from ..store.limits import read_limits
from ..store.memory import budget_reason, release_freed_memory, worker_budget
from ..store.parquet import ItemWriter, iter_items
from ..store.quarantine import write_quarantine
from ..store.tables import ItemTable
from ..validate.rules import Problem
from ..vocab import RENDER_SCHEME
from .base import BuildContext, Stage, StageResult

CHUNK = 64
# the most file bytes a chunk reads ahead (items past it are read when they are rendered)
READ_AHEAD_BYTES = 16 << 20


@dataclass(frozen=True)
class RenderJob:
    """Everything a worker needs (picklable)."""

    roots: dict[str, Path]
    out: Path
    spec: RenderSpec
    generated_dir: Path | None = None


@dataclass(frozen=True)
class Rendered:
    """One item after its prompt was drawn: the finalised item (its planned geometry replaced
    by what was drawn, a ``{box}`` slot filled from the box as drawn), or why it could not
    be drawn, and where its pixels disagree with its geometry."""

    item: Item | None
    quarantined: dict | None
    problems: tuple[Problem, ...] = ()


def _shape_region(shape) -> Region:
    return Region(label=shape.label or "", bbox=shape.bbox, mask=shape.mask, polygon=shape.polygon)


@dataclass
class _Ahead:
    """An item's image file read before its chunk is rendered: its bytes and its size from
    the header; then the marks planned for that size (None: plan after decoding) and the
    problems of their stroke buffers."""

    data: np.ndarray
    size_hw: tuple[int, int]
    strokes: list[Stroke] | None = None
    problems: tuple[str, ...] = ()


class _Painted(NamedTuple):
    """An item's first image as drawn: the scaled clean image, its channel order, the other
    images as rendered refs, the scaling, the drawing, the chunk's plan if it still held, and
    the renderer that drew."""

    clean: np.ndarray
    channels: str
    extra: tuple
    rs: Resize
    drawn: InPlace
    ahead: _Ahead | None
    kind: str  # the renderer that drew (:func:`draw_kind`)


def draw_kind(item: Item, planned: list) -> str:
    """The renderer that draws an item's planned marks: its prompt level's. At the ``image``
    level (no prompt on the image the question is about) the marks planned on a reference
    image (MedSG's red box on the first of several images) are drawn by the renderer of their
    shape kind, which they must share; with nothing planned it is ``image`` (nothing drawn)."""
    if item.prompt_level != "image" or not planned:
        return item.prompt_level
    kinds = sorted({s.kind for s in planned})
    if len(kinds) != 1:
        raise ValueError(f"shapes of kinds {kinds} planned on one image; plan one kind")
    return kinds[0]


def render_one(item: Item, job: RenderJob, ahead: _Ahead | None = None) -> Rendered:
    """Render one item; geometry that cannot be drawn quarantines it with the reason.

    With ``max_side`` the image and its geometry are scaled down together first; a ``{box}``
    slot in the question is filled from the box as drawn, in the item's convention. The
    alignment check runs on the in-memory image, before lossy encoding. ``ahead``: the file
    read and the marks planned in a chunk's first passes (:func:`_render_chunk`).
    """
    spec = job.spec
    planned = [s for s in item.prompt_geometry if s.image_index == 0]
    first_plain = is_plain_image(item.images[0])
    nothing_to_do = not planned and item.prompt_level == "image" and spec.max_side is None
    if nothing_to_do and all(is_plain_image(ref) for ref in item.images):
        return Rendered(item, None)
    try:
        painted = _paint(item, job, planned, ahead)
    except (ValueError, ImageProblem, VideoProblem, VolumeProblem) as exc:
        return Rendered(None, _reason(item, str(exc)))
    except MemoryError:  # past the worker's budget (store.memory.worker_budget)
        return Rendered(None, _reason(item, budget_reason("rendering it")))
    result, rs, channels = painted.drawn.result, painted.rs, painted.channels
    problems = _typed(item, _problems(item, painted))
    changes = _changes(item, rs, result, painted.clean.shape[:2])
    if painted.kind in ("image", "coord") and rs.is_identity and first_plain:
        # nothing drawn on a plain JPEG/PNG: the model sees the source file itself
        images = item.images[:1] + painted.extra
        return Rendered(item.replace(images=images, **changes), None, problems)
    rel = f"images/{item.item_id}_0{'.jpg' if spec.format == 'jpeg' else '.png'}"
    if channels == "bgr":
        data = encode_bgr(result.image, spec.format, spec.jpeg_quality, spec.png_level)
    else:
        data = encode_image(result.image, spec.format, spec.jpeg_quality, spec.png_level)
    write_atomic(os.path.join(job.out, rel), data)
    images = (render_ref(rel),) + painted.extra
    return Rendered(item.replace(images=images, **changes), None, problems)


def _reason(item: Item, why: str) -> dict:
    """The quarantine record of an item that could not be drawn."""
    return {
        "item_id": item.item_id,
        "sample_ids": list(item.sample_ids),
        "task": item.task,
        "reason": why,
        "file": item.images[0],
        "source": item.source,
    }


def _paint(item: Item, job: RenderJob, planned: list, ahead: _Ahead | None) -> _Painted:
    """Read (or take from ``ahead``) the first image, scale it and draw the planned marks on
    a view cut to their reach. Raises the problems that quarantine the item."""
    spec, root = job.spec, job.roots.get(item.source)
    kind = draw_kind(item, planned)
    if ahead is not None:
        decode_limit(ahead.size_hw[1], ahead.size_hw[0])  # the header's size, before decoding
        clean, channels = _decode(ahead.data), "bgr"
        if clean.shape[:2] != ahead.size_hw:  # the header disagrees (EXIF orientation)
            ahead = None
    else:
        clean, channels = _load_pixels(item.images[0], job)
    extra = _materialise_others(item, job) if len(item.images) > 1 else ()
    # multi-image items keep their size: their geometry spans several images
    rs = fit_max_side(
        clean.shape[0], clean.shape[1], spec.max_side if len(item.images) == 1 else None
    )
    clean = rs.image(clean)
    if kind == "image" or not planned:
        drawn = InPlace(RenderResult(clean, ()), clean[:0, :0], (0, 0))
        return _Painted(clean, channels, extra, rs, drawn, ahead, kind)
    if not clean.flags.writeable:
        clean = clean.copy()
    if ahead is not None and ahead.strokes is not None:
        drawn = paint_in_place(clean, ahead.strokes)
    else:
        ahead = None
        marks = [
            Mark(region=rs.region(_shape_region(s), root), color=s.color or "red") for s in planned
        ]
        style = Style(thickness_px=spec.thickness_px)
        drawn = render_in_place(kind, clean, marks, style, root=root, channels=channels)
    return _Painted(clean, channels, extra, rs, drawn, ahead, kind)


def _problems(item: Item, painted: _Painted) -> tuple:
    """The alignment check: the marks were drawn on a view cut to their reach, so the window
    is all that can differ; marks drawn into stroke buffers (contours) are checked on those."""
    drawn, ahead, channels = painted.drawn, painted.ahead, painted.channels
    result = drawn.result
    if not drawn.strokes:
        return tuple(
            check_alignment(
                drawn.before,
                result.image,
                result.shapes,
                item.item_id,
                channels=channels,
                decoded=result.decoded or None,
                origin=drawn.origin,
            )
        )
    if ahead is not None:
        problems = ahead.problems
    else:
        problems = tuple(check_stroke_buffers(drawn.strokes, item.item_id, channels=channels))
    return problems + tuple(
        check_composite(
            drawn.before, result.image, drawn.strokes, item.item_id, origin=drawn.origin
        )
    )


def _changes(item: Item, rs: Resize, result: RenderResult, clean_hw: tuple[int, int]) -> dict:
    """What rendering changes in the item: the shapes as drawn, the answer box (and box
    options) as scaled, the question's ``{box}`` slot filled."""
    changes: dict = {"prompt_geometry": result.shapes}
    if item.answer_bbox is not None:
        changes["answer_bbox"] = rs.box(item.answer_bbox)
        if not rs.is_identity and item.coord_format and item.options:
            changes.update(_rescaled_box_options(item, rs, clean_hw))
    if "{box}" in item.question and result.shapes and result.shapes[0].bbox is not None:
        h, w = result.image.shape[:2]
        box_text = coord_text(result.shapes[0].bbox, item.coord_format or "abs", w, h)
        changes["question"] = item.question.replace("{box}", box_text)
    return changes


def _typed(item: Item, messages: tuple[str, ...]) -> tuple[Problem, ...]:
    """The alignment check's messages as the validation report's problems."""
    return tuple(Problem(item.item_id, "alignment", m) for m in messages)


def _read_ahead(item: Item, job: RenderJob) -> _Ahead | None:
    """The first pass over a chunk: the file of a single-image item with marks to draw,
    when it is a plain JPEG/PNG whose header gives its size; else None (the item is read
    when it is rendered, and any error is raised there, in its place)."""
    if len(item.images) != 1 or item.prompt_level == "image":
        return None
    if not any(s.image_index == 0 for s in item.prompt_geometry):
        return None
    base, fragment = split_fragment(item.images[0])
    if fragment:
        return None
    try:
        name = str(resolve_image(base, job.roots, generated_dir=job.generated_dir))
        if not name.lower().endswith(PLAIN_SUFFIXES):
            return None
        data = _read_file(name)
    except Exception:  # noqa: BLE001  (rendering the item raises it again, in its place)
        return None
    if data[128:132].tobytes() == b"DICM":
        return None
    for head in _HEAD_BYTES:
        size = plain_header_size(data[:head].tobytes())
        if isinstance(size, tuple):
            return _Ahead(data, (size[1], size[0]))
        if size is None or head >= data.size:  # not a plain header (Pillow's to read)
            return None
    return None  # a header past the bytes looked at


# the bytes looked at for a plain header: the first 2 KiB nearly always hold it; at most as
# many as media.image.check_image reads
_HEAD_BYTES = (2048, 1 << 16)


def _plan_ahead(item: Item, job: RenderJob, ahead: _Ahead) -> None:
    """The second pass over a chunk: the item's marks planned for its image's size, and
    their stroke buffers checked. A plan that fails is left to the rendering, which repeats
    it after decoding and quarantines the item with its reason, as a single item."""
    spec = job.spec
    root = job.roots.get(item.source)
    try:
        rs = fit_max_side(*ahead.size_hw, spec.max_side)
        marks = [
            Mark(region=rs.region(_shape_region(s), root), color=s.color or "red")
            for s in item.prompt_geometry
            if s.image_index == 0
        ]
        style = Style(thickness_px=spec.thickness_px)
        h, w = rs.dst_hw
        strokes = plan_marks(item.prompt_level, marks, style, h, w, root=root, channels="bgr")
    except Exception:  # noqa: BLE001  (rendering the item raises it again, in its place)
        return
    if strokes and all(s.pixels is not None for s in strokes):
        ahead.problems = tuple(check_stroke_buffers(strokes, item.item_id, channels="bgr"))
    ahead.strokes = strokes


def _decode(data: np.ndarray) -> np.ndarray:
    """A plain JPEG/PNG file's bytes decoded (BGR), as :func:`_load_pixels` decodes them."""
    # OpenCV's out-of-memory (past the worker's budget) is raised as MemoryError
    image = _imdecode(data, cv2.IMREAD_COLOR)
    if image is None:
        raise ImageProblem("cannot decode image pixels (corrupt or unsupported format)")
    return image


def _rescaled_box_options(item: Item, rs, size_hw: tuple[int, int]) -> dict:
    """Coordinate options (visual grounding) rewritten in the resized image's pixels."""
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


def _load_pixels(ref: str, job: RenderJob) -> tuple[np.ndarray, str]:
    """The image's pixels and their channel order: a whole JPEG/PNG file as cv2 decodes it
    (BGR), anything else (frames, slices, DICOM) as :func:`_load` gives it (RGB).

    The same pixels and errors as :func:`_load`, which for such a file checks for DICOM (by
    its magic bytes: a DICOM named ``.png`` is still read as DICOM), then decodes with cv2."""
    base, fragment = split_fragment(ref)
    path = resolve_image(base, job.roots, generated_dir=job.generated_dir)
    name = str(path)
    if fragment or not name.lower().endswith(PLAIN_SUFFIXES):
        return load_ref_rgb(path, fragment), "rgb"
    data = _read_file(name)
    if data[128:132].tobytes() == b"DICM":
        return load_ref_rgb(path, fragment), "rgb"
    return _decode(data), "bgr"


_READ_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def _read_file(name: str) -> np.ndarray:
    """``np.fromfile(name, np.uint8)`` in one read into the array (numpy's reader goes through
    a C stdio stream); anything but a plain regular file is left to numpy, and its errors."""
    try:
        fd = os.open(name, _READ_FLAGS)
    except OSError:
        return np.fromfile(name, dtype=np.uint8)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return np.fromfile(name, dtype=np.uint8)
        data = np.empty(st.st_size, np.uint8)
        view, got = memoryview(data), 0
        while got < st.st_size and (n := os.readv(fd, [view[got:]])):
            got += n
        if got < st.st_size or os.read(fd, 1):  # the file changed size meanwhile
            return np.fromfile(name, dtype=np.uint8)
        return data
    finally:
        os.close(fd)


def _materialise_others(item: Item, job: RenderJob) -> tuple[str, ...]:
    """Images 1.. of a multi-image item: a frame, slice, DICOM or other non-plain image is
    decoded and written as lossless PNG, so exporters only ever copy plain JPEG/PNG files."""
    out = []
    for k, ref in enumerate(item.images[1:], start=1):
        if is_plain_image(ref):
            out.append(ref)
            continue
        rel = f"images/{item.item_id}_{k}.png"
        write_atomic(job.out / rel, encode_image(_load(ref, job), "png"))
        out.append(render_ref(rel))
    return tuple(out)


def _render_chunk(args: tuple[list[Item], RenderJob]) -> list[Rendered]:
    """Render a chunk in three passes: read the files, plan the marks and check the stroke
    buffers, then decode, paint, check, encode and write each image. The same results as
    :func:`render_one` item by item (the plans depend on the image's size alone).

    The chunk runs under the worker memory budget (``max_worker_bytes`` above what the
    process holds when it begins, as a convert shard does): a decode past it quarantines its
    item naming the budget, in a pool process, in this process or on a Ray worker alike."""
    with worker_budget(read_limits().max_worker_bytes):
        return _render_chunk_items(args)


def _render_chunk_items(args: tuple[list[Item], RenderJob]) -> list[Rendered]:
    items, job = args
    ahead: list[_Ahead | None] = []
    held = 0
    for item in items:
        one = _read_ahead(item, job) if held < READ_AHEAD_BYTES else None
        held += one.data.size if one is not None else 0
        ahead.append(one)
    for item, one in zip(items, ahead, strict=True):
        if one is not None:
            _plan_ahead(item, job, one)
    return [render_one(item, job, one) for item, one in zip(items, ahead, strict=True)]


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


# items read, rendered and written at a time: small, because a contour item records every
# outline vertex (~50 kB as Python tuples), and enough chunks to keep every worker busy
RENDER_WINDOW = 512


def _windows(items: Iterable[Item], size: int) -> Iterator[list[Item]]:
    window: list[Item] = []
    for item in items:
        window.append(item)
        if len(window) >= size:
            yield window
            window = []
    if window:
        yield window


def render_failures(bad: list[dict]) -> list[QuarantineEntry]:
    """Items that could not be drawn, as quarantine entries of stage ``render`` (the item's
    first image below its source root, and the item and task in the reason)."""
    return [
        QuarantineEntry(
            file=(b.get("file") or ",".join(b["sample_ids"])).removeprefix(
                f"source://{b.get('source', '')}/"
            ),
            reason=f"{b['reason']} (item {b['item_id']}, task {b['task']})",
            source=b.get("source", ""),
            stage="render",
        )
        for b in bad
    ]


class Render(Stage):
    """``items.parquet``: the generated items with their prompts drawn (the images they
    reference and the geometry as drawn); ``quarantine.json``: items that could not be
    rendered; ``alignment.json``: items whose pixels disagree with their geometry."""

    name = "render"

    def inputs(self, ctx: BuildContext, key: str) -> Any:
        return {
            "generate": ctx.last("generate").fingerprint,
            "render": ctx.recipe.render.model_dump(),
        }

    def plugins(self, ctx: BuildContext, key: str) -> list[str]:
        """The renderers of the prompt levels the generated items name, and those that draw
        the shapes planned at the ``image`` level (:func:`draw_kind`: MedSG's red box)."""
        table = ItemTable(ctx.last("generate").path / "items.parquet")
        levels = table.distinct("prompt_level")
        kinds = table.shape_kinds("image") if "image" in levels else []
        return [RENDERERS.module(name) for name in [*levels, *kinds]]

    def run(self, ctx: BuildContext, key: str, out: Path) -> dict[str, Any]:
        generated = ctx.last("generate")
        job = RenderJob(
            roots=ctx.roots, out=out, spec=ctx.recipe.render, generated_dir=generated.path
        )
        bad: list[dict] = []
        problems: list[Problem] = []
        n_items = n_rendered = 0
        bar = tqdm(
            total=generated.stats["items"],
            desc="render",
            unit="item",
            disable=not ctx.progress,
            leave=False,
        )
        with ItemWriter(out / "items.parquet") as writer:
            # a window of items at a time: chunks of it run in parallel, none holds them all
            size = max(RENDER_WINDOW, 4 * CHUNK * ctx.executor.workers)
            for window in _windows(iter_items(generated.path / "items.parquet"), size):
                rendered, w_bad, w_problems = render_items(
                    window, job, progress=False, executor=ctx.executor
                )
                for item in rendered:
                    writer.add(item)
                n_items += len(rendered)
                n_rendered += sum(1 for i in rendered if i.images[0].startswith(RENDER_SCHEME))
                bad += w_bad
                problems += w_problems
                bar.update(len(window))
                del window, rendered
                release_freed_memory(collect=False)
        bar.close()
        (out / "quarantine.json").write_text(json.dumps(bad, indent=2) + "\n")
        alignment = [p.to_dict() for p in problems]
        (out / "alignment.json").write_text(json.dumps(alignment, indent=2) + "\n")
        return {
            "items": n_items,
            "quarantined": len(bad),
            "alignment_problems": len(problems),
            "rendered": n_rendered,
        }

    def finish(self, ctx: BuildContext, results: list[StageResult]) -> None:
        (result,) = results
        bad = json.loads((result.path / "quarantine.json").read_text())
        if bad:
            ctx.quarantine += render_failures(bad)
            write_quarantine(ctx.quarantine, ctx.out / "quarantine.json")
        ctx.items = ItemTable(result.path / "items.parquet")
        generated_dir = ctx.last("generate").path
        ctx.resolve = lambda ref: resolve_image(ref, ctx.roots, result.path, generated_dir)
