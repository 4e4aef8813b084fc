"""store.atomic: the one atomic write of the package (render, caches, reports, exports)."""

import os

import numpy as np
import pytest

from medvqa_build.store.atomic import file_sha256, umask, write_atomic


def test_write_atomic_makes_the_folder_and_replaces_files(tmp_path):
    write_atomic(tmp_path / "new" / "images" / "a.jpg", b"one")
    write_atomic(tmp_path / "new" / "images" / "a.jpg", np.frombuffer(b"two!", np.uint8))
    assert (tmp_path / "new" / "images" / "a.jpg").read_bytes() == b"two!"
    assert sorted(p.name for p in (tmp_path / "new" / "images").iterdir()) == ["a.jpg"]
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(OSError):
        write_atomic(tmp_path / "file" / "images" / "a.jpg", b"x")


def test_text_is_utf8_permissions_are_ordinary_and_fsync_writes_the_same(tmp_path):
    path = write_atomic(tmp_path / "r.json", "naïve\n")
    assert path.read_bytes() == "naïve\n".encode()
    assert (os.stat(path).st_mode & 0o777) == 0o666 & ~umask()
    write_atomic(tmp_path / "c.bin", b"\0" * 10, fsync=True)
    assert file_sha256(tmp_path / "c.bin") == file_sha256(write_atomic(tmp_path / "d", b"\0" * 10))
