"""Sample and item tables on disk: what a build hands between stages instead of lists, and the
streaming generate stage that reads them a batch at a time."""

import dataclasses
import gc

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from medvqa_build.api import load_source
from medvqa_build.recipe import Recipe
from medvqa_build.records import Sample
from medvqa_build.sources import get_source
from medvqa_build.stages import generate
from medvqa_build.stages.embed import EmbeddingLookup
from medvqa_build.stages.generate import generate_items
from medvqa_build.store.parquet import ItemWriter, write_samples
from medvqa_build.store.tables import ItemTable, SampleTable, sample_lookup


@pytest.fixture(scope="module")
def samples(synthetic_root):
    return load_source("synthetic-endo", synthetic_root).samples


@pytest.fixture(scope="module")
def manifests():
    return {"synthetic-endo": get_source("synthetic-endo").manifest}


def _split_table(samples, tmp_path, batch_rows=16):
    """The samples in two files (as two convert stages write them), read 16 rows a batch."""
    half = len(samples) // 2
    a = write_samples(samples[:half], tmp_path / "a.parquet")
    b = write_samples(samples[half:], tmp_path / "b.parquet")
    return SampleTable([a, b], batch_rows=batch_rows)


def test_sample_table_reads_back_in_order_and_looks_up_by_id(samples, tmp_path):
    table = _split_table(samples, tmp_path)
    assert len(table) == len(samples)
    assert list(table) == list(samples)  # every pass is a fresh read, in file order
    assert list(table) == list(samples)
    assert all(len(b) <= 16 for b in table.batches())
    wanted = [samples[-1].sample_id, samples[0].sample_id, "no-such-id"]
    got = table.get(wanted)
    assert set(got) == set(wanted[:2])
    assert got[samples[-1].sample_id] == samples[-1]
    assert got[samples[0].sample_id] == samples[0]
    # row numbers run on across the files, as numbered_batches gives them
    numbered = [pair for batch in table.numbered_batches() for pair in batch]
    assert [r for r, _ in numbered] == list(range(len(samples)))
    rows = [len(samples) - 1, 2, len(samples) // 2 + 1]
    assert table.take(rows) == {r: samples[r] for r in rows}


def test_sample_table_excludes_ids_everywhere(samples, tmp_path):
    gone = {samples[1].sample_id, samples[-2].sample_id}
    table = SampleTable(_split_table(samples, tmp_path).paths, exclude=gone)
    assert len(table) == len(samples) - 2
    assert [s.sample_id for s in table] == [s.sample_id for s in samples if s.sample_id not in gone]
    assert table.get(gone) == {}
    frame = table.to_arrow()
    assert frame.num_rows == len(samples) - 2 and not gone & set(frame["sample_id"].to_pylist())


def test_sample_lookup_accepts_table_dict_and_list(samples, tmp_path):
    table = _split_table(samples, tmp_path)
    ids = [samples[3].sample_id, samples[7].sample_id]
    expect = {i: s for s in samples for i in ids if s.sample_id == i}
    by_id = {s.sample_id: s for s in samples}
    for source in (table, by_id, list(samples)):
        assert sample_lookup(source)(ids) == expect


def test_item_writer_and_table_round_trip(samples, manifests, repo, tmp_path):
    made = generate_items(_recipe(repo), samples, manifests, progress=False).items
    items = [i.replace(item_id=f"{i.item_id}-{k}") for k in range(4) for i in made]
    assert len(items) > 300  # more than one ENCODE_ROWS block
    with ItemWriter(tmp_path / "items.parquet") as writer:
        for item in items:
            writer.add(item)
    table = ItemTable(tmp_path / "items.parquet", batch_rows=64)
    assert len(table) == len(items)
    assert list(table) == items
    assert table.column("item_id") == [i.item_id for i in items]
    assert table.to_arrow().num_rows == len(items)
    # chosen rows, across batch boundaries and in any order given: those items, in file order
    wanted = {0, 63, 64, 65, 200, len(items) - 1}
    got = list(table.rows(sorted(wanted, reverse=True)))
    assert all(0 < len(batch) <= 64 for batch in got)
    assert [i for batch in got for i in batch] == [items[k] for k in sorted(wanted)]
    assert list(table.rows([])) == []
    # one row group: encoding every 256 items does not change the file's layout
    assert pq.ParquetFile(tmp_path / "items.parquet").num_row_groups == 1


def test_embedding_lookup_is_a_mapping_over_rows():
    ids = ["b", "a", "c"]
    vectors = np.arange(6, dtype=np.float32).reshape(3, 2)
    emb = EmbeddingLookup(ids, vectors)
    assert len(emb) == 3 and list(emb) == ids
    assert "a" in emb and "z" not in emb and 3 not in emb
    assert emb["a"].tolist() == [2.0, 3.0] and emb["c"].tolist() == [4.0, 5.0]
    with pytest.raises(KeyError):
        emb["z"]
    assert dict(emb.items())["b"].tolist() == [0.0, 1.0]


def test_embedding_lookup_reads_rows_of_a_memory_mapped_file(tmp_path):
    import pickle

    rng = np.random.default_rng(1)
    ids = [f"src:img_{i:03d}.jpg" for i in rng.permutation(50)] + ["src:é.jpg"]
    vectors = rng.normal(size=(len(ids), 7)).astype(np.float32)
    np.save(tmp_path / "embeddings.npy", vectors)
    mapped = np.load(tmp_path / "embeddings.npy", mmap_mode="r")
    emb = EmbeddingLookup(ids, mapped)
    assert emb._file is not None  # rows come from the file, not through the mapping
    for row, sid in enumerate(ids):
        got = emb[sid]
        assert got.dtype == np.float32 and got.shape == (7,)
        assert np.array_equal(got, vectors[row])
    assert list(emb) == ids and "src:é.jpg" in emb and "src:x.jpg" not in emb
    copy = pickle.loads(pickle.dumps(emb))  # opens its own file
    assert np.array_equal(copy["src:é.jpg"], vectors[-1])


def _recipe(repo, quota=200, **changes):
    data = yaml.safe_load((repo / "recipes" / "demo.yaml").read_text())
    tasks = [t for t in data["tasks"] if t["name"] != "lesion-type-hard"]
    for t in tasks:
        t["quota"] = quota
    tasks.append(dict(tasks[0], name="train", quota=100, split="train"))
    data["tasks"] = tasks
    data.update(changes)
    return Recipe.from_dict(data)


def test_generate_from_a_table_equals_generate_from_the_list(samples, manifests, repo, tmp_path):
    table = _split_table(samples, tmp_path)
    for recipe in (_recipe(repo), _recipe(repo, quota=5)):
        recipe.tasks = (
            recipe.tasks if recipe.tasks[0].quota > 5 else recipe.tasks[:1] + [recipe.tasks[-1]]
        )
        a = generate_items(recipe, samples, manifests, progress=False)
        b = generate_items(recipe, table, manifests, progress=False)
        assert a.items and a.items == b.items
        assert a.dropped == b.dropped and a.shortfall == b.shortfall
    # the second recipe leaves groups for the instruction split, kept apart from the test's
    assert {i.split for i in b.items} == {"test", "train"}


def test_generate_visual_negatives_from_a_table(samples, manifests, repo, tmp_path):
    """A visual sampler is fitted from the streamed pool: same items as from the list."""
    data = yaml.safe_load((repo / "recipes" / "demo.yaml").read_text())
    data["tasks"] = [t for t in data["tasks"] if t["name"] == "lesion-type-hard"]
    recipe = Recipe.from_dict(data)
    rng = np.random.default_rng(0)
    ids = [s.sample_id for s in samples]
    emb = EmbeddingLookup(ids, rng.normal(size=(len(ids), 8)).astype(np.float32))
    a = generate_items(recipe, samples, manifests, progress=False, embeddings=dict(emb.items()))
    b = generate_items(recipe, _split_table(samples, tmp_path), manifests, False, embeddings=emb)
    assert a.items and a.items == b.items
    assert all(i.negatives.strategy == "visual_class" for i in b.items)


def test_generate_never_holds_the_whole_table(samples, manifests, repo, tmp_path, monkeypatch):
    """Per-sample tasks stream the pool: far fewer Sample objects alive than the table has
    (a batch being planned, or a block of candidates being turned into items)."""
    monkeypatch.setattr(generate, "BLOCK", 128)
    many = [
        dataclasses.replace(s, sample_id=f"{s.sample_id}#{k}", group_id=f"{s.group_id}#{k}")
        for k in range(-(-2400 // len(samples)))
        for s in samples
    ]
    table = _split_table(many, tmp_path, batch_rows=64)
    total = len(many)
    del many
    recipe = _recipe(repo)
    recipe.tasks = [t for t in recipe.tasks if t.split == "test"]
    alive: list[int] = []

    def sink(item):
        if len(alive) % 50 == 0:
            gc.collect()
            alive.append(sum(1 for o in gc.get_objects() if type(o) is Sample))
        else:
            alive.append(alive[-1])

    del samples  # the module fixture's list stays alive; it is counted in the baseline
    gc.collect()
    base = sum(1 for o in gc.get_objects() if type(o) is Sample)
    result = generate_items(recipe, table, manifests, progress=False, sink=sink)
    assert result.count >= 400
    assert max(alive) - base <= 2 * 128, (max(alive) - base, total)
