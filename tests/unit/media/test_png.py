"""plain_grey_png gives OpenCV's pixels for the PNGs it accepts, and declines every other file
(the caller then decodes it with OpenCV, as before)."""

from __future__ import annotations

import io
import struct
import zlib

import cv2
import numpy as np
import pytest
from PIL import Image

from medvqa_build.layouts.masks import load_binary_mask
from medvqa_build.media.image import MASK_READ
from medvqa_build.media.png import plain_grey_png


def _opencv(data: bytes) -> np.ndarray | None:
    return cv2.imdecode(np.frombuffer(data, np.uint8), MASK_READ)


def _chunk(kind: bytes, body: bytes) -> bytes:
    crc = zlib.crc32(body, zlib.crc32(kind))
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)


def _png(
    pixels: np.ndarray, filters, *, idat_pieces: int = 1, extra: bytes = b"", bad_adler=False
) -> bytes:
    """An 8-bit grey PNG of ``pixels`` whose row r is filtered with ``filters[r]`` (0 None,
    1 Sub, 2 Up), its stream split over ``idat_pieces`` IDAT chunks."""
    h, w = pixels.shape
    rows = []
    prev = np.zeros(w, np.uint8)
    for r in range(h):
        row = pixels[r]
        f = int(filters[r])
        if f == 1:
            body = row - np.concatenate(([0], row[:-1])).astype(np.uint8)
        elif f == 2:
            body = row - prev
        else:
            body = row
        rows.append(bytes([f]) + body.astype(np.uint8).tobytes())
        prev = row
    stream = zlib.compress(b"".join(rows))
    if bad_adler:  # the stream's own checksum wrong, every chunk's CRC right
        stream = stream[:-1] + bytes([stream[-1] ^ 1])
    cut = np.linspace(0, len(stream), idat_pieces + 1).astype(int)
    idat = b"".join(_chunk(b"IDAT", stream[a:b]) for a, b in zip(cut[:-1], cut[1:], strict=True))
    ihdr = _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
    return b"\x89PNG\r\n\x1a\n" + ihdr + extra + idat + _chunk(b"IEND", b"")


def _masks():
    rng = np.random.default_rng(0)
    for h, w in [(1, 1), (1, 7), (9, 1), (2, 2), (17, 33), (64, 48), (352, 352), (100, 513)]:
        yield (rng.random((h, w)) < 0.3).astype(np.uint8) * 255
        yield rng.integers(0, 256, (h, w), dtype=np.uint8)
        m = np.zeros((h, w), np.uint8)
        cv2.circle(m, (w // 2, h // 2), max(1, min(h, w) // 3), 255, -1)
        yield m


def test_the_pixels_of_opencvs_own_pngs_and_of_mixed_none_and_sub_rows():
    rng = np.random.default_rng(1)
    n = 0
    for mask in _masks():
        h, w = mask.shape
        for data in (
            cv2.imencode(".png", mask)[1].tobytes(),  # every row Sub
            _png(mask, np.zeros(h, int)),
            _png(mask, np.ones(h, int), idat_pieces=3),
            _png(mask, rng.integers(0, 2, h)),
        ):
            got = plain_grey_png(data, w, h)
            assert got is not None
            assert got.shape == (h, w) and got.dtype == np.uint8
            assert np.array_equal(got, _opencv(data))
            n += 1
    assert n == 96


def _declined(mask: np.ndarray) -> dict[str, bytes]:
    h, w = mask.shape
    good = cv2.imencode(".png", mask)[1].tobytes()
    bad_crc = bytearray(good)
    bad_crc[-20] ^= 0xFF  # inside the IDAT stream or its CRC
    pil = io.BytesIO()
    Image.fromarray(mask).save(pil, "PNG")
    up = np.ones(h, int)
    up[h // 2] = 2
    exif = Image.Exif()
    exif[0x0112] = 6
    rotated = io.BytesIO()
    Image.fromarray(mask).save(rotated, "PNG", exif=exif)
    return {
        "up rows": _png(mask, up),
        "pillow (None/Sub/Up rows)": pil.getvalue(),
        "eXIf orientation": rotated.getvalue(),
        "text chunk": _png(mask, np.ones(h, int), extra=_chunk(b"tEXt", b"a\x00b")),
        "damaged": bytes(bad_crc),
        "stream checksum": _png(mask, np.ones(h, int), bad_adler=True),
        "cut": good[: len(good) // 2],
        "trailing bytes": good + b"\x00",
        "16-bit": cv2.imencode(".png", mask.astype(np.uint16) * 257)[1].tobytes(),
        "colour": cv2.imencode(".png", np.dstack([mask] * 3))[1].tobytes(),
        "jpeg": cv2.imencode(".jpg", mask)[1].tobytes(),
        "empty": b"",
    }


@pytest.mark.parametrize(
    "case",
    [
        "up rows",
        "pillow (None/Sub/Up rows)",
        "eXIf orientation",
        "text chunk",
        "damaged",
        "stream checksum",
        "cut",
        "trailing bytes",
        "16-bit",
        "colour",
        "jpeg",
        "empty",
    ],
)
def test_anything_else_is_left_to_opencv(case):
    mask = np.zeros((40, 30), np.uint8)
    mask[5:20, 3:17] = 255
    mask[30:, 20:] = 255
    assert plain_grey_png(_declined(mask)[case], 30, 40) is None


def test_another_size_than_the_images_is_left_to_opencv():
    data = cv2.imencode(".png", np.zeros((40, 30), np.uint8))[1].tobytes()
    assert plain_grey_png(data, 30, 40) is not None
    assert plain_grey_png(data, 40, 30) is None


def test_load_binary_mask_reads_the_same_pixels_either_way(tmp_path):
    mask = np.zeros((40, 30), np.uint8)
    mask[5:20, 3:17] = 255
    for name, data in {"plain": cv2.imencode(".png", mask)[1].tobytes(), **_declined(mask)}.items():
        if name in ("empty", "cut", "damaged", "stream checksum"):
            continue
        path = tmp_path / "m.png"
        path.write_bytes(data)
        fast, slow = load_binary_mask(path, (30, 40)), load_binary_mask(path)
        assert np.array_equal(fast, slow), name
