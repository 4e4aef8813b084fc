"""A task's pool on disk (``SampleSpill``): samples as the tables hold them come back equal,
by position (cached or not) and in order, and an unusable folder is a one-line error."""

import pytest

from medvqa_build.errors import RecipeError
from medvqa_build.store import sample_spill
from medvqa_build.store.parquet import write_samples
from medvqa_build.store.sample_spill import SampleSpill
from medvqa_build.store.tables import SampleTable


def test_table_samples_come_back_equal(synthetic_root, tmp_path, monkeypatch):
    from medvqa_build.api import load_source

    held = load_source("synthetic-endo", synthetic_root).samples
    write_samples(held, tmp_path / "s.parquet")
    table = list(SampleTable([tmp_path / "s.parquet"]))  # as generate reads them
    assert any(r.mask is not None for s in table for r in s.regions)  # masks round-trip too
    monkeypatch.setattr(sample_spill, "BATCH", 8)  # several batches of this small source
    BATCH = 8
    assert len(table) > 2 * BATCH + 5
    spill = SampleSpill(dir=tmp_path, cache=3)
    for s in table[: BATCH + 5]:
        spill.append(s)
    assert spill[BATCH + 4] == table[BATCH + 4]  # from the partial batch, written on demand
    for s in table[BATCH + 5 :]:  # appending goes on after a read
        spill.append(s)
    assert len(spill) == len(table) and list(spill) == table
    for i in (0, 7, len(table) - 1, -1, 7, 3, 1):  # the cache holds 3: hits and misses
        assert spill[i] == table[i]
    assert spill[2:5] == table[2:5]
    with pytest.raises(IndexError):
        spill[len(table)]
    spill.close()


def test_an_unusable_folder_is_a_one_line_error(tmp_path):
    missing = tmp_path / "no-such-folder"
    with pytest.raises(RecipeError) as err:
        SampleSpill(dir=missing)
    text = str(err.value)
    assert "\n" not in text and str(missing) in text and "TMPDIR" in text and "pool" in text
