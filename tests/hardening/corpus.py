"""Malformed files, written by the tests: each helper returns the bytes (or writes the file)
of one kind of damage a public dataset download really shows."""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np

from ..fixtures.images import write_jpeg


def jpeg_bytes(seed: int = 7, size_wh=(64, 48)) -> bytes:
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 255, (size_wh[1], size_wh[0], 3), dtype=np.uint8)
    return cv2.imencode(".jpg", img)[1].tobytes()


def png_bytes(array: np.ndarray) -> bytes:
    return cv2.imencode(".png", array)[1].tobytes()


def tiff_bytes(seed: int = 7, size_wh=(64, 48)) -> bytes:
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 255, (size_wh[1], size_wh[0], 3), dtype=np.uint8)
    return cv2.imencode(".tif", img)[1].tobytes()


def rgb(seed: int = 7, size_wh=(64, 48)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 255, (size_wh[1], size_wh[0], 3), np.uint8)


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def zero_byte(path: Path) -> Path:
    return write(path, b"")


def truncated_jpeg(path: Path) -> Path:
    data = jpeg_bytes()
    return write(path, data[: len(data) // 2])


def truncated_png(path: Path, size_wh=(64, 48)) -> Path:
    data = png_bytes(rgb(size_wh=size_wh))
    return write(path, data[: len(data) // 2])


def truncated_tiff(path: Path, size_wh=(64, 48)) -> Path:
    data = tiff_bytes(size_wh=size_wh)
    return write(path, data[: len(data) // 2])


def not_an_image(path: Path) -> Path:
    return write(path, b"<html>404 Not Found</html>\n")


def symlink_loop(path: Path) -> Path:
    """``path`` -> itself: stat() fails with ELOOP."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(path.name, path)
    return path


def dir_symlink_loop(folder: Path) -> Path:
    """``folder/loop`` -> ``..``: a walker that follows links never ends."""
    folder.mkdir(parents=True, exist_ok=True)
    os.symlink("..", folder / "loop")
    return folder / "loop"


__all__ = ["write_jpeg"]


def pil_tiff_bytes(seed: int = 7, size_wh=(64, 48)) -> bytes:
    """An uncompressed TIFF with its directory first (Pillow's order): cutting the file
    leaves a readable header and missing pixel strips."""
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(rgb(seed, size_wh)).save(buf, "TIFF")
    return buf.getvalue()
