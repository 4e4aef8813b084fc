"""A weight-free fallback embedder from hand-made colour, texture and shape features.

Use it when no open_clip weights are available (offline machines, CI, the demo recipe). It
separates classes that differ in colour, texture or coarse layout; it knows nothing of
anatomy, so production benchmarks should name an open_clip model (see docs/negatives.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PIL import Image
from skimage.color import rgb2hsv, rgb2lab
from skimage.feature import local_binary_pattern
from skimage.filters import threshold_otsu
from skimage.measure import moments_central, moments_hu, moments_normalized

from .embedder import EMBEDDERS, default_workers, l2_normalise, load_image_rgb, prefetch_batches

_VERSION = "v1"
_HSV_BINS = (8, 3, 3)
_GRID = 4
_ORIENT_BINS = 9
_LBP_P, _LBP_R = 8, 1.0


def _hist(values: np.ndarray, bins: int, lo: float, hi: float, weights=None) -> np.ndarray:
    h, _ = np.histogram(values, bins=bins, range=(lo, hi), weights=weights)
    return h.astype(np.float32)


def _block(x: np.ndarray, weight: float, sqrt: bool = False) -> np.ndarray:
    """One feature group, Hellinger-mapped if a histogram, normalised then weighted."""
    x = np.asarray(x, dtype=np.float32).ravel()
    if sqrt:
        x = np.sqrt(x / max(float(x.sum()), 1e-12))
    return weight * l2_normalise(x)


def colour_features(rgb: np.ndarray) -> list[np.ndarray]:
    hsv = rgb2hsv(rgb).reshape(-1, 3)
    idx = [np.minimum((hsv[:, i] * b).astype(int), b - 1) for i, b in enumerate(_HSV_BINS)]
    flat = (idx[0] * _HSV_BINS[1] + idx[1]) * _HSV_BINS[2] + idx[2]
    joint = np.bincount(flat, minlength=int(np.prod(_HSV_BINS))).astype(np.float32)
    lab = rgb2lab(rgb).reshape(-1, 3)
    lab_stats = np.concatenate([lab.mean(0) / [100, 128, 128], lab.std(0) / [50, 64, 64]])
    return [_block(joint, 1.0, sqrt=True), _block(lab_stats, 0.6)]


def texture_features(grey: np.ndarray) -> list[np.ndarray]:
    lbp = local_binary_pattern((grey * 255).astype(np.uint8), _LBP_P, _LBP_R, method="uniform")
    lbp_hist = _hist(lbp, _LBP_P + 2, 0, _LBP_P + 2)
    gy, gx = np.gradient(grey)
    mag = np.hypot(gx, gy)
    ang = np.mod(np.arctan2(gy, gx), np.pi)
    h, w = grey.shape
    cells = []
    for rows in (slice(0, h // 2), slice(h // 2, h)):
        for cols in (slice(0, w // 2), slice(w // 2, w)):
            cells.append(_hist(ang[rows, cols], _ORIENT_BINS, 0, np.pi, mag[rows, cols]))
    grad = np.concatenate(cells)
    return [_block(lbp_hist, 0.8, sqrt=True), _block(grad, 0.8, sqrt=True)]


def shape_features(grey: np.ndarray) -> list[np.ndarray]:
    try:
        fg = grey > threshold_otsu(grey)
    except ValueError:  # a constant image has no threshold
        fg = np.zeros_like(grey, dtype=bool)
    if fg.mean() > 0.5:  # foreground = the minority side
        fg = ~fg
    if fg.any():
        hu = moments_hu(moments_normalized(moments_central(fg.astype(np.float64))))
    else:
        hu = np.zeros(7)
    hu = -np.sign(hu) * np.log10(np.abs(hu) + 1e-12) / 12.0
    h, w = grey.shape
    layout = grey[: h - h % _GRID, : w - w % _GRID]
    layout = layout.reshape(_GRID, h // _GRID, _GRID, w // _GRID).mean(axis=(1, 3))
    layout = layout - layout.mean()
    extent = np.array([fg.mean(), fg.any(axis=0).mean(), fg.any(axis=1).mean()])
    return [_block(hu, 0.5), _block(layout, 0.7), _block(extent, 0.4)]


@EMBEDDERS.register("offline")
class OfflineEmbedder:
    """Colour (HSV joint histogram, Lab moments), texture (uniform LBP, gradient orientation
    histograms on a 2x2 grid) and shape (Hu moments of the Otsu foreground, 4x4 intensity
    layout, foreground extent), each block normalised and weighted, the whole L2-normalised."""

    def __init__(self, image_size: int = 128, batch_size: int = 64, workers: int | None = None):
        self.image_size, self.batch_size = int(image_size), int(batch_size)
        self.workers = default_workers() if workers is None else int(workers)
        self.id = f"offline:{_VERSION}:size{self.image_size}"
        self.dim = int(self.embed_array(np.zeros((8, 8, 3), np.uint8)).shape[0])

    def embed_array(self, rgb: np.ndarray) -> np.ndarray:
        img = Image.fromarray(np.asarray(rgb, dtype=np.uint8)).convert("RGB")
        img = img.resize((self.image_size, self.image_size), Image.Resampling.BILINEAR)
        arr = np.asarray(img, dtype=np.float32) / 255.0
        grey = arr @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
        blocks = colour_features(arr) + texture_features(grey) + shape_features(grey)
        return l2_normalise(np.concatenate(blocks))

    def _load(self, path: str) -> np.ndarray:
        return self.embed_array(np.asarray(load_image_rgb(path)))

    def embed_paths(self, paths: Sequence[str]) -> np.ndarray:
        out = np.empty((len(paths), self.dim), dtype=np.float32)
        row = 0
        for batch in prefetch_batches(list(paths), self._load, self.batch_size, self.workers):
            out[row : row + len(batch)] = np.stack(batch)
            row += len(batch)
        return out
