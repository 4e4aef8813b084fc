"""Compressed DICOM (issue 27, point 3): every file pydicom ships in its wheel either decodes to
pydicom's own ``pixel_array`` or is a :class:`DicomProblem`; a compressed file no installed
plugin decodes names its transfer syntax and the plugin that would."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pydicom
import pytest
from pydicom.pixels import get_decoder
from pydicom.uid import JPEG2000, MPEG2MPML, JPEGLSLossless, RLELossless

from medvqa_build.media.dicom import DicomProblem, check_dicom, decode_pixels, load_dicom_rgb
from medvqa_build.media.dicom_codecs import PLUGINS

# pydicom warns while reading its deliberately odd files (the references below)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
TEST_FILES = Path(pydicom.__file__).parent / "data" / "test_files"
FILES = sorted(p for p in TEST_FILES.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def _reference(path: Path):
    """pydicom's own reading: the array, or None where pydicom cannot give one."""
    try:
        return pydicom.dcmread(path).pixel_array
    except Exception:
        return None


def test_the_wheel_ships_compressed_files_of_every_family():
    syntaxes = set()
    for path in FILES:
        try:
            ds = pydicom.dcmread(path, stop_before_pixels=True)
        except Exception:
            continue
        syntaxes.add(str(getattr(ds.file_meta, "TransferSyntaxUID", "")))
    # JPEG baseline/12-bit, JPEG-LS, JPEG 2000 and RLE: the families the plugins exist for
    for uid in ("1.2.840.10008.1.2.4.50", "1.2.840.10008.1.2.4.51", JPEGLSLossless, JPEG2000):
        assert str(uid) in syntaxes, uid
    assert str(RLELossless) in syntaxes


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(TEST_FILES).as_posix())
def test_every_shipped_file_decodes_like_pydicom_or_is_quarantined(path):
    reference = _reference(path)
    try:
        ds = pydicom.dcmread(path)
    except Exception:
        ds = None
    if reference is not None:
        got = decode_pixels(ds)
        assert got.dtype == reference.dtype and np.array_equal(got, reference)
        rgb = load_dicom_rgb(path)
        assert rgb.dtype == np.uint8 and rgb.ndim == 3 and rgb.shape[2] == 3
        assert rgb.shape[:2] == (int(ds.Rows), int(ds.Columns))
        check_dicom(path, "decode")  # the converter's decode check agrees
        return
    # pydicom gives no pixels: the project quarantines it with a one-line reason
    with pytest.raises(DicomProblem) as info:
        check_dicom(path, "decode")
    reason = str(info.value)
    assert reason and "\n" not in reason and "Traceback" not in reason
    syntax = getattr(getattr(ds, "file_meta", None), "TransferSyntaxUID", None)
    compressed = syntax is not None and syntax.is_compressed
    if compressed and all(k in ds for k in ("PixelData", "Rows", "Columns")):
        # damaged compressed data: the reason names the syntax and the plugin that decodes it
        with pytest.raises(DicomProblem) as decoded:
            decode_pixels(ds)
        assert syntax.name in str(decoded.value) and str(syntax) in str(decoded.value)
        assert PLUGINS[str(syntax)] in str(decoded.value)


def test_compressed_families_decode_to_pydicoms_pixels():
    """Each plugin family really is installed and used (not only a quarantine)."""
    decoded = set()
    for path in FILES:
        if _reference(path) is None:
            continue
        ds = pydicom.dcmread(path)
        decode_pixels(ds)
        decoded.add(str(ds.file_meta.TransferSyntaxUID))
    wanted = {
        "1.2.840.10008.1.2.4.50",  # JPEG baseline
        "1.2.840.10008.1.2.4.51",  # 12-bit JPEG extended (libjpeg only)
        "1.2.840.10008.1.2.4.70",  # JPEG lossless SV1 (libjpeg only)
        "1.2.840.10008.1.2.4.80",  # JPEG-LS lossless (libjpeg only)
        "1.2.840.10008.1.2.4.81",  # JPEG-LS near-lossless
        "1.2.840.10008.1.2.4.90",  # JPEG 2000 lossless (openjpeg)
        "1.2.840.10008.1.2.4.91",  # JPEG 2000
        "1.2.840.10008.1.2.5",  # RLE
    }
    assert wanted <= decoded, sorted(wanted - decoded)


def test_a_syntax_without_an_installed_plugin_is_quarantined_naming_the_plugin(monkeypatch):
    path = next(p for p in FILES if p.name == "MR_small_jp2klossless.dcm")
    monkeypatch.setattr(get_decoder(pydicom.uid.JPEG2000Lossless), "_available", {})
    for call in (lambda: check_dicom(path, "header"), lambda: load_dicom_rgb(path)):
        with pytest.raises(DicomProblem) as info:
            call()
        reason = str(info.value)
        assert "JPEG 2000 Image Compression (Lossless Only) (1.2.840.10008.1.2.4.90)" in reason
        assert "no installed plugin decodes it" in reason
        assert "pylibjpeg-openjpeg" in reason


def test_a_syntax_no_plugin_exists_for_says_so(tmp_path):
    ds = pydicom.dcmread(TEST_FILES / "JPEG2000.dcm")
    ds.file_meta.TransferSyntaxUID = MPEG2MPML
    path = tmp_path / "video.dcm"
    ds.save_as(path)
    with pytest.raises(DicomProblem) as info:
        check_dicom(path, "header")
    assert "MPEG2 Main Profile / Main Level (1.2.840.10008.1.2.4.100)" in str(info.value)
    assert "no pydicom pixel-data plugin decodes it" in str(info.value)
