"""DICOM files: sizes and allow-listed attributes from the header, and the 8-bit RGB a model sees.

Radiology pixels are not display pixels: the stored values go through the Modality LUT
(rescale slope/intercept), then the VOI LUT or window centre/width, and MONOCHROME1 is inverted
(DICOM PS3.3 C.11.1-C.11.2, C.7.6.3.1.2). Converters read headers only
(``stop_before_pixels``); only an allow-list of header keywords may reach a sample, so no
patient name, ID, date or institution ever leaves the source folder.
"""

from __future__ import annotations

import logging
import os
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ImageProblem
from ..store.limits import decode_problem, read_limits
from ..store.paths import not_a_file
from .dicom_codecs import decode_failure, missing_decoder, redact, syntax_text

DICOM_EXTENSIONS = (".dcm", ".dicom")
# Header keywords a manifest may allow-list; anything else (names, IDs, dates, institution,
# free text) is refused, so a manifest typo cannot leak patient data.
SAFE_KEYWORDS = frozenset(
    {
        "Modality",
        "BodyPartExamined",
        "PixelSpacing",
        "ImagerPixelSpacing",
        "SliceThickness",
        "SpacingBetweenSlices",
        "PhotometricInterpretation",
        "ViewPosition",
        "ImageOrientationPatient",
        "SeriesDescription",
        "Rows",
        "Columns",
        "NumberOfFrames",
        "BitsStored",
    }
)


class DicomProblem(ImageProblem):
    """A per-file DICOM problem; its message is the quarantine reason."""


@dataclass(frozen=True)
class Window:
    """A display window in rescaled units (HU for CT): values outside clip to black/white."""

    center: float
    width: float


_SILENCED = False


def _silence_pydicom() -> None:
    """pydicom's log lines and warnings quote header values (an odd date, a name, a bad
    number) and its decoders log whole tracebacks: none of that may reach a build's log. The
    reasons that matter become :class:`DicomProblem` texts with quoted values redacted.
    Runs once, after pydicom's import has set its own logger level."""
    global _SILENCED
    if _SILENCED:
        return
    import pydicom  # noqa: F401  (its import sets the 'pydicom' logger to WARNING)

    logging.getLogger("pydicom").setLevel(logging.CRITICAL + 1)
    # warnings attributed to pydicom's modules (values are converted lazily, on access)
    warnings.filterwarnings("ignore", module=r"pydicom(\.|$)")
    _SILENCED = True


@contextmanager
def _quiet():
    """Also silence warnings raised while pydicom decodes (attributed to other modules)."""
    _silence_pydicom()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _unreadable(exc: BaseException) -> DicomProblem:
    return DicomProblem(f"not a readable DICOM file ({exc.__class__.__name__}: {redact(exc)})")


def _dcmread(path: Path, **kwargs):
    """``pydicom.dcmread`` with every failure of a damaged file as a :class:`DicomProblem`
    (pydicom raises many types for hostile bytes: ValueError, KeyError, struct.error...)."""
    import pydicom

    try:
        with _quiet():
            return pydicom.dcmread(path, **kwargs)
    except FileNotFoundError:
        raise DicomProblem("file not found") from None
    except MemoryError:
        raise
    except Exception as exc:
        raise _unreadable(exc) from None


def _syntax(ds):
    return getattr(getattr(ds, "file_meta", None), "TransferSyntaxUID", None)


def _decodable_syntax(ds):
    """The file's transfer syntax, or :class:`DicomProblem` when it is unknown or no installed
    plugin decodes it (the reason names the syntax and the plugin to install)."""
    syntax = _syntax(ds)
    if syntax is None:
        raise DicomProblem(
            f"{syntax_text(None)}: the pixel data cannot be interpreted; re-export the file"
        )
    reason = missing_decoder(syntax)
    if reason:
        raise DicomProblem(reason)
    return syntax


def _int(ds, keyword: str, default: int) -> int:
    try:
        return int(ds.get(keyword, default) or default)
    except (TypeError, ValueError):
        raise DicomProblem(f"DICOM header element {keyword} is not a number") from None


def is_dicom(path: str | os.PathLike) -> bool:
    """By suffix, or by the ``DICM`` magic at byte 128 (PS3.10 7.1) for suffix-less files."""
    path = Path(path)
    if path.suffix.lower() in DICOM_EXTENSIONS:
        return True
    try:
        with open(path, "rb") as fh:
            fh.seek(128)
            return fh.read(4) == b"DICM"
    except OSError:
        return False


def read_header(path: str | os.PathLike):
    """The dataset without pixel data; :class:`DicomProblem` when it is not DICOM."""
    path = Path(path)
    if not path.is_file():
        raise DicomProblem(not_a_file(path))
    return _dcmread(path, stop_before_pixels=True)


def header_size(ds) -> tuple[int, int]:
    """``(width, height)`` from Columns/Rows."""
    width, height = _int(ds, "Columns", 0), _int(ds, "Rows", 0)
    if width <= 0 or height <= 0:
        raise DicomProblem(f"DICOM header gives no image size (Columns={width}, Rows={height})")
    return width, height


def check_pixel_data(path: str | os.PathLike) -> None:
    """Cheap checks that the header alone misses: the file has pixel data, in a transfer
    syntax this machine can decode, and (when not encapsulated) all of its bytes are there.
    Reads the file structure only: the pixel bytes themselves are skipped, not loaded."""
    path = Path(path)
    ds = _dcmread(path, defer_size=256)
    if "PixelData" not in ds:
        raise DicomProblem("DICOM file has no pixel data (no PixelData element)")
    check_declared_frames(ds)
    syntax = _decodable_syntax(ds)
    if syntax.is_compressed:
        return
    raw = ds.get_item("PixelData")
    tell = getattr(raw, "value_tell", None)
    value = getattr(raw, "value", None)
    if isinstance(value, bytes):
        present = len(value)
    elif tell is not None:
        present = path.stat().st_size - tell
    else:
        return
    bits = _int(ds, "BitsAllocated", 8)
    samples = _int(ds, "SamplesPerPixel", 1)
    if samples == 3 and str(ds.get("PhotometricInterpretation", "")).upper() == "YBR_FULL_422":
        samples = 2  # chroma halved horizontally: Y Y Cb Cr per two pixels (PS3.3 C.7.6.3.1.2)
    expected = (
        _int(ds, "Rows", 0)
        * _int(ds, "Columns", 0)
        * samples
        * _int(ds, "NumberOfFrames", 1)
        * bits
        + 7
    ) // 8
    if present < expected:
        raise DicomProblem(
            f"truncated DICOM file: {present} bytes of pixel data, the header "
            f"describes {expected}; re-download it"
        )


def check_declared_frames(ds) -> None:
    """Raise :class:`DicomProblem` when the header declares more frames than ``max_frames``,
    or more bytes than the per-worker ``max_decode_bytes`` once decoded (pydicom decodes
    every frame of a file at once): checked on the header, before any pixel is read."""
    limits = read_limits()
    frames = _int(ds, "NumberOfFrames", 1)
    if frames > limits.max_frames:
        raise DicomProblem(
            f"DICOM header declares {frames:,} frames, over the max_frames limit of "
            f"{limits.max_frames:,}; raise it (MEDVQA_LIMITS=max_frames=...) if genuine"
        )
    rows, columns = _int(ds, "Rows", 0), _int(ds, "Columns", 0)
    samples, bits = _int(ds, "SamplesPerPixel", 1), _int(ds, "BitsAllocated", 8)
    need = rows * columns * samples * frames * max(1, (bits + 7) // 8)
    # at once: every frame decoded, one frame's float64 temporaries (Modality LUT, window)
    # and its RGB
    peak = need + rows * columns * (samples * 16 + 3)
    why = decode_problem(
        need, f"decoding {frames:,} frame(s) of {columns}x{rows}x{samples} at {bits} bits", peak
    )
    if why:
        raise DicomProblem(why)


def check_dicom(path: str | os.PathLike, mode: str = "header") -> tuple[int, int]:
    """``(width, height)`` from the header (plus :func:`check_pixel_data`);
    ``mode="decode"`` also decodes the pixels."""
    width, height = header_size(read_header(path))
    check_pixel_data(path)
    if mode == "decode":
        load_dicom_rgb(path)
    return width, height


def _text(value) -> str:
    if isinstance(value, (list, tuple)) or type(value).__name__ == "MultiValue":
        return "\\".join(_text(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value).strip()


def allowed_attributes(ds, keywords: list[str] | tuple[str, ...]) -> dict[str, str]:
    """The allow-listed header values present in ``ds``, as strings keyed by keyword."""
    bad = sorted(set(keywords) - SAFE_KEYWORDS)
    if bad:
        raise ValueError(
            f"DICOM keyword(s) {bad} may carry patient data and cannot be allow-listed; "
            f"allowed: {', '.join(sorted(SAFE_KEYWORDS))}"
        )
    out = {}
    for key in keywords:
        value = ds.get(key)
        if value is not None and _text(value) != "":
            out[f"dicom_{key}"] = _text(value)
    return out


def decode_pixels(ds) -> np.ndarray:
    """Every frame's stored values, through pydicom's pixel-data plugins (the same array as
    ``ds.pixel_array``); :class:`DicomProblem` naming the transfer syntax and the plugin that
    decodes it when none installed does, or when the data is corrupt."""
    if "PixelData" not in ds and "FloatPixelData" not in ds and "DoubleFloatPixelData" not in ds:
        raise DicomProblem("DICOM file has no pixel data")
    syntax = _decodable_syntax(ds)
    try:
        with _quiet():
            return ds.pixel_array
    except MemoryError:
        raise
    except (AttributeError, KeyError) as exc:  # an element decoding needs is absent
        raise DicomProblem(
            f"DICOM header lacks what decoding {syntax_text(syntax)} pixel data needs "
            f"({exc.__class__.__name__}: {redact(exc)})"
        ) from None
    except Exception as exc:  # the plugins raise many types for damaged data
        raise DicomProblem(decode_failure(syntax, exc)) from None


def _pixels(ds, frame: int) -> np.ndarray:
    arr = decode_pixels(ds)
    frames = _int(ds, "NumberOfFrames", 1)
    samples = _int(ds, "SamplesPerPixel", 1)
    if frames > 1:
        if not 0 <= frame < frames:
            raise DicomProblem(f"frame {frame} out of range: the file has {frames} frames")
        arr = arr[frame]
    elif frame != 0:
        raise DicomProblem(f"frame {frame} out of range: the file has 1 frame")
    if (samples == 1 and arr.ndim != 2) or (samples > 1 and arr.ndim != 3):
        raise DicomProblem(f"unexpected pixel array shape {arr.shape}")
    return arr


def _window_uint8(values: np.ndarray, window: Window) -> np.ndarray:
    """Linear window (PS3.3 C.11.2.1.2.1) to 0..255."""
    lo = window.center - 0.5 - (window.width - 1) / 2
    span = max(window.width - 1, 1e-6)
    out = (values.astype(np.float64) - lo) / span * 255.0
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def _minmax_uint8(values: np.ndarray) -> np.ndarray:
    """The finite range to 0..255 (float pixel data may hold NaN or inf: those go to 0)."""
    values = values.astype(np.float64)
    finite = np.isfinite(values)
    if not finite.any():
        return np.zeros(values.shape, dtype=np.uint8)
    lo, hi = float(values[finite].min()), float(values[finite].max())
    if hi <= lo:
        return np.zeros(values.shape, dtype=np.uint8)
    out = np.where(finite, (values - lo) / (hi - lo) * 255.0, 0.0)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def grey_uint8(ds, frame: int = 0, window: Window | None = None) -> np.ndarray:
    """One frame of a greyscale dataset as ``(H, W)`` uint8 for display.

    Order: Modality LUT / rescale, then ``window`` if given (a recipe or manifest override),
    else the header's VOI LUT or window centre/width, else the frame's min-max; MONOCHROME1 is
    inverted last so bone stays white.
    """
    from pydicom.pixels import apply_modality_lut, apply_voi_lut

    raw = _pixels(ds, frame)
    values = apply_modality_lut(raw, ds)
    if window is not None:
        out = _window_uint8(values, window)
    elif "VOILUTSequence" in ds:
        # the first VOI LUT of the header; its output spans 2**bits (LUT Descriptor, C.11.2.1.1)
        voi = apply_voi_lut(values, ds, index=0, prefer_lut=True)
        bits = int(ds.VOILUTSequence[0].LUTDescriptor[2])
        out = np.clip(np.rint(voi / (2**bits - 1) * 255.0), 0, 255).astype(np.uint8)
    elif "WindowCenter" in ds and "WindowWidth" in ds:
        out = _window_uint8(values, header_window(ds))
    else:
        out = _minmax_uint8(values)
    if str(ds.get("PhotometricInterpretation", "")).upper() == "MONOCHROME1":
        out = 255 - out
    return out


def header_window(ds) -> Window:
    """The first window centre/width of the header (both may be multi-valued)."""
    center, width = ds.WindowCenter, ds.WindowWidth
    center = center[0] if type(center).__name__ == "MultiValue" else center
    width = width[0] if type(width).__name__ == "MultiValue" else width
    return Window(float(center), float(width))


def _palette_rgb(ds, frame: int) -> np.ndarray:
    """PALETTE COLOR: the stored values index the header's RGB lookup tables (C.7.6.3.1.5)."""
    from pydicom.pixels import apply_color_lut

    rgb = apply_color_lut(_pixels(ds, frame), ds)
    if rgb.dtype == np.uint8:
        return np.ascontiguousarray(rgb)
    # 16-bit LUT entries: scale by the LUT range, not the frame's (C.7.6.3.1.6)
    return np.clip(np.rint(rgb.astype(np.float64) / 257.0), 0, 255).astype(np.uint8)


def dataset_rgb(ds, frame: int = 0, window: Window | None = None) -> np.ndarray:
    """``(H, W, 3)`` uint8 RGB of one frame (colour data converted from YBR when needed).

    A header the display path cannot use (a LUT that does not fit, a window that is not a
    number) is a :class:`DicomProblem`, so one odd file is quarantined, never a crash."""
    try:
        with _quiet():
            return _dataset_rgb(ds, frame, window)
    except (DicomProblem, MemoryError):
        raise
    except Exception as exc:
        raise DicomProblem(
            f"cannot turn the decoded {syntax_text(_syntax(ds))} pixels into RGB "
            f"({exc.__class__.__name__}: {redact(exc)})"
        ) from None


def _dataset_rgb(ds, frame: int, window: Window | None) -> np.ndarray:
    samples = _int(ds, "SamplesPerPixel", 1)
    photometric = str(ds.get("PhotometricInterpretation", "")).upper()
    if samples == 1 and photometric == "PALETTE COLOR":
        return _palette_rgb(ds, frame)
    if samples == 1:
        grey = grey_uint8(ds, frame, window)
        return np.repeat(grey[:, :, None], 3, axis=2)
    # pydicom 3 returns YBR colour data already converted to RGB (pixel_array as_rgb=True)
    arr = _pixels(ds, frame)
    if arr.dtype != np.uint8:
        arr = _minmax_uint8(arr)
    return np.ascontiguousarray(arr[..., :3])


def load_dicom_rgb(
    path: str | os.PathLike, window: Window | tuple[float, float] | None = None, frame: int = 0
) -> np.ndarray:
    """Decode a DICOM file to the ``(H, W, 3)`` uint8 RGB a model sees.

    ``window`` = ``(center, width)`` in rescaled units overrides the header's VOI.
    """
    if window is not None and not isinstance(window, Window):
        window = Window(float(window[0]), float(window[1]))
    ds = _dcmread(Path(path))
    if "PixelData" not in ds and "FloatPixelData" not in ds and "DoubleFloatPixelData" not in ds:
        raise DicomProblem("DICOM file has no pixel data")
    return dataset_rgb(ds, frame, window)
