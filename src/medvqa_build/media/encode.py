"""Encoding decoded pixels for the files a build writes: deterministic (fixed codec
parameters, no metadata), so the same pixels always give the same bytes."""

from __future__ import annotations

import cv2
import numpy as np


def encode_bgr(bgr: np.ndarray, fmt: str, jpeg_quality: int = 92, png_level: int = 3):
    """cv2's encoded buffer of a BGR image (bytes-like: written as it is, not copied)."""
    if fmt == "jpeg":
        ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, int(jpeg_quality)])
    else:
        ok, buf = cv2.imencode(".png", bgr, [cv2.IMWRITE_PNG_COMPRESSION, int(png_level)])
    if not ok:
        raise OSError(f"cannot encode image as {fmt}")
    return buf


def encode_image(rgb: np.ndarray, fmt: str, jpeg_quality: int = 92, png_level: int = 3) -> bytes:
    """The encoded bytes of an RGB image (``fmt``: ``jpeg`` or ``png``)."""
    bgr = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
    return encode_bgr(bgr, fmt, jpeg_quality, png_level).tobytes()
