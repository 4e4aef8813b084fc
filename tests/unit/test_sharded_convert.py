"""convert --workers: shards of the per-file work give exactly the unsharded result, for every
source whose fixture exists (shardable layouts are split, the others scanned by shard 0)."""

import pytest

from medvqa_build.api import list_sources
from medvqa_build.layouts.base import LAYOUTS
from medvqa_build.stages.convert import scan_source

from .. import fixtures

SOURCES = [s.id for s in list_sources()]


@pytest.mark.parametrize("source_id", SOURCES)
def test_workers_give_the_same_samples_and_quarantine(source_id, tmp_path):
    root = fixtures.fixture_writer(source_id)(tmp_path / source_id)
    one = scan_source(source_id, root, progress=False)
    three = scan_source(source_id, root, progress=False, workers=3)
    assert three.samples == one.samples and three.quarantined == one.quarantined


def test_the_common_layouts_are_shardable():
    for name in (
        "class_folders",
        "label_table",
        "image_mask_pairs",
        "frame_folders",
        "yolo_boxes",
        "txt_boxes",
    ):
        assert getattr(LAYOUTS.get(name), "shardable", False), name


def test_sharding_with_quarantine_and_duplicates(synthetic_root):
    one = scan_source("synthetic-endo", synthetic_root, progress=False)
    two = scan_source("synthetic-endo", synthetic_root, progress=False, workers=2)
    assert two.counts() == one.counts() == {"found": 33, "converted": 32, "quarantined": 1}
    assert two.samples == one.samples and two.quarantined == one.quarantined


def test_a_large_source_converts_on_every_core_by_default(synthetic_root, tmp_path, monkeypatch):
    """No worker count given: every core once the root holds PARALLEL_FROM files (lowered
    here), the same table to the byte; below it, one process."""
    from medvqa_build.stages import convert

    monkeypatch.setattr(convert, "cores", lambda: 2)
    monkeypatch.setattr(convert, "PARALLEL_FROM", 10**6)
    assert convert.default_workers(synthetic_root) == 1
    monkeypatch.setattr(convert, "PARALLEL_FROM", 10)
    assert convert.default_workers(synthetic_root) == 2
    seen, real = [], convert.make_executor
    monkeypatch.setattr(convert, "make_executor", lambda name, n: seen.append(n) or real(name, n))
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    auto = convert.convert_source("synthetic-endo", synthetic_root, a, progress=False)
    one = convert.convert_source("synthetic-endo", synthetic_root, b, progress=False, workers=1)
    assert seen == [2, 1] and auto["converted"] == one["converted"] == 32
    assert a.read_bytes() == b.read_bytes()
