"""Property-based tests (hypothesis, one seed) of the input half of issue 33: the table scan
agrees with a plain reading of the bytes whatever the chunking, a name of any bytes comes
out printable, and a NIfTI header is refused exactly when its data cannot fit the file."""

from __future__ import annotations

import gzip
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from medvqa_build.media.volume import VolumeProblem, check_declared_size
from medvqa_build.store import table_text
from medvqa_build.store.paths import escaped_name, undecodable_name
from medvqa_build.store.table_text import TableProblem, check_text_table

SETTINGS = settings(max_examples=80, deadline=None, derandomize=True)
lines = st.lists(st.binary(max_size=40).filter(lambda b: b"\n" not in b), max_size=12)


def _expected(data: bytes, limit: int) -> str | None:
    if b"\x00" in data:
        return "NUL"
    if max((len(line) for line in data.split(b"\n")), default=0) > limit:
        return "max_line_chars"
    return None


@SETTINGS
@given(lines, st.integers(1, 30), st.integers(1, 16))
# a long line in an earlier chunk than the NUL (found by hypothesis 2026-12-07): still "NUL"
@example(parts=[b"\x01\x01", b"\x00"], limit=1, chunk=1)
def test_the_table_scan_refuses_exactly_nul_bytes_and_long_lines(parts, limit, chunk):
    """Whatever the chunk size (here a few bytes, so lines cross chunks), a table is refused
    iff it holds a NUL byte or a line longer than max_line_chars."""
    data = b"\n".join(parts)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.csv"
        path.write_bytes(data)
        saved, table_text._CHUNK = table_text._CHUNK, chunk
        os.environ["MEDVQA_LIMITS"] = f"max_line_chars={limit}"
        try:
            check_text_table(path)
            got = None
        except TableProblem as exc:
            got = "NUL" if "NUL" in str(exc) else "max_line_chars"
        finally:
            table_text._CHUNK = saved
            del os.environ["MEDVQA_LIMITS"]
    assert got == _expected(data, limit)


@SETTINGS
@given(st.binary(min_size=1, max_size=40))
def test_any_file_name_comes_out_printable_and_utf8_names_unchanged(raw):
    name = os.fsdecode(raw)
    shown = escaped_name(name)
    shown.encode("utf-8")  # never raises: Parquet and JSON can hold it
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        assert undecodable_name(name) == shown and "\\x" in shown
    else:
        assert undecodable_name(name) is None and shown == text


@SETTINGS
@given(
    st.tuples(st.integers(1, 400), st.integers(1, 400), st.integers(1, 400)),
    st.sampled_from([np.uint8, np.int16, np.float32]),
    st.booleans(),
)
def test_a_nifti_header_is_refused_exactly_when_its_data_cannot_fit(dims, dtype, gz):
    """Real data up to 8x8x8; the header then claims ``dims``: refused iff offset + voxels x
    item size exceeds the file (x1032 for gzip), never by reading the voxels."""
    import nibabel as nib

    img = nib.Nifti1Image(np.zeros((8, 8, 8), dtype), np.eye(4))
    raw = bytearray(img.header.binaryblock + b"\x00" * 4 + np.zeros(512, dtype).tobytes())
    raw[40:56] = np.array((3, *dims, 1, 1, 1, 1), "<i2").tobytes()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("v.nii.gz" if gz else "v.nii")
        path.write_bytes(gzip.compress(bytes(raw)) if gz else bytes(raw))
        size = path.stat().st_size
        loaded = nib.load(path)
        need = 352 + int(np.prod(dims)) * np.dtype(dtype).itemsize
        fits = need <= (size * 1032 if gz else size)
        if fits:
            check_declared_size(loaded, path)
        else:
            with pytest.raises(VolumeProblem, match="but the file is"):
                check_declared_size(loaded, path)
