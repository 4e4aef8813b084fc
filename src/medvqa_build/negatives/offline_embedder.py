"""A weight-free fallback embedder from hand-made colour, texture and shape features.

Use it when no open_clip weights are available (offline machines, CI, the demo recipe). It
separates classes that differ in colour, texture or coarse layout; it knows nothing of
anatomy, so production benchmarks should name an open_clip model (see docs/negatives.md).

Each image is decoded straight to a small thumbnail (a JPEG at the smallest DCT scale that
still covers ``image_size``: libjpeg's draft mode) and every feature is computed on that
thumbnail with cv2 and numpy, a few milliseconds an image (``benchmarks/bench_offline_embed.py``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache

import cv2
import numpy as np

from .embedder import EMBEDDERS, l2_normalise, load_image_rgb, prefetch_batches

# v2: draft-decoded thumbnail, features by cv2/numpy (v1: full decode, skimage features)
_VERSION = "v2"
_HSV_BINS = (8, 3, 3)
_HSV_RANGES = [0, 180, 0, 256, 0, 256]  # cv2's 8-bit HSV: hue in degrees / 2
_GRID = 4
_ORIENT_BINS = 9
# The 8 neighbours at radius 1 in circular order (uniform LBP counts 0/1 transitions around it).
_RING = ((0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1), (1, 0), (1, 1))
_LBP_BINS = len(_RING) + 2  # P + 1 uniform codes (by number of ones) and one for the rest


def _uniform_lut() -> np.ndarray:
    """8-bit LBP code -> rotation-invariant uniform label (skimage's ``method="uniform"``)."""
    lut = np.empty(256, np.uint8)
    p = len(_RING)
    for code in range(256):
        bits = [(code >> i) & 1 for i in range(p)]
        changes = sum(bits[i] != bits[(i + 1) % p] for i in range(p))
        lut[code] = sum(bits) if changes <= 2 else p + 1
    return lut


_LBP_LUT = _uniform_lut()
_ORIENT_LUT = np.arange(256, dtype=np.intp) % _ORIENT_BINS  # bin of [0, 360) -> of [0, 180)


@lru_cache(maxsize=8)
def _cell_offsets(h: int, w: int) -> np.ndarray:
    """Per pixel of an ``h`` x ``w`` image: its 2x2 grid cell times ``_ORIENT_BINS``."""
    rows, cols = np.arange(h) >= h // 2, np.arange(w) >= w // 2
    offsets = ((rows[:, None] * 2 + cols[None, :]) * _ORIENT_BINS).astype(np.intp).ravel()
    offsets.setflags(write=False)  # shared by the worker threads
    return offsets


def _block(x: np.ndarray, weight: float, sqrt: bool = False) -> np.ndarray:
    """One feature group, Hellinger-mapped if a histogram, normalised then weighted."""
    x = np.asarray(x, dtype=np.float32).ravel()
    if sqrt:
        x = np.sqrt(x / max(float(x.sum()), 1e-12))
    return weight * l2_normalise(x)


def thumbnail(rgb: np.ndarray, size: int) -> np.ndarray:
    """``rgb`` (uint8, H x W x 3) as a ``size`` x ``size`` uint8 image: area averaging when
    both sides shrink, bilinear otherwise (tiny images)."""
    h, w = rgb.shape[:2]
    if (h, w) == (size, size):
        return np.ascontiguousarray(rgb)
    interp = cv2.INTER_AREA if h >= size and w >= size else cv2.INTER_LINEAR
    return cv2.resize(rgb, (size, size), interpolation=interp)


def load_thumbnail(path: str | os.PathLike, size: int) -> np.ndarray:
    """Decode an image file to a ``size`` x ``size`` RGB uint8 thumbnail: a JPEG at the
    smallest DCT scale whose sides stay >= ``size``; grey, RGBA and 16-bit files as
    ``load_image_rgb`` makes them RGB (16-bit: min-max rescaled)."""
    return thumbnail(np.asarray(load_image_rgb(path, min_size=size)), size)


def colour_features(rgb: np.ndarray) -> list[np.ndarray]:
    hsv = cv2.cvtColor(rgb, cv2.COLOR_RGB2HSV)
    joint = cv2.calcHist([hsv], [0, 1, 2], None, list(_HSV_BINS), _HSV_RANGES)
    mean, std = cv2.meanStdDev(cv2.cvtColor(rgb, cv2.COLOR_RGB2Lab))
    mean, std = mean.ravel(), std.ravel()
    # 8-bit Lab: L scaled to 0..255, a and b offset by 128
    lab_stats = np.array(
        [
            mean[0] / 255.0,
            (mean[1] - 128.0) / 128.0,
            (mean[2] - 128.0) / 128.0,
            std[0] / 127.5,
            std[1] / 64.0,
            std[2] / 64.0,
        ]
    )
    return [_block(joint, 1.0, sqrt=True), _block(lab_stats, 0.6)]


def texture_features(grey: np.ndarray) -> list[np.ndarray]:
    h, w = grey.shape
    padded = cv2.copyMakeBorder(grey, 1, 1, 1, 1, cv2.BORDER_REPLICATE)
    code = np.zeros((h, w), np.uint8)
    for bit, (dy, dx) in enumerate(_RING):
        ge = cv2.compare(padded[1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w], grey, cv2.CMP_GE)
        cv2.bitwise_or(code, cv2.bitwise_and(ge, 1 << bit), dst=code)
    lbp_hist = cv2.calcHist([cv2.LUT(code, _LBP_LUT)], [0], None, [_LBP_BINS], [0, _LBP_BINS])
    g = grey.astype(np.float32) * (1.0 / 255.0)
    gx = cv2.Sobel(g, cv2.CV_32F, 1, 0, ksize=1, borderType=cv2.BORDER_REPLICATE)
    gy = cv2.Sobel(g, cv2.CV_32F, 0, 1, ksize=1, borderType=cv2.BORDER_REPLICATE)
    mag, deg = cv2.cartToPolar(gx, gy, angleInDegrees=True)  # [0, 360)
    orient = _ORIENT_LUT[(deg * (_ORIENT_BINS / 180.0)).astype(np.uint8)]  # mod 180 degrees
    cells = np.bincount(
        _cell_offsets(h, w) + orient.ravel(), weights=mag.ravel(), minlength=4 * _ORIENT_BINS
    )
    return [_block(lbp_hist, 0.8, sqrt=True), _block(cells, 0.8, sqrt=True)]


def shape_features(grey: np.ndarray) -> list[np.ndarray]:
    _, fg = cv2.threshold(grey, 0, 1, cv2.THRESH_BINARY | cv2.THRESH_OTSU)
    area = float(fg.mean())
    if area > 0.5:  # foreground = the minority side
        fg, area = 1 - fg, 1.0 - area
    moments = cv2.moments(fg, binaryImage=True)
    hu = cv2.HuMoments(moments).ravel() if moments["m00"] > 0 else np.zeros(7)
    hu = -np.sign(hu) * np.log10(np.abs(hu) + 1e-12) / 12.0
    layout = cv2.resize(grey, (_GRID, _GRID), interpolation=cv2.INTER_AREA).astype(np.float32)
    layout = (layout - layout.mean()) / 255.0
    extent = np.array([area, fg.max(axis=0).mean(), fg.max(axis=1).mean()])
    return [_block(hu, 0.5), _block(layout, 0.7), _block(extent, 0.4)]


def thumbnail_features(rgb: np.ndarray) -> np.ndarray:
    """The L2-normalised feature vector of a uint8 RGB thumbnail."""
    grey = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
    blocks = colour_features(rgb) + texture_features(grey) + shape_features(grey)
    return l2_normalise(np.concatenate(blocks))


@EMBEDDERS.register("offline")
class OfflineEmbedder:
    """Colour (HSV joint histogram, Lab moments), texture (uniform LBP, gradient orientation
    histograms on a 2x2 grid) and shape (Hu moments of the Otsu foreground, 4x4 intensity
    layout, foreground extent), each block normalised and weighted, the whole L2-normalised.

    ``workers``: decode-and-feature threads (default: one per core, at most 8; the calling
    thread only collects rows). Pillow's decoder and cv2 release the GIL, the small numpy
    steps do not, so threads beyond a few add little."""

    def __init__(self, image_size: int = 128, batch_size: int = 64, workers: int | None = None):
        self.image_size, self.batch_size = int(image_size), int(batch_size)
        self.workers = min(8, os.cpu_count() or 1) if workers is None else int(workers)
        self.id = f"offline:{_VERSION}:size{self.image_size}"
        self.dim = int(self.embed_array(np.zeros((8, 8, 3), np.uint8)).shape[0])

    def embed_array(self, rgb: np.ndarray) -> np.ndarray:
        arr = np.asarray(rgb)
        if arr.ndim == 3 and arr.shape[2] < 3:  # grey, or grey + alpha
            arr = arr[:, :, 0]
        if arr.ndim == 2:
            arr = np.repeat(arr[:, :, None], 3, axis=2)
        arr = np.ascontiguousarray(arr[:, :, :3], dtype=np.uint8)  # RGBA: alpha dropped
        return thumbnail_features(thumbnail(arr, self.image_size))

    def _load(self, path: str) -> np.ndarray:
        return thumbnail_features(load_thumbnail(path, self.image_size))

    def embed_paths(self, paths: Sequence[str]) -> np.ndarray:
        out = np.empty((len(paths), self.dim), dtype=np.float32)
        row = 0
        for batch in prefetch_batches(list(paths), self._load, self.batch_size, self.workers):
            out[row : row + len(batch)] = np.stack(batch)
            row += len(batch)
        return out
