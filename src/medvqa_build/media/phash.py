"""Perceptual image hashes: 64-bit pHash (DCT of a 32x32 grey thumbnail), compared by Hamming
distance. Re-encoding, resizing, mild crops and colour shifts move few bits; different images
differ in about half of them."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence

import cv2
import numpy as np

from .image import load_rgb

HASH_BITS = 64
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".gif")


def phash_array(rgb: np.ndarray) -> int:
    """pHash of a decoded image: sign of the low 8x8 DCT coefficients (DC excluded) vs median."""
    grey = rgb if rgb.ndim == 2 else cv2.cvtColor(rgb[..., :3], cv2.COLOR_RGB2GRAY)
    small = cv2.resize(grey.astype(np.float32), (32, 32), interpolation=cv2.INTER_AREA)
    low = cv2.dct(small)[:8, :8].flatten()
    bits = low > np.median(low[1:])
    bits[0] = False  # the DC term carries brightness only
    return int("".join("1" if b else "0" for b in bits), 2)


def phash_file(path: str | os.PathLike) -> int:
    return phash_array(load_rgb(path))


def phash_bytes(data: bytes) -> int:
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise ValueError("cannot decode image bytes")
    return phash_array(cv2.cvtColor(image, cv2.COLOR_BGR2RGB))


def hamming(a: int, b: int) -> int:
    return (int(a) ^ int(b)).bit_count()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def is_image_file(path: str) -> bool:
    return path.lower().endswith(IMAGE_SUFFIXES)


def hashes_to_bytes(hashes: Sequence[int]) -> np.ndarray:
    """``(n, 8)`` uint8 rows, big-endian, as FAISS binary indexes take them."""
    raw = b"".join(int(h).to_bytes(8, "big") for h in hashes)
    return np.frombuffer(raw, dtype=np.uint8).reshape(-1, 8).copy()


def near_pairs(hashes: Sequence[int], max_hamming: int, queries: Sequence[int] | None = None):
    """``(i, j, distance)`` for every pair within ``max_hamming`` (exhaustive, FAISS binary).

    Without ``queries`` the pairs are within ``hashes`` (``i < j``); with them, ``i`` indexes
    ``queries`` and ``j`` indexes ``hashes``.
    """
    import faiss

    if not len(hashes) or (queries is not None and not len(queries)):
        return []
    index = faiss.IndexBinaryFlat(HASH_BITS)
    index.add(hashes_to_bytes(hashes))
    q = hashes_to_bytes(hashes if queries is None else queries)
    lims, dist, ids = index.range_search(q, int(max_hamming) + 1)  # radius is exclusive
    pairs = []
    for i in range(len(q)):
        for d, j in zip(dist[lims[i] : lims[i + 1]], ids[lims[i] : lims[i + 1]], strict=True):
            if queries is None and j <= i:
                continue
            pairs.append((i, int(j), int(d)))
    return sorted(pairs)
