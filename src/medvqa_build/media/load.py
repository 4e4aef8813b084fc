"""One decoder entry point for every 2-D image reference: DICOM through pydicom, the rest
through cv2, so render, embed, validate and export cannot disagree about the pixels.

The exporters copy file bytes; a DICOM file must never be copied (its header carries patient
data), so :func:`export_image_bytes` re-encodes it as PNG from the decoded pixels only.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import ImageProblem
from .dicom import Window, check_dicom, is_dicom, load_dicom_rgb
from .encode import encode_image
from .image import check_image, load_rgb
from .video import read_frame
from .volume import load_slice_rgb


def load_any_rgb(
    path: str | os.PathLike, window: Window | tuple[float, float] | None = None
) -> np.ndarray:
    """``(H, W, 3)`` uint8 RGB of an image file or a DICOM file (``window`` is DICOM-only)."""
    if is_dicom(path):
        return load_dicom_rgb(path, window=window)
    return load_rgb(path)


def load_ref_rgb(
    path: str | os.PathLike,
    fragment: dict[str, str] | None = None,
    window: Window | tuple[float, float] | None = None,
) -> np.ndarray:
    """RGB of one 2-D image: a file, a video frame (``frame``), a volume slice
    (``slice=axis:index``) or a DICOM (frame of a multi-frame file)."""
    fragment = fragment or {}
    name = str(path).lower()
    if "slice" in fragment and is_dicom(path):
        # a DICOM series stores one slice a file (RSNA lumbar): the fragment says which slice
        # of the study the file is, and the file itself is the image
        return load_dicom_rgb(path, window=window)
    if "slice" in fragment:
        axis, _, index = fragment["slice"].partition(":")
        return load_slice_rgb(path, axis, int(index))
    if "frame" in fragment and not is_dicom(path):
        return read_frame(path, int(fragment["frame"]))
    if "frame" in fragment:
        return load_dicom_rgb(path, window=window, frame=int(fragment["frame"]))
    if name.endswith((".nii", ".nii.gz")):
        raise ImageProblem(f"{path}: a volume needs a slice (#slice=axis:index)")
    return load_any_rgb(path, window=window)


def check_any_image(path: str | os.PathLike, mode: str = "header") -> tuple[int, int]:
    """``(width, height)`` of an image or DICOM file, raising ``ImageProblem`` on a bad one."""
    if is_dicom(path):
        return check_dicom(path, mode)
    return check_image(path, mode)


def export_image_bytes(
    path: str | os.PathLike, window: Window | tuple[float, float] | None = None
) -> tuple[bytes, str]:
    """``(bytes, suffix)`` to publish for an image: the file itself, or for DICOM a PNG of
    the decoded pixels (no header survives)."""
    path = Path(path)
    if is_dicom(path):
        return encode_image(load_dicom_rgb(path, window=window), "png"), ".png"
    return path.read_bytes(), path.suffix.lower() or ".jpg"
