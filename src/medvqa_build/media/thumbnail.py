"""Small JPEG thumbnails as data URIs, for items shown in a notebook (:mod:`medvqa_build.view`):
the page carries its images, so a notebook saved with its outputs still shows them."""

from __future__ import annotations

import base64
import io
import os

from PIL import Image

from .load import load_ref_rgb

THUMB_PX = 256  # the longer side of a thumbnail


def thumbnail_src(
    path: str | os.PathLike, fragment: dict[str, str] | None = None, max_px: int = THUMB_PX
) -> str:
    """``data:image/jpeg;base64,...`` of the image (a file, frame or slice) at most ``max_px``
    on its longer side."""
    image = Image.fromarray(load_ref_rgb(path, fragment))
    image.thumbnail((max_px, max_px))
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=85)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
