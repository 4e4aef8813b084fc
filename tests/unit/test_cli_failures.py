"""cli/failures.py: which failures become one line (and what it names), which stay bugs."""

from __future__ import annotations

import argparse
import errno

import pyarrow as pa
import pytest

from medvqa_build.cli import failures


def _args(tmp_path, claimed=None) -> argparse.Namespace:
    args = argparse.Namespace()
    if claimed is not None:
        failures.claim(args, claimed)
    return args


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_full_disk_names_the_folder_written(tmp_path, code):
    named = OSError(code, "full", str(tmp_path / "out" / "x.tmp"))
    line = failures.describe(named, _args(tmp_path))
    assert line.startswith(f"the disk is full ({errno.errorcode[code]}")
    assert f"while writing into {tmp_path / 'out'} " in line
    # pyarrow's write error names no file: the command's claimed folder is named
    bare = OSError(code, "Error writing bytes to file")
    line = failures.describe(bare, _args(tmp_path, tmp_path / "build"))
    assert f"while writing into {tmp_path / 'build'} " in line


def test_other_damaged_states_and_bugs(tmp_path):
    args = _args(tmp_path)
    ro = OSError(errno.EROFS, "Read-only file system", "/ro/x")
    assert failures.describe(ro, args).startswith("read-only file system: /ro/x — fix:")
    denied = PermissionError(errno.EACCES, "Permission denied", "/p/build.json")
    assert failures.describe(denied, args).startswith("permission denied: /p/build.json — fix")
    bad = pa.ArrowInvalid("Could not open Parquet input source '/nowhere/items.parquet': junk")
    assert failures.describe(bad, args).startswith("damaged Parquet file (Could not open")
    assert "nested too deeply" in failures.describe(RecursionError(), args)
    assert failures.describe(MemoryError(), args).startswith("ran out of memory")
    # pyarrow failing to allocate is memory running out, not a damaged file (it was said so)
    arrow_oom = pa.ArrowMemoryError("malloc of size 1528421504 failed")
    assert failures.describe(arrow_oom, args).startswith("ran out of memory")
    for bug in (KeyError("x"), ValueError("y"), OSError(errno.ENOENT, "gone", "/x")):
        assert failures.describe(bug, args) is None  # a bug keeps its traceback


def test_undo_removes_only_a_new_folder_without_finished_stages(tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    args = _args(tmp_path, old)
    assert failures.undo(args) is None and old.is_dir()  # it was there before
    new = tmp_path / "new"
    args = _args(tmp_path, new)
    (new / "stages" / "convert" / "a-1").mkdir(parents=True)
    assert failures.undo(args) is None and not new.exists()
    args = _args(tmp_path, new)
    (new / "stages" / "convert" / "a-1").mkdir(parents=True)
    (new / "stages" / "convert" / "a-1" / "_SUCCESS.json").write_text("{}")
    assert failures.undo(args) == f"kept {new}: its 1 finished stage(s) are reused by the next run"
    assert new.is_dir()
