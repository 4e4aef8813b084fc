"""DICOM to 8-bit: rescale, header window, override window, MONOCHROME1, compression, headers."""

import numpy as np
import pytest

from medvqa_build.media import DicomProblem, check_any_image, export_image_bytes, load_any_rgb
from medvqa_build.media.dicom import allowed_attributes, read_header

from ...fixtures.dicom_files import PHI, write_dicom


def _img(tmp_path, name="a.dcm", **kw):
    pixels = np.array([[0, 1000], [2000, 4000]], dtype=np.uint16).repeat(4, 0).repeat(4, 1)
    return write_dicom(tmp_path / name, pixels, **kw)


def test_rescale_then_header_window(tmp_path):
    # stored 0..4000, slope 1, intercept -1000 -> -1000..3000; window centre 1000 width 2000
    path = _img(tmp_path, modality="DX", intercept=-1000.0, window=(1000, 2000))
    grey = load_any_rgb(path)[::4, ::4, 0]
    assert grey.tolist() == [[0, 0], [128, 255]]
    assert check_any_image(path) == (8, 8)


def test_override_window_and_minmax(tmp_path):
    path = _img(tmp_path, modality="DX")  # no window in the header: min-max
    assert load_any_rgb(path)[::4, ::4, 0].tolist() == [[0, 64], [128, 255]]
    assert load_any_rgb(path, window=(500, 1000))[::4, ::4, 0].tolist() == [[0, 255], [255, 255]]


def test_monochrome1_is_inverted_and_rle_decodes(tmp_path):
    path = _img(tmp_path, modality="DX", photometric="MONOCHROME1", compress=True)
    assert load_any_rgb(path)[::4, ::4, 0].tolist() == [[255, 191], [127, 0]]


def test_export_bytes_are_png_without_header(tmp_path):
    path = _img(tmp_path, modality="DX")
    data, suffix = export_image_bytes(path)
    assert suffix == ".png" and data.startswith(b"\x89PNG")
    assert PHI["PatientName"].encode() in path.read_bytes()
    assert all(v.encode() not in data for v in PHI.values())


def test_allow_list_refuses_patient_keywords(tmp_path):
    ds = read_header(_img(tmp_path, spacing=(0.5, 0.25)))
    assert allowed_attributes(ds, ["Modality", "PixelSpacing"]) == {
        "dicom_Modality": "MR",
        "dicom_PixelSpacing": "0.5\\0.25",
    }
    with pytest.raises(ValueError, match="PatientName"):
        allowed_attributes(ds, ["PatientName"])


def test_not_dicom_is_a_problem(tmp_path):
    bad = tmp_path / "x.dcm"
    bad.write_bytes(b"not dicom at all")
    with pytest.raises(DicomProblem, match="not a readable DICOM"):
        check_any_image(bad)
