"""NIfTI volumes as 2-D slices: one canonical orientation, CT windows, MRI percentile scaling.

Every volume (image and label alike) is reoriented to the closest canonical RAS+ orientation
(``nib.as_closest_canonical``) so that a slice index means the same plane whatever the
scanner wrote, and every slice is turned into a 2-D array the same way:

- ``axial``    (fixed z): rows anterior -> posterior, columns patient right -> left;
- ``coronal``  (fixed y): rows superior -> inferior, columns patient right -> left;
- ``sagittal`` (fixed x): rows superior -> inferior, columns anterior -> posterior.

This is the radiological display convention (patient's right on the image's left).
"""

from __future__ import annotations

import math
import os
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..store.limits import read_limits
from ..store.paths import not_a_file

AXES = ("axial", "coronal", "sagittal")
# axis name -> index of the RAS+ array dimension held fixed
_FIXED_DIM = {"sagittal": 0, "coronal": 1, "axial": 2}

# CT windows (level, width) in HU; values as commonly used in radiology teaching material
# (e.g. Radiopaedia "Windowing (CT)"): abdomen soft tissue, lung, bone, brain, mediastinum.
CT_WINDOWS: dict[str, tuple[float, float]] = {
    "abdomen": (40.0, 400.0),
    "soft_tissue": (50.0, 350.0),
    "mediastinum": (50.0, 350.0),
    "lung": (-600.0, 1500.0),
    "bone": (400.0, 1800.0),
    "brain": (40.0, 80.0),
}
MRI_PERCENTILES = (0.5, 99.5)


class VolumeProblem(Exception):
    """A per-file volume problem (unreadable, wrong shape, slice out of range): a quarantine
    reason."""


def _nib():
    import nibabel as nib

    return nib


# deflate never packs more than 1032 bytes into one (zlib's "maximum compression factor"), so
# a gzip file of K bytes holds at most 1032 K: a cheap bound on what a .nii.gz can unpack to
_GZIP_MAX_RATIO = 1032


def check_declared_size(img, path: str | os.PathLike) -> None:
    """Raise :class:`VolumeProblem` when the header's shape is over ``max_voxels`` or needs
    more data than the file holds (``declares N voxels but the file is K bytes``): checked on
    the header alone, before any voxel is read or allocated (a 5 kB file may claim 1300^3)."""
    name = Path(path).name
    shape = tuple(int(d) for d in img.shape)
    voxels = math.prod(shape)
    limit = read_limits().max_voxels
    if voxels > limit:
        raise VolumeProblem(
            f"volume {name} declares {'x'.join(map(str, shape))} = {voxels:,} voxels, over the "
            f"max_voxels limit of {limit:,}; raise it (MEDVQA_LIMITS=max_voxels=...) if the file "
            "is genuine"
        )
    image_file = getattr(img.file_map.get("image"), "filename", None) or path
    try:
        size = os.path.getsize(image_file)
        with open(image_file, "rb") as fh:
            gzipped = fh.read(2) == b"\x1f\x8b"
    except OSError:
        return  # nibabel read it a moment ago; reading the voxels will say what is wrong
    need = int(getattr(img.dataobj, "offset", 0)) + voxels * img.get_data_dtype().itemsize
    holds = size * _GZIP_MAX_RATIO if gzipped else size
    if need > holds:
        packed = f" (gzip: at most {holds:,} bytes unpacked)" if gzipped else ""
        raise VolumeProblem(
            f"volume {name} declares {voxels:,} voxels ({need:,} bytes) but the file is "
            f"{size:,} bytes{packed}; the header is damaged or the download was cut short"
        )


def load_canonical(path: str | os.PathLike):
    """The NIfTI image reoriented to RAS+ (lazy: pixel data is read on first access); a
    header whose size is over the limits or beyond the file is refused first."""
    nib = _nib()
    if not os.path.isfile(path):  # a FIFO or a device would block nibabel's read
        raise VolumeProblem(f"volume {Path(path).name}: {not_a_file(path)}")
    try:
        img = nib.load(str(path))
        check_declared_size(img, path)
        if len(img.shape) == 2:  # 2-D NIfTI (e.g. CAMUS ultrasound frames): one-slice volume
            img = nib.Nifti1Image(np.asanyarray(img.dataobj)[..., None], img.affine)
        return nib.as_closest_canonical(img)
    except FileNotFoundError:
        raise VolumeProblem(f"volume {Path(path).name} not found") from None
    except VolumeProblem:
        raise
    except Exception as exc:  # nibabel raises many types for a damaged file
        message = str(exc).replace(str(path), Path(path).name)  # no absolute path in reasons
        raise VolumeProblem(
            f"cannot read volume {Path(path).name} ({exc.__class__.__name__}: {message})"
        ) from None


def slice_spacing(spacing: tuple[float, float, float], axis: str) -> tuple[float, float]:
    """``(row, column)`` pixel spacing in mm of a slice along ``axis``."""
    sx, sy, sz = spacing
    return {"axial": (sy, sx), "coronal": (sz, sx), "sagittal": (sz, sy)}[axis]


def slice_shape_hw(shape_xyz: tuple[int, ...], axis: str) -> tuple[int, int]:
    """Height and width of a slice along ``axis`` of a RAS+ volume of ``shape_xyz``."""
    x, y, z = shape_xyz[:3]
    return {"axial": (y, x), "coronal": (z, x), "sagittal": (z, y)}[axis]


def check_axis(axis: str) -> str:
    if axis not in AXES:
        raise ValueError(f"unknown slice axis {axis!r}; use one of {list(AXES)}")
    return axis


def slice_2d(volume: np.ndarray, axis: str, index: int) -> np.ndarray:
    """The ``index``-th slice of a RAS+ array (3-D, or 4-D with channels last) as ``(H, W)``
    (or ``(H, W, C)``) in the display convention of this module."""
    dim = _FIXED_DIM[check_axis(axis)]
    if not 0 <= index < volume.shape[dim]:
        raise VolumeProblem(f"{axis} slice {index} is outside 0..{volume.shape[dim] - 1}")
    plane = np.take(volume, index, axis=dim)  # axial: (x, y); coronal: (x, z); sagittal: (y, z)
    plane = np.swapaxes(plane, 0, 1)  # rows = 2nd remaining RAS axis, columns = 1st
    # rows: anterior (axial) or superior first; columns: patient right (high x) or, in a
    # sagittal slice, anterior (high y) first
    return np.ascontiguousarray(plane[::-1, ::-1])


@lru_cache(maxsize=4)
def _volume_data(path: str, channel: int | None) -> np.ndarray:
    img = load_canonical(path)
    data = np.asanyarray(img.dataobj)
    if data.ndim == 4:
        data = data[..., 0 if channel is None else channel]
    elif data.ndim != 3:
        raise VolumeProblem(f"volume {Path(path).name} has {data.ndim} dimensions, expected 3 or 4")
    return data


def load_volume(path: str | os.PathLike, channel: int | None = None) -> np.ndarray:
    """The RAS+ voxel array (one channel of a 4-D file); the last few are cached."""
    return _volume_data(str(path), channel)


def window_to_uint8(
    values: np.ndarray,
    window: str | tuple[float, float] | None,
    reference: np.ndarray | None = None,
) -> np.ndarray:
    """Grey levels 0..255: a CT window by name or ``(level, width)``; ``None``/``"mri"``
    scales between the 0.5th and 99.5th percentiles of ``reference`` (default: ``values``).
    NaN and infinite voxels (resampled volumes hold NaN outside the field of view) are left
    out of the percentiles and shown black."""
    values = np.asarray(values, dtype=np.float32)
    if window in (None, "mri", "percentile"):
        ref = values if reference is None else np.asarray(reference, dtype=np.float32)
        lo, hi = _finite_percentiles(ref)
    else:
        if isinstance(window, str):
            if window not in CT_WINDOWS:
                raise ValueError(
                    f"unknown window {window!r}; use one of {sorted(CT_WINDOWS)}, "
                    "'mri' or (level, width)"
                )
            window = CT_WINDOWS[window]
        level, width = window
        lo, hi = level - width / 2, level + width / 2
    if not hi > lo:  # also when a bound is NaN
        return np.zeros(values.shape, dtype=np.uint8)
    scaled = (np.clip(values, lo, hi) - lo) / (hi - lo) * 255.0
    return np.round(np.nan_to_num(scaled, nan=0.0)).astype(np.uint8)


def _finite_percentiles(values: np.ndarray) -> tuple[float, float]:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return 0.0, 0.0
    lo, hi = np.percentile(finite, MRI_PERCENTILES)
    return float(lo), float(hi)


def load_slice_rgb(
    path: str | os.PathLike,
    axis: str,
    index: int,
    window: str | tuple[float, float] | None = None,
    channel: int | None = None,
) -> np.ndarray:
    """One slice as RGB uint8 ``(H, W, 3)``; MRI scaling uses the whole volume's percentiles
    so neighbouring slices of one volume share grey levels."""
    plane = slice_2d(load_volume(path, channel), axis, index)
    if window in (None, "mri", "percentile"):
        window = _percentile_range(str(path), channel)
    grey = window_to_uint8(plane, window)
    return np.repeat(grey[..., None], 3, axis=2)


def load_label_slice(path: str | os.PathLike, axis: str, index: int) -> np.ndarray:
    """One slice of a label volume as integer values ``(H, W)``."""
    return np.rint(slice_2d(load_volume(path), axis, index)).astype(np.int32)


@lru_cache(maxsize=16)
def _percentile_range(path: str, channel: int | None) -> tuple[float, float]:
    """MRI scaling as a (level, width) window from the volume's percentiles."""
    # every 2nd voxel per axis: the same percentiles within noise, 8x less work
    sub = np.asarray(load_volume(path, channel)[::2, ::2, ::2], dtype=np.float32)
    lo, hi = _finite_percentiles(sub)
    return (lo + hi) / 2, max(hi - lo, 1e-6)


def plane_to_voxel(
    axis: str, row: int, col: int, index: int, shape_xyz: tuple[int, ...]
) -> tuple[int, int, int]:
    """RAS+ voxel ``(x, y, z)`` of pixel ``(row, col)`` of slice ``index`` along ``axis``
    (the inverse of :func:`slice_2d`'s flips)."""
    x_n, y_n, z_n = shape_xyz[:3]
    if axis == "axial":
        return x_n - 1 - col, y_n - 1 - row, index
    if axis == "coronal":
        return x_n - 1 - col, index, z_n - 1 - row
    if axis == "sagittal":
        return index, y_n - 1 - col, z_n - 1 - row
    raise ValueError(f"unknown slice axis {axis!r}; use one of {list(AXES)}")


def voxel_index(axis: str, voxel: tuple[int, int, int]) -> int:
    """The slice index along ``axis`` that contains ``voxel``."""
    return int(voxel[_FIXED_DIM[check_axis(axis)]])
