"""The visual samplers normalise the pool's vectors a block of rows at a time (no full-size
temporaries); the values must be those of the one-shot ``l2_normalise``, bit for bit."""

import numpy as np
import pytest

from medvqa_build.negatives import visual_base
from medvqa_build.negatives.embedder import l2_normalise
from medvqa_build.negatives.visual_base import PoolTable, normalise_rows


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blockwise_normalisation_is_bit_identical(dtype, monkeypatch):
    monkeypatch.setattr(visual_base, "NORMALISE_ROWS", 7)  # many blocks, a ragged last one
    x = np.random.default_rng(3).normal(size=(100, 33)).astype(dtype)
    x[5] = 0.0  # a zero row stays zero, as in l2_normalise
    got = normalise_rows(x)
    want = l2_normalise(x)
    assert got.dtype == np.float32 and got.shape == x.shape
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_pool_table_keeps_labelled_rows_as_codes():
    class S:
        def __init__(self, i, group):
            self.sample_id, self.source, self.modality, self.group_id = f"s{i}", "a", "m", group

    samples = [S(0, "g1"), S(1, "g0"), S(2, "g1"), S(3, None)]
    table = PoolTable.build(samples, ["p", None, "q", "p"])
    assert len(table) == 3 and table.keep.tolist() == [0, 2, 3]
    assert [table.row(f"s{i}") for i in range(4)] == [0, None, 1, 2]
    assert [table.label_names[c] for c in table.labels] == ["p", "q", "p"]
    assert table.group_code("g1") == table.groups[0] == table.groups[1] != table.groups[2]
    assert table.group_code("g0") == -1  # s1 has no label: its group is not in the table
    assert table.label_code("q") == 1 and table.label_code("r") == -1
    assert table.name_code("a") == table.sources[0] and table.name_code("b") == -1
