"""2-D image files: sizes from headers, cheap integrity checks, RGB decode.

Converters must not decode every pixel of a 10^6-image dataset just to list it, yet a
truncated JPEG must not reach a benchmark. ``check_image(mode="header")`` reads the header
with Pillow (lazy: no pixel decode) and checks the end-of-image marker of JPEG and PNG files,
which catches the usual truncated download; ``mode="decode"`` decodes fully.
"""

from __future__ import annotations

import os
import stat
import warnings
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import cv2
import numpy as np
from PIL import Image, ImageFile, ImageOps, UnidentifiedImageError

from ..errors import ImageProblem
from ..store.limits import decode_problem
from ..store.paths import not_a_file

_JPEG_EOI = b"\xff\xd9"
_PNG_IEND = b"IEND\xaeB`\x82"

# Pixels per image a build accepts (recipe key ``max_pixels``, ``convert --max-pixels``):
# room for whole-slide thumbnails and large radiographs, not for a decompression bomb whose
# few-kilobyte header claims 65000x65000 (12 GB of RGB once decoded).
DEFAULT_MAX_PIXELS = 200_000_000
MAX_PIXELS_FIX = "raise the recipe key max_pixels (or convert --max-pixels) if the file is genuine"


def pixel_limit(width: int, height: int, max_pixels: int | None) -> None:
    """Raise :class:`ImageProblem` when a header's ``width x height`` exceeds ``max_pixels``
    (None: no limit); called on the header, before any pixel is decoded."""
    if max_pixels is not None and width * height > max_pixels:
        raise ImageProblem(
            f"image header claims {width}x{height} = {width * height:,} pixels, over the "
            f"max_pixels limit of {max_pixels:,}; {MAX_PIXELS_FIX}"
        )


# EXIF orientation: pixels are taken AS DISPLAYED, for images and masks alike (the convention
# of every viewer, and of a mask drawn on the image as a viewer shows it). OpenCV's decoders
# apply the orientation of JPEG, PNG and WebP files unless told IMREAD_UNCHANGED, so masks are
# read with MASK_READ, sizes from headers are swapped for orientations 5-8, and a Pillow read
# goes through displayed(). TIFF orientation tags are not applied (OpenCV does not).
MASK_READ = cv2.IMREAD_ANYDEPTH | cv2.IMREAD_ANYCOLOR  # depth and colour kept, orientation applied
_ORIENTATION = 0x0112
_ORIENTED_FORMATS = frozenset(("JPEG", "MPO", "PNG", "WEBP"))


def _orientation(im: Image.Image) -> int:
    """The EXIF orientation of an open image (1 when it has none), from the header alone: a
    PNG's is read only from an eXIf chunk before its pixel data (Pillow would decode the
    whole image to look further), a damaged EXIF block counts as none."""
    if im.format not in _ORIENTED_FORMATS or (im.format == "PNG" and "exif" not in im.info):
        return 1
    try:
        return int(im.getexif().get(_ORIENTATION, 1))
    except Exception:  # noqa: BLE001  (Pillow raises many types for a damaged EXIF block)
        return 1


def _displayed_size(im: Image.Image) -> tuple[int, int]:
    """``(width, height)`` of an open image as displayed (its EXIF orientation applied)."""
    width, height = int(im.width), int(im.height)
    return (height, width) if _orientation(im) in (5, 6, 7, 8) else (width, height)


def displayed(im: Image.Image) -> Image.Image:
    """``im`` as displayed: its EXIF orientation applied (the image itself when it has none)."""
    return ImageOps.exif_transpose(im) if _orientation(im) != 1 else im


# bytes a decode holds per pixel: the decoder's buffer and the RGB array handed on (OpenCV's
# TIFF reader, measured: a 8000x8000 Deflate TIFF peaks at 2 x 192 MB)
DECODE_BYTES_PER_PIXEL = 6


def decode_limit(width: int, height: int) -> None:
    """Raise :class:`ImageProblem` when decoding a ``width x height`` image would need more
    than ``max_decode_bytes`` (the per-worker decode budget, store/limits.py) or than the
    worker's memory budget ``max_worker_bytes``: a 14000x14000 Deflate TIFF is under
    ``max_pixels`` yet costs over a gigabyte in every worker."""
    need = width * height * DECODE_BYTES_PER_PIXEL
    why = decode_problem(need, f"decoding {width}x{height} pixels")
    if why:
        raise ImageProblem(why)


@contextmanager
def _pillow_unlimited() -> Iterator[None]:
    """Pillow's own bomb check off while a header is read (nothing is decoded): our
    :func:`pixel_limit` then names the size and OUR limit, where Pillow's error quoted its
    own (twice ``MAX_IMAGE_PIXELS``)."""
    saved = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            yield
    finally:
        Image.MAX_IMAGE_PIXELS = saved


def read_image_size(
    path: str | os.PathLike, max_pixels: int | None = DEFAULT_MAX_PIXELS
) -> tuple[int, int]:
    """``(width, height)`` from the file header, without decoding pixels; an image over
    ``max_pixels`` raises :class:`ImageProblem` naming its size and the key to raise."""
    try:
        with _pillow_unlimited(), Image.open(path) as im:
            width, height = _displayed_size(im)
    except FileNotFoundError:
        raise ImageProblem("file not found") from None
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        # Pillow's messages name the absolute path; the reason must not (reports are published).
        message = str(exc).replace(str(path), Path(path).name)
        raise ImageProblem(f"not a readable image ({exc.__class__.__name__}: {message})") from None
    pixel_limit(width, height, max_pixels)
    return width, height


def _tiff_truncated(path: Path) -> bool:
    """Whether a TIFF's strips or tiles (tags 273/279, 324/325) end past the end of the file:
    the header of a truncated TIFF still reads, only its pixel data is cut."""
    size = path.stat().st_size
    try:  # the size was checked against max_pixels already
        with _pillow_unlimited(), Image.open(path) as im:
            tags = getattr(im, "tag_v2", {})
            offsets = tags.get(273) or tags.get(324) or ()
            counts = tags.get(279) or tags.get(325) or ()
    except (UnidentifiedImageError, OSError, ValueError):
        return True
    ends = [int(o) + int(c) for o, c in zip(offsets, counts, strict=False)]
    return bool(ends) and max(ends) > size


def _tail(path: Path, n: int = 32) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - n))
        return fh.read()


def check_image(
    path: str | os.PathLike, mode: str = "header", max_pixels: int | None = DEFAULT_MAX_PIXELS
) -> tuple[int, int]:
    """Return ``(width, height)`` or raise :class:`ImageProblem` naming what is wrong; an
    image whose header claims more than ``max_pixels`` is refused before any decode.

    The usual case costs one ``open``, one ``fstat`` and two reads: the header of a plain
    JPEG or PNG is parsed here (:func:`plain_header_size`), anything else by Pillow on the
    open file. Whatever that fast path cannot settle (a missing, empty or unreadable file, a
    header Pillow rejects) is checked again by :func:`_check_image_slow`, so the result and
    every error message are the same as before.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except (OSError, ValueError):
        return _check_image_slow(Path(path), mode, max_pixels)
    wh = None
    try:
        st = os.fstat(fd)
        size = st.st_size
        if stat.S_ISREG(st.st_mode) and size > 0:
            head = _pread(fd, min(size, _HEAD_BYTES), 0)
            wh = _header_size(head, fd, size, max_pixels)
            if wh is not None:
                tail = head[-32:] if size <= len(head) else _pread(fd, 32, size - 32)
    except OSError:
        wh = None
    finally:
        os.close(fd)
    if wh is None:
        return _check_image_slow(Path(path), mode, max_pixels)
    pixel_limit(wh[0], wh[1], max_pixels)
    decode_limit(wh[0], wh[1])
    return _check_read(path, mode, wh[0], wh[1], head[:8], tail)


def _check_image_slow(
    path: Path, mode: str, max_pixels: int | None = DEFAULT_MAX_PIXELS
) -> tuple[int, int]:
    """:func:`check_image` one step at a time (each error with its own message)."""
    if not path.is_file():
        raise ImageProblem(not_a_file(path))
    if path.stat().st_size == 0:
        raise ImageProblem("empty file (0 bytes)")
    width, height = read_image_size(path, max_pixels)
    decode_limit(width, height)
    with path.open("rb") as fh:
        head = fh.read(8)
    return _check_read(path, mode, width, height, head, _tail(path))


def _check_read(
    path: str | os.PathLike, mode: str, width: int, height: int, head: bytes, tail: bytes
) -> tuple[int, int]:
    """The checks after the header read: pixels, end markers, TIFF strips, optional decode."""
    if width <= 0 or height <= 0:
        raise ImageProblem(f"image has no pixels ({width}x{height})")
    if head[:2] == b"\xff\xd8" and _JPEG_EOI not in tail:
        raise ImageProblem("truncated JPEG (no end-of-image marker); re-download the file")
    if head[:8] == _PNG_SIGNATURE and not tail.endswith(_PNG_IEND):
        raise ImageProblem("truncated PNG (no IEND chunk); re-download the file")
    if head[:4] in (b"II*\x00", b"MM\x00*") and _tiff_truncated(Path(path)):
        raise ImageProblem(
            "truncated TIFF (pixel data ends past the end of the file); re-download the file"
        )
    if mode == "decode":
        load_rgb(path)
    return width, height


# -- header sizes without Pillow ------------------------------------------------------------
# Pillow's JPEG and PNG openers run a few hundred lines of Python per file (quantisation
# tables, chunk handlers, plugin lookup). A plain file (the JFIF/PNG every encoder writes) is
# parsed here instead; a file with anything these parsers do not know (EXIF, ICC, other SOF
# kinds, text chunks, junk between markers, ...) goes to Pillow. The parsers accept only what
# Pillow accepts with the same size, so the choice never changes a result.

# a FIFO must not block the open (the slow path then reports it); binary on Windows
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
_HAS_PREAD = hasattr(os, "pread")
_HEAD_BYTES = 4096  # one read: a plain JPEG/PNG header and, for small files, the whole file
_MAX_HEAD_BYTES = 1 << 16
_MORE = object()  # the header continues past the bytes read so far
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_JPEG_SOF = frozenset((0xC0, 0xC1, 0xC2))  # baseline, extended sequential, progressive
_JPEG_PLAIN = _JPEG_SOF | {0xC4, 0xDB, 0xDD, 0xE0, 0xFE}  # + DHT, DQT, DRI, APP0, COM
# (bit depth, colour type) pairs Pillow opens (PngImagePlugin._MODES)
_PNG_MODES = frozenset(
    ((1, 0), (2, 0), (4, 0), (8, 0), (16, 0), (8, 2), (16, 2), (1, 3), (2, 3), (4, 3), (8, 3))
    + ((8, 4), (16, 4), (8, 6), (16, 6))
)
_PNG_MIN_LENGTH = {b"PLTE": 0, b"sRGB": 1, b"gAMA": 4, b"pHYs": 9}  # chunks allowed before IDAT


def _header_size(head: bytes, fd: int, size: int, max_pixels: int | None) -> tuple[int, int] | None:
    """``(width, height)`` of the open file ``fd`` whose first bytes are ``head``, or None when
    Pillow cannot open it (the caller then repeats the check step by step for the reason)."""
    wh = plain_header_size(head)
    if wh is _MORE and size > len(head):
        head += _pread(fd, min(size, _MAX_HEAD_BYTES) - len(head), len(head))
        wh = plain_header_size(head)
    if isinstance(wh, tuple):
        return wh  # the caller checks it against max_pixels before anything is decoded
    try:
        with (
            _pillow_unlimited(),
            open(fd, "rb", closefd=False) as fh,
            Image.open(fh) as im,
        ):
            return _displayed_size(im)
    except Exception:  # noqa: BLE001  (any failure: the slow path names it)
        return None


def _pread(fd: int, n: int, offset: int) -> bytes:
    """Up to ``n`` bytes of ``fd`` from ``offset`` (fewer only at the end of the file)."""
    chunks = []
    while n > 0:
        data = os.pread(fd, n, offset) if _HAS_PREAD else _seek_read(fd, n, offset)
        if not data:
            break
        chunks.append(data)
        n -= len(data)
        offset += len(data)
    return b"".join(chunks) if len(chunks) != 1 else chunks[0]


def _seek_read(fd: int, n: int, offset: int) -> bytes:
    os.lseek(fd, offset, os.SEEK_SET)
    return os.read(fd, n)


def plain_header_size(buf: bytes):
    """``(width, height)`` of a plain JPEG or PNG header in ``buf``; ``_MORE`` when ``buf``
    ends inside the header; None when Pillow should decide."""
    if ImageFile.LOAD_TRUNCATED_IMAGES:  # Pillow then tolerates what these parsers refuse
        return None
    if buf[:3] == b"\xff\xd8\xff":
        return _jpeg_size(buf)
    if buf[:8] == _PNG_SIGNATURE:
        return _png_size(buf)
    return None


def _jpeg_size(buf: bytes):
    """The marker walk of Pillow's ``JpegImageFile._open`` up to the start of scan, for files
    made only of APP0, DQT, DHT, DRI, COM and one SOF0/1/2 segment with 8-bit samples."""
    n = len(buf)
    pos = 3  # buf[2] is the 0xFF of the first marker
    wh = None
    while True:
        if pos + 3 > n:
            return _MORE
        marker = buf[pos]
        if marker != 0xDA and marker not in _JPEG_PLAIN:
            return None
        length = buf[pos + 1] << 8 | buf[pos + 2]
        if length < 2:
            return None
        end = pos + 1 + length  # the segment (its 2 length bytes included) ends here
        if end > n:
            return _MORE
        if marker == 0xDA:  # start of scan, read whole: Pillow stops here
            return wh
        seg = buf[pos + 3 : end]
        if marker in _JPEG_SOF:
            # Pillow refuses other sample depths and layer counts, and indexes components in 3s
            if wh is not None or len(seg) < 6 or (len(seg) - 6) % 3:
                return None
            if seg[0] != 8 or seg[5] not in (1, 3, 4):
                return None
            width, height = seg[3] << 8 | seg[4], seg[1] << 8 | seg[2]
            if width <= 0 or height <= 0:
                return None
            wh = (width, height)
        elif marker == 0xDB:  # quantisation tables: 1 + 64 or 1 + 128 bytes each
            k = 0
            while k < len(seg):
                k += 65 if seg[k] < 16 else 129
            if k != len(seg):
                return None
        elif marker == 0xE0 and seg.startswith(b"JFIF") and len(seg) < 7:
            return None  # Pillow reads the JFIF version at offset 5
        if end >= n:
            return _MORE
        if buf[end] != 0xFF:  # junk between markers: Pillow skips it, leave that to Pillow
            return None
        pos = end + 1


def _png_size(buf: bytes):
    """The chunk walk of Pillow's ``PngImageFile._open`` up to the first IDAT, for files made
    only of IHDR, PLTE, sRGB, gAMA and pHYs chunks (each checked against its CRC, as Pillow
    does)."""
    n = len(buf)
    pos = 8
    wh = None
    while True:
        if pos + 8 > n:
            return _MORE
        length = int.from_bytes(buf[pos : pos + 4], "big")
        cid = buf[pos + 4 : pos + 8]
        if cid == b"IDAT":
            return wh
        if (wh is None) != (cid == b"IHDR"):  # IHDR first, and once
            return None
        if cid != b"IHDR" and (cid not in _PNG_MIN_LENGTH or length < _PNG_MIN_LENGTH[cid]):
            return None
        end = pos + 12 + length
        if end > n:
            return _MORE
        data = buf[pos + 8 : end - 4]
        if zlib.crc32(data, zlib.crc32(cid)) != int.from_bytes(buf[end - 4 : end], "big"):
            return None
        if cid == b"IHDR":
            if length < 13 or (data[8], data[9]) not in _PNG_MODES or data[11]:
                return None
            wh = (int.from_bytes(data[0:4], "big"), int.from_bytes(data[4:8], "big"))
            if wh[0] <= 0 or wh[1] <= 0:
                return None
        pos = end


def _imdecode(data: np.ndarray, flags: int) -> np.ndarray | None:
    """``cv2.imdecode``, with OpenCV's out-of-memory error (past the worker's budget,
    store.memory.worker_budget) raised as the ``MemoryError`` it is."""
    if not data.size:
        return None
    try:
        return cv2.imdecode(data, flags)
    except cv2.error as exc:
        if "Insufficient memory" in str(exc) or "Failed to allocate" in str(exc):
            raise MemoryError(str(exc).splitlines()[-1]) from None
        raise


def load_rgb(path: str | os.PathLike) -> np.ndarray:
    """Decode to an RGB uint8 ``(H, W, 3)`` array (grey and RGBA are converted)."""
    data = np.fromfile(str(path), dtype=np.uint8)
    image = _imdecode(data, cv2.IMREAD_COLOR)
    if image is None:
        raise ImageProblem("cannot decode image pixels (corrupt or unsupported format)")
    del data  # the file's bytes: not held while the channels are swapped
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB, dst=image)  # in place: one image in memory


def load_mask(path: str | os.PathLike) -> np.ndarray:
    """Decode a mask file to a 2-D array (first channel of a colour mask), as displayed."""
    data = np.fromfile(str(path), dtype=np.uint8)
    mask = _imdecode(data, MASK_READ)
    if mask is None:
        raise ImageProblem(f"cannot decode mask {Path(path).name}")
    return mask if mask.ndim == 2 else mask[..., 0]
