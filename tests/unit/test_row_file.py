"""RowFile: a matrix on disk read and written a block of rows at a time, indexed like an array."""

import threading

import numpy as np
import pytest

from medvqa_build.store.row_file import RowFile


def test_rows_read_back_as_written(tmp_path):
    x = np.random.default_rng(0).normal(size=(50, 7)).astype(np.float32)
    f = RowFile(50, 7, np.float32, dir=tmp_path)
    f.write(0, x[:20])
    f.write(20, x[20:])
    assert f.shape == (50, 7) and len(f) == 50 and f.ndim == 2
    assert np.array_equal(f[:], x) and np.array_equal(f[10:13], x[10:13])
    assert np.array_equal(f[3], x[3]) and np.array_equal(f[-1], x[-1])
    rows = np.array([4, 5, 6, 40, 2, 3, 49])  # runs and jumps, any order
    assert np.array_equal(f[rows], x[rows]) and np.array_equal(f[::7], x[::7])
    assert f[np.array([], np.int64)].shape == (0, 7)
    assert list(tmp_path.iterdir()) == []  # the file has no name


def test_scattered_writes_from_threads(tmp_path):
    ids = np.arange(1000, dtype=np.int64).reshape(-1, 1) * np.array([[1, -1]])
    f = RowFile(1000, 2, np.int64, dir=tmp_path)
    order = np.random.default_rng(1).permutation(1000)
    parts = np.array_split(order, 4)
    threads = [threading.Thread(target=f.write_rows, args=(p, ids[p])) for p in parts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert np.array_equal(f[:], ids)


def test_out_of_range_is_an_index_error(tmp_path):
    f = RowFile(3, 2, dir=tmp_path)
    with pytest.raises(IndexError, match="out of range for 3 rows"):
        f[3]
    with pytest.raises(IndexError):
        f[np.array([0, 3])]
    with pytest.raises(IndexError):
        f.write(2, np.zeros((2, 2), np.float32))
    f.close()


def test_an_unusable_spill_folder_is_a_one_line_error(tmp_path):
    from medvqa_build.errors import RecipeError

    missing = tmp_path / "no-such-folder"
    with pytest.raises(RecipeError) as err:
        RowFile(1000, 512, dir=missing)
    text = str(err.value)
    assert "\n" not in text and str(missing) in text and "spill_dir" in text and "2 MiB" in text
