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
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..store.limits import decode_problem, read_limits
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
# voxels scaled at a time (scl_slope / scl_inter): the float64 temporaries of nibabel's
# scaling are one slab's, the array kept is float32
_SLAB_VOXELS = 1 << 22
_CANONICAL = [[0, 1], [1, 1], [2, 1]]


def _scaling(img) -> tuple[float, float] | None:
    """``(slope, inter)`` the header applies to the stored voxels, or None when it applies
    none (slope 1 and inter 0, or unset)."""
    proxy = img.dataobj
    slope, inter = getattr(proxy, "slope", 1.0), getattr(proxy, "inter", 0.0)
    return None if (slope, inter) == (1, 0) else (slope, inter)


def loaded_dtype(img) -> np.dtype:
    """The dtype :func:`load_volume` gives the voxels of ``img``: float32 when the header
    scales them (nibabel's own read would give float64, 8 bytes a voxel: a 512x512x600 CT
    is then 1.26 GB) or when they are stored as a wider float; else the stored dtype. Every
    reader turns voxels into float32 grey levels or rounds label values, so float32 gives
    the same pixels."""
    stored = np.dtype(img.get_data_dtype())
    if _scaling(img) is not None or (stored.kind == "f" and stored.itemsize > 4):
        return np.dtype(np.float32)
    return stored


def _decode_bytes(img, shape: tuple[int, ...]) -> tuple[int, int]:
    """``(kept, peak)`` bytes of reading one channel of ``img``: the array kept (a 3-D
    channel in :func:`loaded_dtype`), and at once the stored voxels of the whole file, that
    array and one slab's float64 scaling temporaries."""
    stored = np.dtype(img.get_data_dtype()).itemsize
    out = loaded_dtype(img)
    channel = math.prod(shape[:3])
    kept = channel * out.itemsize
    peak = math.prod(shape) * stored
    if out != np.dtype(img.get_data_dtype()):
        peak += kept + 2 * 8 * min(channel, _SLAB_VOXELS)
    return kept, peak


def check_declared_size(img, path: str | os.PathLike) -> None:
    """Raise :class:`VolumeProblem` when the header's shape is over ``max_voxels``, needs
    more data than the file holds (``declares N voxels but the file is K bytes``), or more
    memory than the decode budget once read (voxels x the item size :func:`load_volume`
    gives, against ``max_decode_bytes``; with the stored voxels and the scaling's
    temporaries, against ``max_worker_bytes``): checked on the header alone, before any
    voxel is read or allocated (a 5 kB file may claim 1300^3)."""
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
    kept, peak = _decode_bytes(img, shape)
    what = f"reading volume {name} ({'x'.join(map(str, shape[:3]))} as {loaded_dtype(img)})"
    why = decode_problem(kept, what, peak)
    if why:
        raise VolumeProblem(why)


def _open(path: str | os.PathLike):
    """The NIfTI image as stored (lazy), its size checked (:func:`check_declared_size`);
    every failure a :class:`VolumeProblem` naming the file, never its absolute path."""
    nib = _nib()
    if not os.path.isfile(path):  # a FIFO or a device would block nibabel's read
        raise VolumeProblem(f"volume {Path(path).name}: {not_a_file(path)}")
    try:
        img = nib.load(str(path))
        check_declared_size(img, path)
        return img
    except FileNotFoundError:
        raise VolumeProblem(f"volume {Path(path).name} not found") from None
    except VolumeProblem:
        raise
    except Exception as exc:  # nibabel raises many types for a damaged file
        raise _unreadable(path, exc) from None


def _unreadable(path: str | os.PathLike, exc: Exception) -> VolumeProblem:
    message = str(exc).replace(str(path), Path(path).name)  # no absolute path in reasons
    return VolumeProblem(
        f"cannot read volume {Path(path).name} ({exc.__class__.__name__}: {message})"
    )


def _read_voxels(img, channel: int | None, whole: bool = False) -> np.ndarray:
    """The stored voxels of ``img`` (one channel of a 4-D file: ``channel``, default the
    first; every channel when ``whole``) in :func:`loaded_dtype`: read once as stored, then
    scaled a slab at a time into a float32 array with nibabel's own arithmetic (the values
    of nibabel's float64 read, rounded to float32, as every reader of them rounds them)."""
    from nibabel.volumeutils import apply_read_scaling

    proxy = img.dataobj
    out_dtype = loaded_dtype(img)
    if not hasattr(proxy, "get_unscaled"):  # not an ArrayProxy: nibabel scales it whole
        data = np.asanyarray(proxy)
        if data.ndim == 4 and not whole:
            data = data[..., 0 if channel is None else channel]
        return data.astype(out_dtype, copy=False)
    raw = proxy.get_unscaled()
    if raw.ndim == 4 and not whole:
        raw = raw[..., 0 if channel is None else channel]
        if raw.dtype == out_dtype:
            return np.array(raw)  # not a view that keeps every channel
    if raw.dtype == out_dtype:
        return raw
    out = np.empty_like(raw, dtype=out_dtype)  # the stored order (Fortran), so slabs line up
    scaling = _scaling(img)
    if scaling is None:
        out[...] = raw  # a wider float narrowed: numpy casts in buffered blocks
        return out
    slope, inter = np.asanyarray(scaling[0]), np.asanyarray(scaling[1])
    if raw.flags.f_contiguous or raw.flags.c_contiguous:
        order = "F" if raw.flags.f_contiguous else "C"  # views of both, in memory order
        flat_raw, flat_out = raw.reshape(-1, order=order), out.reshape(-1, order=order)
        for lo in range(0, flat_raw.size, _SLAB_VOXELS):
            part = flat_raw[lo : lo + _SLAB_VOXELS]
            flat_out[lo : lo + _SLAB_VOXELS] = apply_read_scaling(part, slope, inter)
    else:  # a channel of a C-ordered 4-D array: one slice at a time
        for k in range(raw.shape[-1]):
            out[..., k] = apply_read_scaling(raw[..., k], slope, inter)
    return out


def _canonical_image(img, data: np.ndarray | None = None):
    """``img`` reoriented to RAS+ as ``nib.as_closest_canonical`` does it, around ``data``
    (its voxels, read by :func:`_read_voxels`), or, without ``data``, around a stand-in of
    no memory: then only its shape, affine and header mean anything."""
    nib = _nib()
    stand_in = data is None
    if stand_in:
        data = np.broadcast_to(np.zeros((), np.uint8), tuple(int(d) for d in img.shape))
    if len(img.shape) == 2:  # 2-D NIfTI (e.g. CAMUS ultrasound frames): one-slice volume
        return nib.as_closest_canonical(nib.Nifti1Image(data[..., None], img.affine))
    from nibabel.orientations import io_orientation

    if np.array_equal(io_orientation(img.affine), _CANONICAL):
        return img if stand_in else img.__class__(data, img.affine, img.header)
    return nib.as_closest_canonical(img.__class__(data, img.affine, img.header))


def load_canonical(path: str | os.PathLike):
    """The NIfTI image reoriented to RAS+, its voxels read as :func:`load_volume` reads them
    (float32 when scaled); a header whose size is over the limits or beyond the file is
    refused first. For its shape, affine or spacing alone, :func:`canonical_header` reads no
    voxel."""
    img = _open(path)
    try:
        return _canonical_image(img, _read_voxels(img, None, whole=True))
    except (VolumeProblem, MemoryError):
        raise
    except Exception as exc:  # nibabel raises many types for a damaged file
        raise _unreadable(path, exc) from None


@dataclass(frozen=True)
class VolumeHeader:
    """What the header of a NIfTI file says once reoriented to RAS+, no voxel read."""

    shape: tuple[int, ...]
    affine: np.ndarray
    zooms: tuple[float, ...]


@lru_cache(maxsize=64)
def _header(path: str, _version: tuple[int, int]) -> VolumeHeader:
    img = _open(path)
    try:
        canonical = _canonical_image(img)
        return VolumeHeader(
            tuple(int(d) for d in canonical.shape),
            np.array(canonical.affine),
            tuple(float(z) for z in canonical.header.get_zooms()),
        )
    except VolumeProblem:
        raise
    except Exception as exc:  # nibabel raises many types for a damaged file
        raise _unreadable(path, exc) from None


def canonical_header(path: str | os.PathLike) -> VolumeHeader:
    """Shape, affine and voxel spacing of a NIfTI file in RAS+ (as :func:`load_canonical`
    would give them), from its header alone; its size is checked as every read's is."""
    try:
        st = os.stat(path)
        version = (st.st_mtime_ns, st.st_size)  # a file rewritten in place is read again
    except OSError:
        version = (0, 0)  # _open names the problem
    return _header(str(path), version)


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
    img = _open(path)
    if len(img.shape) not in (2, 3, 4):
        raise VolumeProblem(
            f"volume {Path(path).name} has {len(img.shape)} dimensions, expected 3 or 4"
        )
    try:
        data = _read_voxels(img, channel)
        return np.asanyarray(_canonical_image(img, data).dataobj)
    except (VolumeProblem, MemoryError):
        raise
    except Exception as exc:  # nibabel raises many types for a damaged file
        raise _unreadable(path, exc) from None


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
