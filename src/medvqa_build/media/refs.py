"""Image references of items: ``source://<source>/<relpath>`` for clean source images,
``render://`` and ``generated://`` for the files the build wrote, with fragments naming a
video frame or a volume slice; resolving a reference to its file."""

from __future__ import annotations

from pathlib import Path

from ..errors import ImageProblem
from ..store.paths import contained_path
from ..vocab import GENERATED_SCHEME, RENDER_SCHEME, SOURCE_SCHEME

VIDEO_SUFFIXES = (".mp4", ".avi", ".mkv", ".mov", ".mpg", ".mpeg", ".webm")
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


def render_ref(relpath: str) -> str:
    return f"{RENDER_SCHEME}{relpath}"


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
