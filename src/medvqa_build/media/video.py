"""Video files: header facts and single frames, so a surgical video need not be split on disk.

Surgical datasets (Cholec80) ship whole videos with per-frame tables; a sample is a frame
index into the video. OpenCV's ``VideoCapture`` reads the container header cheaply; seeking
to one frame decodes from the previous key frame only.
"""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np

from ..errors import ImageProblem
from ..store.limits import read_limits
from ..store.paths import not_a_file
from .image import decode_limit


class VideoProblem(Exception):
    """A per-file video problem; its message is the quarantine reason."""


def _open(path: str | os.PathLike) -> cv2.VideoCapture:
    path = Path(path)
    if not path.is_file():
        raise VideoProblem(f"video {not_a_file(path)}")
    if path.stat().st_size == 0:
        raise VideoProblem("empty video file (0 bytes)")
    capture = cv2.VideoCapture(str(path))
    if not capture.isOpened():
        capture.release()
        raise VideoProblem("cannot open video (truncated or unsupported container); re-download it")
    return capture


def video_info(path: str | os.PathLike) -> tuple[int, float, int, int]:
    """``(n_frames, fps, width, height)`` from the container header, no frame decoded."""
    capture = _open(path)
    try:
        n_frames = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
        fps = float(capture.get(cv2.CAP_PROP_FPS))
        width = int(capture.get(cv2.CAP_PROP_FRAME_WIDTH))
        height = int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT))
    finally:
        capture.release()
    if n_frames <= 0 or width <= 0 or height <= 0:
        raise VideoProblem(f"video header reports {n_frames} frames of {width}x{height} pixels")
    limit = read_limits().max_frames
    if n_frames > limit:
        raise VideoProblem(
            f"video header declares {n_frames:,} frames, over the max_frames limit of "
            f"{limit:,}; raise it (MEDVQA_LIMITS=max_frames=...) if the file is genuine"
        )
    try:
        decode_limit(width, height)  # each frame is decoded whole
    except ImageProblem as exc:
        raise VideoProblem(f"video frames: {exc}") from None
    return n_frames, fps, width, height


def read_frame(path: str | os.PathLike, index: int) -> np.ndarray:
    """Decode frame ``index`` (0-based) to an RGB uint8 ``(H, W, 3)`` array."""
    if index < 0:
        raise VideoProblem(f"frame index {index} is negative")
    capture = _open(path)
    try:
        capture.set(cv2.CAP_PROP_POS_FRAMES, index)
        ok, frame = capture.read()
    finally:
        capture.release()
    if not ok or frame is None:
        raise VideoProblem(f"cannot decode frame {index} (truncated video or index past the end)")
    return cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)


def frame_problems(path: str | os.PathLike, indices: list[int]) -> dict[int, str]:
    """Decode the given frames in one sequential pass; return ``{index: reason}`` for failures."""
    problems: dict[int, str] = {}
    capture = _open(path)
    try:
        position = 0
        for index in sorted(set(indices)):
            ok = True
            while ok and position < index:
                ok = capture.grab()
                position += 1
            if ok:
                ok, frame = capture.read()
                position += 1
                ok = ok and frame is not None
            if not ok:
                problems[index] = f"cannot decode frame {index} (truncated video?)"
    finally:
        capture.release()
    return problems
