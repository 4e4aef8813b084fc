"""Image references of items: ``source://<source>/<relpath>`` for clean source images, or a
path relative to the build directory for rendered ones; encoding rendered images."""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np

SOURCE_SCHEME = "source://"


def source_ref(source: str, relpath: str) -> str:
    return f"{SOURCE_SCHEME}{source}/{relpath}"


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
    generate stage, or one the render stage wrote."""
    if ref.startswith(GENERATED_SCHEME) and generated_dir is not None:
        return generated_dir / ref[len(GENERATED_SCHEME) :]
    if ref.startswith(SOURCE_SCHEME):
        source, _, rel = ref[len(SOURCE_SCHEME) :].partition("/")
        if source not in roots:
            raise KeyError(f"image {ref!r} names source {source!r}, which this build does not have")
        return roots[source] / rel
    if ref.startswith(RENDER_SCHEME) and render_dir is not None:
        return render_dir / ref[len(RENDER_SCHEME) :]
    raise KeyError(f"cannot resolve image reference {ref!r}")


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
