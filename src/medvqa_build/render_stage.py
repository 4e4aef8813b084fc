"""The render stage: draw each item's planned prompt on its clean image, check the pixels
against the geometry, encode once. Items are independent, so a worker pool renders chunks in
parallel with results identical to one worker (same order, same bytes).

A plain JPEG/PNG is decoded, drawn on, checked and encoded in cv2's BGR order, so no
whole-image colour conversion runs (each costs a pass over the image and wakes cv2's thread
pool); the pixels drawn are the same, channels swapped, so the bytes written are the same.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from tqdm.auto import tqdm

from .images import (
    PLAIN_SUFFIXES,
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
from .render import Mark, RenderResult, Style, coord_text, fit_max_side
from .render.base import InPlace, render_in_place
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
    first_plain = is_plain_image(item.images[0])
    nothing_to_do = item.prompt_level == "image" and spec.max_side is None and first_plain
    if nothing_to_do and all(is_plain_image(ref) for ref in item.images[1:]):
        return Rendered(item, None)
    root = job.roots.get(item.source)
    try:
        clean, channels = _load_pixels(item.images[0], job)
        extra = _materialise_others(item, job) if len(item.images) > 1 else ()
        # multi-image items keep their size: their geometry spans several images
        rs = fit_max_side(
            clean.shape[0], clean.shape[1], spec.max_side if len(item.images) == 1 else None
        )
        clean = rs.image(clean)
        marks = [
            Mark(region=rs.region(_shape_region(s), root), color=s.color or "red") for s in planned
        ]
        if item.prompt_level == "image" or not planned:
            drawn = InPlace(RenderResult(clean, ()), clean[:0, :0], (0, 0))
        else:
            style = Style(thickness_px=spec.thickness_px)
            if not clean.flags.writeable:
                clean = clean.copy()
            drawn = render_in_place(
                item.prompt_level, clean, marks, style, root=root, channels=channels
            )
        result = drawn.result
    except (ValueError, ImageProblem, VideoProblem, VolumeProblem) as exc:
        reason = {
            "item_id": item.item_id,
            "sample_ids": list(item.sample_ids),
            "task": item.task,
            "reason": str(exc),
        }
        return Rendered(None, reason)
    # the marks were drawn on a view cut to their reach: the window is all that can differ
    problems = tuple(
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
    changes: dict = {"prompt_geometry": result.shapes}
    if item.answer_bbox is not None:
        changes["answer_bbox"] = rs.box(item.answer_bbox)
        if not rs.is_identity and item.coord_format and item.options:
            changes.update(_rescaled_box_options(item, rs, clean.shape[:2]))
    if "{box}" in item.question and result.shapes and result.shapes[0].bbox is not None:
        h, w = result.image.shape[:2]
        box_text = coord_text(result.shapes[0].bbox, item.coord_format or "abs", w, h)
        changes["question"] = item.question.replace("{box}", box_text)
    if item.prompt_level in ("image", "coord") and rs.is_identity and first_plain:
        # nothing drawn on a plain JPEG/PNG: the model sees the source file itself
        return Rendered(item.replace(images=item.images[:1] + extra, **changes), None, problems)
    rel = f"images/{item.item_id}_0{'.jpg' if spec.format == 'jpeg' else '.png'}"
    if channels == "bgr":
        data = _encode_bgr(result.image, spec.format, spec.jpeg_quality, spec.png_level)
    else:
        data = encode_image(result.image, spec.format, spec.jpeg_quality, spec.png_level)
    _write_atomic(job.out, rel, data)
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
    image = cv2.imdecode(data, cv2.IMREAD_COLOR) if data.size else None
    if image is None:
        raise ImageProblem("cannot decode image pixels (corrupt or unsupported format)")
    return image, "bgr"


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


def _encode_bgr(bgr: np.ndarray, fmt: str, jpeg_quality: int = 92, png_level: int = 3):
    """:func:`images.encode_image` of the RGB image whose channels ``bgr`` holds swapped, as
    cv2's buffer (bytes-like: written as it is, not copied into a ``bytes``)."""
    if fmt == "jpeg":
        ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, int(jpeg_quality)])
    else:
        ok, buf = cv2.imencode(".png", bgr, [cv2.IMWRITE_PNG_COMPRESSION, int(png_level)])
    if not ok:
        raise OSError(f"cannot encode image as {fmt}")
    return buf


_WRITE_FLAGS = (
    os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
)


def _write_atomic(out: Path, rel: str, data) -> None:
    """:func:`images.write_bytes_atomic` of ``out / rel`` (``data`` bytes-like), creating the
    folder only when the write finds it missing (not once per file)."""
    path = os.path.join(out, rel)
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.tmp")
    try:
        fd = os.open(tmp, _WRITE_FLAGS, 0o666)
    except OSError:  # no folder yet (or something odd: the plain helper says what)
        write_bytes_atomic(Path(path), bytes(data))
        return
    try:
        view = memoryview(data).cast("B")
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    os.replace(tmp, path)


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
