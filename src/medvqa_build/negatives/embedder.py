"""The image-embedder interface, its registry and ``make_embedder`` for recipe specs.

An embedder turns image files into L2-normalised float32 vectors. Its ``id`` names the model,
the weights and the preprocessing, so the embedding cache never mixes vectors of two set-ups.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol, TypeVar

import numpy as np
from PIL import Image

from ..errors import ImageProblem, MedvqaError
from ..media.dicom import is_dicom, load_dicom_rgb
from ..media.image import decode_limit, displayed
from ..registry import Registry
from ..store.memory import budget_reason

T = TypeVar("T")


class EmbedderError(MedvqaError):
    """An embedder cannot be built (unknown model, missing weights) or cannot read an image."""


class UndecodableImage(EmbedderError):
    """One file an embedder cannot decode (a per-file problem: the embed stage quarantines
    the samples of ``path`` and embeds the rest)."""

    def __init__(self, what: str, path: str | os.PathLike):
        self.path = str(path)
        super().__init__(what, where=self.path, fix="check or quarantine the file")


class Embedder(Protocol):
    id: str
    dim: int

    def embed_paths(self, paths: Sequence[str]) -> np.ndarray: ...


EMBEDDERS: Registry[Callable[..., Embedder]] = Registry("embedder")


def load_image_rgb(path: str | os.PathLike, min_size: int | None = None) -> Image.Image:
    """Decode any Pillow-readable file to an RGB image (greyscale and 16-bit are rescaled);
    DICOM goes through pydicom (rescale, VOI/window, MONOCHROME1), as everywhere else.

    ``min_size``: a JPEG is decoded at the smallest DCT scale (1/2, 1/4 or 1/8) that keeps both
    sides >= ``min_size`` (libjpeg's draft mode: the inverse DCT and colour conversion run at
    the reduced size, and there is less to resize). The pixels then differ from a full
    decode, so embedders that use it say so in their id. Other formats ignore it.

    The decode is accounted from the header first (``max_decode_bytes`` and the worker budget
    ``max_worker_bytes``, as convert and render account it), and running out of memory while
    decoding is this file's :class:`UndecodableImage` naming the budget, never a crash."""
    try:
        return _load_image_rgb(path, min_size)
    except MemoryError:
        why = budget_reason("decoding it")
        raise UndecodableImage(f"cannot decode image: {why}", path) from None


def _load_image_rgb(path: str | os.PathLike, min_size: int | None) -> Image.Image:
    if is_dicom(path):
        try:
            return Image.fromarray(load_dicom_rgb(path))
        except (OSError, ValueError, ImageProblem) as exc:
            raise UndecodableImage(f"cannot decode DICOM: {exc}", path) from None
    try:
        with Image.open(path) as img:
            if min_size and img.format == "JPEG":
                img.draft("RGB", (int(min_size), int(min_size)))
            decode_limit(img.width, img.height)  # the size to decode, before decoding
            img.load()
            img = displayed(img)  # EXIF orientation applied, as every other reader does
            if img.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
                arr = np.asarray(img, dtype=np.float32)
                lo, hi = float(arr.min()), float(arr.max())
                arr = (arr - lo) / (hi - lo or 1.0) * 255.0
                return Image.fromarray(arr.astype(np.uint8)).convert("RGB")
            return img.convert("RGB")
    except (OSError, ValueError, ImageProblem, Image.DecompressionBombError) as exc:
        raise UndecodableImage(f"cannot decode image: {exc}", path) from exc


def l2_normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def prefetch_batches(
    items: Sequence[str],
    load: Callable[[str], T],
    batch_size: int,
    workers: int,
    depth: int = 2,
) -> Iterator[list[T]]:
    """Yield ``load``-ed batches in order while the next ``depth`` batches load in threads.

    Decoding and resizing (Pillow, numpy, skimage) release the GIL, so a thread pool overlaps
    them with the caller's forward pass without the start-up cost of worker processes.
    ``depth=0``: no overlap, each batch is loaded by all workers while the caller waits (for a
    CPU forward that already uses every core: the two phases then take turns on all cores
    instead of preempting each other's threads).
    """
    starts = list(range(0, len(items), batch_size))
    if workers <= 0:
        for s in starts:
            yield [load(p) for p in items[s : s + batch_size]]
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        if depth <= 0:
            for s in starts:
                yield list(pool.map(load, items[s : s + batch_size]))
            return

        def submit(start: int) -> list[Future]:
            return [pool.submit(load, p) for p in items[start : start + batch_size]]

        pending = [submit(s) for s in starts[:depth]]
        for nxt in range(depth, len(starts) + depth):
            batch = [f.result() for f in pending.pop(0)]
            if nxt < len(starts):
                pending.append(submit(starts[nxt]))
            yield batch


def default_workers() -> int:
    return max(1, min(32, (os.cpu_count() or 2) - 1))
