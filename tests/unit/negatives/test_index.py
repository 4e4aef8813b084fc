import logging

import numpy as np
import pytest

from medvqa_build.negatives import EmbeddingIndex
from medvqa_build.negatives.index import recall_at_k


def unit(x):
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def clustered(n, d, centres, seed=0):
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(centres, d))
    return unit(c[rng.integers(0, centres, n)] + 0.2 * rng.normal(size=(n, d)))


def test_flat_matches_numpy_brute_force():
    base = unit(np.random.default_rng(0).normal(size=(500, 32)))
    queries = unit(np.random.default_rng(1).normal(size=(37, 32)))
    index = EmbeddingIndex(base, threads=1)
    scores, ids = index.search(queries, 5, batch_size=10)
    sims = queries @ base.T
    expected = np.argsort(-sims, axis=1, kind="stable")[:, :5]
    assert index.kind == "flat"
    np.testing.assert_array_equal(ids, expected)
    np.testing.assert_allclose(scores, np.take_along_axis(sims, expected, 1), atol=1e-5)


def test_ivf_on_clustered_data_keeps_recall():
    base = clustered(6000, 32, centres=50)
    index = EmbeddingIndex(base, kind="auto", ivf_threshold=5000, min_recall=0.9, threads=1)
    assert index.kind == "ivf" and index.recall >= 0.9
    queries = base[:200]
    _, approx = index.search(queries, 10)
    exact = np.argsort(-(queries @ base.T), axis=1)[:, :10]
    assert recall_at_k(approx, exact) >= 0.85


def test_ivf_falls_back_to_exact_when_recall_is_low(caplog):
    base = unit(np.random.default_rng(0).normal(size=(4000, 64)))  # no neighbour structure
    with caplog.at_level(logging.WARNING):
        index = EmbeddingIndex(base, kind="ivf", nprobe=1, min_recall=1.01, threads=1)
    assert index.kind == "flat" and "exact search" in caplog.text
    _, ids = index.search(base[:3], 1)
    assert ids[:, 0].tolist() == [0, 1, 2]


def test_bad_kind():
    with pytest.raises(ValueError, match="unknown index kind"):
        EmbeddingIndex(np.zeros((2, 2), np.float32), kind="hnsw")


def exact_ids(queries, base, k):
    return np.argsort(-(queries @ base.T), axis=1, kind="stable")[:, :k]


def test_self_knn_flat_and_ivf_against_brute_force():
    base = clustered(5000, 32, centres=60, seed=3)
    exact = exact_ids(base, base, 10)
    flat = EmbeddingIndex(base, kind="flat", threads=2)
    _, ids = flat.search_self(10)
    assert recall_at_k(ids, exact) > 0.999  # exact up to float ties
    ivf = EmbeddingIndex(base, kind="ivf", min_recall=0.99, threads=2)
    assert ivf.kind == "ivf" and ivf.self_nprobe <= ivf.nprobe <= ivf.nlist
    assert ivf.self_recall >= 0.99 and ivf.recall >= 0.99
    scores, ids = ivf.search_self(10)
    assert recall_at_k(ids, exact) >= 0.98
    assert (ids[:, 0] == np.arange(len(base))).mean() > 0.99  # a vector is its own best match
    assert np.all(np.diff(scores, axis=1) <= 1e-6)  # best first
    # The indexed array itself as queries takes the self path; a copy is an outside query set.
    np.testing.assert_array_equal(ivf.search(ivf.vectors, 10)[1], ids)
    _, outside = ivf.search(base[:300].copy(), 10)
    assert recall_at_k(outside, exact[:300]) >= 0.97


def test_ivf_is_deterministic_and_thread_count_free():
    base = clustered(3000, 16, centres=40, seed=4)
    a = EmbeddingIndex(base, kind="ivf", threads=1).search_self(5)[1]
    b = EmbeddingIndex(base, kind="ivf", threads=2).search_self(5)[1]
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(b, EmbeddingIndex(base, kind="ivf", threads=2).search_self(5)[1])


def test_k_larger_than_candidates_pads_with_minus_one():
    base = unit(np.random.default_rng(0).normal(size=(7, 8)))
    scores, ids = EmbeddingIndex(base).search(base[:2] + 0.01, 10)
    assert ids.shape == (2, 10) and (ids[:, 7:] == -1).all() and (ids[:, :7] >= 0).all()
    assert sorted(ids[0, :7]) == list(range(7))


def on_disk(x, tmp_path):
    from medvqa_build.store.row_file import RowFile

    f = RowFile(len(x), x.shape[1], np.float32, dir=tmp_path)
    f.write(0, x)
    return f


@pytest.mark.parametrize("kind", ["flat", "ivf"])
def test_vectors_on_disk_give_the_same_results_bit_for_bit(kind, tmp_path):
    base = clustered(4000, 24, centres=50, seed=5)
    mem = EmbeddingIndex(base, kind=kind, threads=2)
    disk = EmbeddingIndex(on_disk(base, tmp_path), kind=kind, threads=2)
    assert disk.kind == mem.kind == kind and disk._cell_ordered == (kind == "ivf")
    s_mem, i_mem = mem.search_self(9)
    got_s, got_i = np.zeros_like(s_mem), np.full_like(i_mem, -2)

    def sink(rows, scores, ids):
        got_s[rows], got_i[rows] = scores, ids

    assert disk.search_self(9, sink=sink) is None
    assert np.array_equal(got_i, i_mem) and np.array_equal(
        got_s.view(np.uint32), s_mem.view(np.uint32)
    )
    np.testing.assert_array_equal(disk.search(disk.vectors, 9)[1], i_mem)  # the self path
    queries = base[:300] + 0.05
    for a, b in zip(mem.search(queries, 7), disk.search(queries, 7), strict=True):
        assert np.array_equal(a, b)
    rows = np.array([3999, 0, 17, 18, 2500])  # by build-time row, whatever the file's order
    assert np.array_equal(disk.vectors_of(rows), base[rows])
    assert np.array_equal(disk.vectors_of(17), base[17])
