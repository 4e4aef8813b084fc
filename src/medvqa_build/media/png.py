"""A plain 8-bit grey PNG decoded without OpenCV (convert's mask reads, issue 35).

Convert decodes every mask of a source, and OpenCV spends about 0.3 ms of a 352x352 mask's
0.45 ms outside zlib's inflate (libpng unfilters byte by byte and inflates row by row). The
masks most tools write (``cv2.imwrite`` of a 0/255 array) are one IDAT stream of 8-bit grey
rows filtered with *None* or *Sub*: inflated in one call (zlib-ng, twice as fast as zlib on
these streams) and unfiltered here as a prefix sum over each row (a few whole-array numpy
additions), the same pixels cost about a third.

:func:`plain_grey_png` accepts only a file that libpng reads the same way: the signature, IHDR
(8-bit grey, not interlaced) with the expected size, then IDAT chunks and IEND and nothing
else, every chunk's CRC right, one zlib stream (its checksum right) of exactly the image's
bytes, and every row filtered *None* or *Sub*. Anything else (another chunk such as eXIf,
which carries an orientation; a palette; another filter; damage) returns None, and the
caller decodes the file with OpenCV as before, so no result and no message changes.
"""

from __future__ import annotations

import zlib

import cv2
import numpy as np
from zlib_ng import zlib_ng

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_IEND = b"\x00\x00\x00\x00IEND\xaeB`\x82"
_MAX_SIDE = 1 << 20  # OpenCV's own limits on what it decodes (CV_IO_MAX_IMAGE_*)
_MAX_PIXELS = 1 << 30


def plain_grey_png(data: bytes, width: int, height: int) -> np.ndarray | None:
    """The ``(height, width)`` uint8 pixels of ``data`` when it is a plain 8-bit grey PNG of
    that size (see the module docstring), else None. The array is a transposed view
    (Fortran order): its ``.T`` is C-contiguous, the layout the mask's components are found in
    (:func:`~medvqa_build.layouts.masks.component_regions`)."""
    if len(data) < 57 or data[:8] != _SIGNATURE or data[8:16] != b"\x00\x00\x00\rIHDR":
        return None
    ihdr = data[16:29]
    if zlib.crc32(data[12:29]) != int.from_bytes(data[29:33], "big"):
        return None
    w, h = int.from_bytes(ihdr[0:4], "big"), int.from_bytes(ihdr[4:8], "big")
    # 8-bit, grey (colour type 0), deflate, adaptive filtering, no interlace
    if ihdr[8:13] != b"\x08\x00\x00\x00\x00" or (w, h) != (width, height):
        return None
    if not (0 < w <= _MAX_SIDE and 0 < h <= _MAX_SIDE and w * h <= _MAX_PIXELS):
        return None
    if not data.endswith(_IEND):
        return None
    end = len(data) - len(_IEND)
    pos = 33
    idat = []
    while pos < end:
        if pos + 12 > end:
            return None
        length = int.from_bytes(data[pos : pos + 4], "big")
        stop = pos + 12 + length
        if data[pos + 4 : pos + 8] != b"IDAT" or stop > end:
            return None
        chunk = data[pos + 8 : stop - 4]
        if zlib.crc32(chunk, zlib.crc32(b"IDAT")) != int.from_bytes(data[stop - 4 : stop], "big"):
            return None
        idat.append(chunk)
        pos = stop
    if not idat:
        return None
    size = h * (w + 1)  # each row: its filter byte, then its pixels
    inflate = zlib_ng.decompressobj()
    try:
        raw = inflate.decompress(b"".join(idat) if len(idat) > 1 else idat[0], size + 1)
    except zlib_ng.error:
        return None
    if len(raw) != size or not inflate.eof or inflate.unused_data or inflate.unconsumed_tail:
        return None
    rows = np.frombuffer(raw, np.uint8).reshape(h, w + 1)
    filters = rows[:, 0]
    sub = filters == 1
    if not (sub | (filters == 0)).all():
        return None
    # the transpose: row x is pixel column x of every image row
    filtered = cv2.transpose(rows[:, 1:])  # a new, writable array (numpy's copy: 2x slower)
    if not sub.any():
        return filtered.T
    return _row_prefix_sums(filtered, None if sub.all() else ~sub).T


def _row_prefix_sums(columns: np.ndarray, keep: np.ndarray | None) -> np.ndarray:
    """The *Sub* filter undone: each image row's running sum modulo 256, on the transposed
    array ``columns`` (row x = pixel column x), by doubling steps (log2(width) whole-array
    additions instead of a byte-by-byte loop); image rows flagged in ``keep`` (filter
    *None*) keep their bytes."""
    n = columns.shape[0]
    src, out = columns, np.empty_like(columns)
    # the bytes of the rows to keep are read again at the end: never written over
    spare = columns if keep is None else np.empty_like(columns)
    k = 1
    while k < n:
        out[:k] = src[:k]
        np.add(src[k:], src[:-k], out=out[k:])
        src, out = out, (spare if src is columns else src)
        k *= 2
    if keep is not None:
        src[:, keep] = columns[:, keep]
    return src
