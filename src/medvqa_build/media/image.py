"""2-D image files: sizes from headers, cheap integrity checks, RGB decode.

Converters must not decode every pixel of a 10^6-image dataset just to list it, yet a
truncated JPEG must not reach a benchmark. ``check_image(mode="header")`` reads the header
with Pillow (lazy: no pixel decode) and checks the end-of-image marker of JPEG and PNG files,
which catches the usual truncated download; ``mode="decode"`` decodes fully.
"""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np
from PIL import Image, UnidentifiedImageError

_JPEG_EOI = b"\xff\xd9"
_PNG_IEND = b"IEND\xaeB`\x82"


class ImageProblem(Exception):
    """A per-file image problem; its message is the quarantine reason."""


def read_image_size(path: str | os.PathLike) -> tuple[int, int]:
    """``(width, height)`` from the file header, without decoding pixels."""
    try:
        with Image.open(path) as im:
            return int(im.width), int(im.height)
    except FileNotFoundError:
        raise ImageProblem("file not found") from None
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        # Pillow's messages name the absolute path; the reason must not (reports are published).
        message = str(exc).replace(str(path), Path(path).name)
        raise ImageProblem(f"not a readable image ({exc.__class__.__name__}: {message})") from None


def _tiff_truncated(path: Path) -> bool:
    """Whether a TIFF's strips or tiles (tags 273/279, 324/325) end past the end of the file:
    the header of a truncated TIFF still reads, only its pixel data is cut."""
    size = path.stat().st_size
    try:
        with Image.open(path) as im:
            tags = getattr(im, "tag_v2", {})
            offsets = tags.get(273) or tags.get(324) or ()
            counts = tags.get(279) or tags.get(325) or ()
    except (UnidentifiedImageError, OSError, ValueError):
        return True
    ends = [int(o) + int(c) for o, c in zip(offsets, counts, strict=False)]
    return bool(ends) and max(ends) > size


def _tail(path: Path, n: int = 32) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - n))
        return fh.read()


def check_image(path: str | os.PathLike, mode: str = "header") -> tuple[int, int]:
    """Return ``(width, height)`` or raise :class:`ImageProblem` naming what is wrong."""
    path = Path(path)
    if not path.is_file():
        if path.is_symlink():
            raise ImageProblem("broken symbolic link (dangling, or a link loop)")
        raise ImageProblem("file not found")
    if path.stat().st_size == 0:
        raise ImageProblem("empty file (0 bytes)")
    width, height = read_image_size(path)
    if width <= 0 or height <= 0:
        raise ImageProblem(f"image has no pixels ({width}x{height})")
    head = path.open("rb").read(8)
    tail = _tail(path)
    if head[:2] == b"\xff\xd8" and _JPEG_EOI not in tail:
        raise ImageProblem("truncated JPEG (no end-of-image marker); re-download the file")
    if head[:8] == b"\x89PNG\r\n\x1a\n" and not tail.endswith(_PNG_IEND):
        raise ImageProblem("truncated PNG (no IEND chunk); re-download the file")
    if head[:4] in (b"II*\x00", b"MM\x00*") and _tiff_truncated(path):
        raise ImageProblem(
            "truncated TIFF (pixel data ends past the end of the file); re-download the file"
        )
    if mode == "decode":
        load_rgb(path)
    return width, height


def load_rgb(path: str | os.PathLike) -> np.ndarray:
    """Decode to an RGB uint8 ``(H, W, 3)`` array (grey and RGBA are converted)."""
    data = np.fromfile(str(path), dtype=np.uint8)
    image = cv2.imdecode(data, cv2.IMREAD_COLOR) if data.size else None
    if image is None:
        raise ImageProblem("cannot decode image pixels (corrupt or unsupported format)")
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def load_mask(path: str | os.PathLike) -> np.ndarray:
    """Decode a mask file to a 2-D array (first channel of a colour mask)."""
    data = np.fromfile(str(path), dtype=np.uint8)
    mask = cv2.imdecode(data, cv2.IMREAD_UNCHANGED) if data.size else None
    if mask is None:
        raise ImageProblem(f"cannot decode mask {Path(path).name}")
    return mask if mask.ndim == 2 else mask[..., 0]
