"""The visual samplers normalise the pool's vectors a block of rows at a time (no full-size
temporaries); the values must be those of the one-shot ``l2_normalise``, bit for bit."""

import numpy as np
import pytest

from medvqa_build.negatives import visual_base
from medvqa_build.negatives.embedder import l2_normalise
from medvqa_build.negatives.visual_base import EmbeddingTable, normalise_rows


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blockwise_normalisation_is_bit_identical(dtype, monkeypatch):
    monkeypatch.setattr(visual_base, "NORMALISE_ROWS", 7)  # many blocks, a ragged last one
    x = np.random.default_rng(3).normal(size=(100, 33)).astype(dtype)
    x[5] = 0.0  # a zero row stays zero, as in l2_normalise
    got = normalise_rows(x)
    want = l2_normalise(x)
    assert got.dtype == np.float32 and got.shape == x.shape
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_table_keeps_labelled_rows_only_and_normalises_them():
    class S:
        def __init__(self, i):
            self.sample_id, self.source, self.modality, self.group_id = f"s{i}", "a", "m", f"g{i}"

    x = np.arange(12, dtype=np.float32).reshape(4, 3) + 1
    table = EmbeddingTable.build([S(i) for i in range(4)], x, ["p", None, "q", "p"])
    assert table.sample_ids == ["s0", "s2", "s3"] and table.labels == ["p", "q", "p"]
    assert np.array_equal(table.embeddings, l2_normalise(x[[0, 2, 3]]))
    full = EmbeddingTable.build([S(i) for i in range(4)], x, ["p", "q", "q", "p"])
    assert np.array_equal(full.embeddings, l2_normalise(x)) and x[0, 0] == 1.0  # input intact
