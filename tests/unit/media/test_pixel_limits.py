"""Issue 27: the pixel limit (recipe key ``max_pixels``) is checked on the header, before any
decode, on every path a header is read by (our JPEG/PNG parsers, Pillow, DICOM)."""

from __future__ import annotations

import struct
import warnings

import numpy as np
import pytest
from PIL import Image

from medvqa_build.cli import build as cli_build
from medvqa_build.errors import ImageProblem
from medvqa_build.layouts.dicom_common import dicom_size_and_attributes
from medvqa_build.media import image as media_image
from medvqa_build.media.image import DEFAULT_MAX_PIXELS, check_image, read_image_size
from medvqa_build.recipe import Recipe

from ...fixtures.dicom_files import ramp, write_dicom
from ...hardening.test_hostile_inputs import png_header_only


def bmp_header_only(width: int, height: int) -> bytes:
    """A 24-bit BMP whose header claims ``width x height`` (Pillow reads it, not our parser)."""
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, 0, 2835, 2835, 0, 0)
    return b"BM" + struct.pack("<IHHI", 14 + 40 + 16, 0, 0, 54) + info + b"\x00" * 16


def test_png_bomb_is_refused_by_the_header_parser(tmp_path):
    path = tmp_path / "bomb.png"
    path.write_bytes(png_header_only(65000, 65000))
    with pytest.raises(ImageProblem) as err:
        check_image(path, "decode")  # refused before decoding is tried
    assert "65000x65000 = 4,225,000,000 pixels" in str(err.value)
    assert f"limit of {DEFAULT_MAX_PIXELS:,}" in str(err.value)
    assert "max_pixels" in str(err.value)


@pytest.mark.parametrize("side", [20000, 60000])
def test_bomb_read_by_pillow_is_refused(tmp_path, side):
    """Over twice the limit Pillow itself raises DecompressionBombError; between once and
    twice it warns. Both end as the same kind of reason, no exception or warning escapes."""
    path = tmp_path / "bomb.bmp"
    path.write_bytes(bmp_header_only(side, side))
    limit = side * side * 3 // 4 if side == 20000 else 10**8
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ImageProblem) as err:
            check_image(path, "header", limit)
        with pytest.raises(ImageProblem):
            read_image_size(path, limit)
    assert "max_pixels" in str(err.value)


def test_limit_is_inclusive_and_none_means_no_limit(tmp_path, monkeypatch):
    path = tmp_path / "ok.png"
    Image.fromarray(np.zeros((30, 40, 3), np.uint8)).save(path)
    assert check_image(path, "decode", 1200) == (40, 30)
    with pytest.raises(ImageProblem, match="40x30 = 1,200 pixels"):
        check_image(path, "header", 1199)
    big = tmp_path / "big.png"
    big.write_bytes(png_header_only(65000, 65000))
    with pytest.raises(ImageProblem, match="max_decode_bytes"):  # a separate limit
        check_image(big, "header", None)
    monkeypatch.setenv("MEDVQA_LIMITS", "max_decode_bytes=1e12")
    with pytest.raises(ImageProblem, match="max_worker_bytes of 8,589,934,592"):  # the budget
        check_image(big, "header", None)
    monkeypatch.setenv("MEDVQA_LIMITS", "max_decode_bytes=1e12,max_worker_bytes=1e12")
    assert check_image(big, "header", None) == (65000, 65000)


def test_pillow_limit_is_restored(tmp_path):
    before = Image.MAX_IMAGE_PIXELS
    path = tmp_path / "bomb.bmp"
    path.write_bytes(bmp_header_only(60000, 60000))
    with pytest.raises(ImageProblem):
        check_image(path, "header", 1000)
    assert before == Image.MAX_IMAGE_PIXELS


def test_dicom_header_over_the_limit(tmp_path):
    path = write_dicom(tmp_path / "x.dcm", ramp(48, 64, 1), modality="DX")
    assert dicom_size_and_attributes(path, "header", [], 64 * 48)[:2] == (64, 48)
    with pytest.raises(ImageProblem, match="64x48 = 3,072 pixels"):
        dicom_size_and_attributes(path, "header", [], 3000)


def test_one_default_everywhere():
    assert cli_build.DEFAULT_MAX_PIXELS == media_image.DEFAULT_MAX_PIXELS == 2 * 10**8
    recipe = {"name": "r", "benchmark": "B", "sources": [], "tasks": []}
    assert Recipe.from_dict(dict(recipe)).max_pixels == DEFAULT_MAX_PIXELS
    assert Recipe.from_dict({**recipe, "max_pixels": 5}).max_pixels == 5


@pytest.mark.parametrize("text, value", [("2e8", 200_000_000), ("1000", 1000)])
def test_cli_flag_parses_numbers(text, value):
    assert cli_build._positive_int(text) == value
