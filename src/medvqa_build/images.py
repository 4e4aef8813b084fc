"""Image references of items: ``source://<source>/<relpath>`` for clean source images, or a
path relative to the build directory for rendered ones; encoding rendered images."""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np

SOURCE_SCHEME = "source://"


VIDEO_SUFFIXES = (".mp4", ".avi", ".mkv", ".mov", ".mpg", ".mpeg", ".webm")
VOLUME_SUFFIXES = (".nii", ".nii.gz", ".mha", ".mhd", ".nrrd")
PLAIN_SUFFIXES = (".jpg", ".jpeg", ".png")


def source_ref(source: str, relpath: str) -> str:
    return f"{SOURCE_SCHEME}{source}/{relpath}"


def sample_ref(sample) -> str:
    """The reference of a sample's 2-D image: a frame of a video or a slice of a volume carries
    a fragment (``#frame=25``, ``#slice=axial:40``) naming which one."""
    ref = source_ref(sample.source, sample.image)
    name = sample.image.lower()
    if sample.slice is not None:
        return f"{ref}#slice={sample.slice.axis}:{sample.slice.index}"
    if sample.frame is not None and (
        name.endswith(VIDEO_SUFFIXES) or name.endswith((".dcm", ".dicom"))
    ):
        return f"{ref}#frame={sample.frame}"
    return ref


def split_fragment(ref: str) -> tuple[str, dict[str, str]]:
    """``("source://s/v.mp4", {"frame": "25"})`` from ``"source://s/v.mp4#frame=25"``."""
    base, _, fragment = ref.partition("#")
    parts = dict(p.split("=", 1) for p in fragment.split("&") if "=" in p)
    return base, parts


def is_plain_image(ref: str) -> bool:
    """Whether exporters may publish the referenced file's bytes as they are: a whole JPEG or
    PNG. Frames, slices, DICOM (its header carries patient data) and other formats are
    decoded and re-encoded by the render stage first."""
    base, fragment = split_fragment(ref)
    return not fragment and base.lower().endswith(PLAIN_SUFFIXES)


RENDER_SCHEME = "render://"


def render_ref(relpath: str) -> str:
    return f"{RENDER_SCHEME}{relpath}"


GENERATED_SCHEME = "generated://"


def generated_ref(relpath: str) -> str:
    return f"{GENERATED_SCHEME}{relpath}"


def resolve_image(
    ref: str,
    roots: dict[str, Path],
    render_dir: Path | None = None,
    generated_dir: Path | None = None,
) -> Path:
    """The file an image reference points to: a source file, one a task synthesised in the
    generate stage, or one the render stage wrote (a ``#frame``/``#slice`` fragment is dropped:
    see :func:`split_fragment`).

    The path never leaves its root: an absolute path, a ``..`` that climbs out or a symbolic
    link to a file outside raises ``KeyError`` naming the reference."""
    ref = ref.partition("#")[0]
    if ref.startswith(GENERATED_SCHEME) and generated_dir is not None:
        return _inside(generated_dir, ref[len(GENERATED_SCHEME) :], ref)
    if ref.startswith(SOURCE_SCHEME):
        source, _, rel = ref[len(SOURCE_SCHEME) :].partition("/")
        if source not in roots:
            raise KeyError(f"image {ref!r} names source {source!r}, which this build does not have")
        return _inside(roots[source], rel, ref)
    if ref.startswith(RENDER_SCHEME) and render_dir is not None:
        return _inside(render_dir, ref[len(RENDER_SCHEME) :], ref)
    raise KeyError(f"cannot resolve image reference {ref!r}")


def _inside(root: Path, rel: str, ref: str) -> Path:
    from .layouts.base import contained_path
    from .media.image import ImageProblem

    try:
        return contained_path(Path(root), rel)
    except ImageProblem as exc:
        raise KeyError(f"image reference {ref!r} refused: {exc}") from None


def export_name(ref: str) -> str:
    """A stable, machine-independent file name for an image reference (no absolute paths)."""
    if ref.startswith(SOURCE_SCHEME):
        return ref[len(SOURCE_SCHEME) :]
    if ref.startswith(GENERATED_SCHEME):
        return "generated/" + Path(ref).name
    return "rendered/" + Path(ref).name


def encode_image(rgb: np.ndarray, fmt: str, jpeg_quality: int = 92, png_level: int = 3) -> bytes:
    """Encode deterministically (fixed codec parameters, no metadata)."""
    bgr = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
    if fmt == "jpeg":
        ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, int(jpeg_quality)])
    else:
        ok, buf = cv2.imencode(".png", bgr, [cv2.IMWRITE_PNG_COMPRESSION, int(png_level)])
    if not ok:
        raise OSError(f"cannot encode image as {fmt}")
    return buf.tobytes()


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
