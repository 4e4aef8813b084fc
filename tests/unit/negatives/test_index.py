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
