"""Dedup (exact, re-encoded, cropped, across sources), k-center selection and splits."""

import shutil

import cv2
import numpy as np
import pytest

from medvqa_build.curate import (
    assign_splits,
    curate_samples,
    duplicate_groups,
    kcenter_greedy,
    parse_curate_spec,
    phash_file,
    water_fill,
)
from medvqa_build.errors import RecipeError
from medvqa_build.media.phash import hamming, near_pairs
from medvqa_build.records import Item, Sample


def _blobs(rng, h=96, w=128) -> np.ndarray:
    """A smooth random image (a few coloured ellipses), like an endoscopy frame."""
    img = np.full((h, w, 3), rng.integers(40, 120, 3), np.uint8)
    for _ in range(6):
        centre = (int(rng.integers(0, w)), int(rng.integers(0, h)))
        axes = (int(rng.integers(8, 40)), int(rng.integers(8, 30)))
        cv2.ellipse(
            img,
            centre,
            axes,
            float(rng.integers(0, 180)),
            0,
            360,
            tuple(int(c) for c in rng.integers(0, 255, 3)),
            -1,
        )
    return cv2.GaussianBlur(img, (5, 5), 0)


@pytest.fixture
def planted(tmp_path):
    """Two sources; in ``a``: 10 distinct images plus an exact copy, a re-encoded (PNG -> JPEG)
    copy and a slightly cropped copy; in ``b``: an exact copy of an ``a`` image."""
    rng = np.random.default_rng(1)
    roots = {"a": tmp_path / "a", "b": tmp_path / "b"}
    for r in roots.values():
        r.mkdir()
    samples = []
    for i in range(10):
        img = _blobs(rng)
        cv2.imwrite(str(roots["a"] / f"i{i}.png"), img)
        samples.append(
            Sample(
                f"a:i{i}",
                "a",
                f"i{i}.png",
                128,
                96,
                "endoscopy",
                labels=(f"L{i % 2}",),
                group_id=f"p{i}",
            )
        )
    shutil.copy(roots["a"] / "i0.png", roots["a"] / "copy0.png")
    samples.append(
        Sample("a:x-copy0", "a", "copy0.png", 128, 96, "endoscopy", labels=("L0",), group_id="px")
    )
    cv2.imwrite(
        str(roots["a"] / "reenc1.jpg"),
        cv2.imread(str(roots["a"] / "i1.png")),
        [cv2.IMWRITE_JPEG_QUALITY, 80],
    )
    samples.append(
        Sample("a:reenc1", "a", "reenc1.jpg", 128, 96, "endoscopy", labels=("L1",), group_id="py")
    )
    crop = cv2.imread(str(roots["a"] / "i2.png"))[2:, 2:126]
    cv2.imwrite(str(roots["a"] / "crop2.png"), crop)
    samples.append(
        Sample("a:crop2", "a", "crop2.png", 124, 94, "endoscopy", labels=("L0",), group_id="pz")
    )
    shutil.copy(roots["a"] / "i3.png", roots["b"] / "other3.png")
    samples.append(
        Sample("b:other3", "b", "other3.png", 128, 96, "endoscopy", labels=("L1",), group_id="q")
    )
    return samples, roots


def test_exact_dedup_only_by_default(planted):
    samples, roots = planted
    kept, report = curate_samples({}, samples, None, roots, 0)
    removed = {r["sample_id"]: r for r in report["removed"]}
    assert set(removed) == {"a:x-copy0", "b:other3"}
    assert removed["a:x-copy0"]["representative"] == "a:i0" and removed["a:x-copy0"][
        "criteria"
    ] == ["exact"]
    assert removed["b:other3"]["representative"] == "a:i3"
    assert report["dedup"]["cross_source_groups"] == 1
    assert report["kept"] + len(report["removed"]) == report["input"] == len(samples)


def test_perceptual_dedup_catches_reencoded_and_cropped_copies(planted):
    samples, roots = planted
    kept, report = curate_samples({"dedup": {"phash_max_hamming": 8}}, samples, None, roots, 0)
    removed = {r["sample_id"]: r for r in report["removed"]}
    assert set(removed) == {"a:x-copy0", "a:reenc1", "a:crop2", "b:other3"}
    assert (
        removed["a:reenc1"]["representative"] == "a:i1"
        and "phash" in removed["a:reenc1"]["criteria"]
    )
    assert removed["a:crop2"]["representative"] == "a:i2"  # "largest": the uncropped original wins
    assert len(kept) == 10 and report["kept"] + len(report["removed"]) == report["input"]
    groups = duplicate_groups(report)
    assert sorted(len(g) for g in groups) == [2, 2, 2, 2]


def test_keep_rule_prefer_sources_and_first(planted):
    samples, roots = planted
    spec = {"dedup": {"prefer_sources": ["b"]}}
    _, report = curate_samples(spec, samples, None, roots, 0)
    removed = {r["sample_id"]: r["representative"] for r in report["removed"]}
    assert removed["a:i3"] == "b:other3"
    _, report = curate_samples(
        {"dedup": {"keep": "first", "phash_max_hamming": 8}}, samples, None, roots, 0
    )
    removed = {r["sample_id"]: r["representative"] for r in report["removed"]}
    assert removed["a:i2"] == "a:crop2"  # "first": the smallest sample_id


def test_embedding_near_duplicates(planted):
    samples, roots = planted
    rng = np.random.default_rng(0)
    emb = {s.sample_id: rng.normal(size=16).astype(np.float32) for s in samples}
    emb["a:i5"] = emb["a:i4"] + 0.01 * rng.normal(size=16).astype(np.float32)
    _, report = curate_samples(
        {"dedup": {"exact": False, "embed_min_cosine": 0.98}}, samples, emb, roots, 0
    )
    assert [(r["sample_id"], r["representative"], r["criteria"]) for r in report["removed"]] == [
        ("a:i5", "a:i4", ["embedding"])
    ]


def test_embedding_pairs_from_disk_match_memory(monkeypatch):
    from medvqa_build.curate import dedup

    rng = np.random.default_rng(2)
    centres = rng.normal(size=(400, 24)).astype(np.float32)
    ids = [f"s{i:04d}" for i in range(1200)]
    # triples around each centre, a few samples without a vector (frames are not embedded)
    emb = {
        sid: centres[i // 3] + 0.05 * rng.normal(size=24).astype(np.float32)
        for i, sid in enumerate(ids)
        if i % 13
    }
    in_memory = dedup._embedding_pairs(ids, emb, 0.97)
    monkeypatch.setattr(dedup, "MEMORY_MIB", 0)  # every vector on disk
    on_disk = dedup._embedding_pairs(ids, emb, 0.97)
    assert on_disk == in_memory and len(in_memory) > 600
    assert all(a < b and s >= 0.97 and ids[a] in emb and ids[b] in emb for a, b, s in in_memory)
    assert {(a, b) for a, b, _ in in_memory} >= {(3, 4), (3, 5), (4, 5)}  # one planted triple


def test_report_reads_the_samples_once(planted):
    """curate_report takes any iterable (the build passes its sample table) and reads it
    once, keeping only packed facts; the report is the list API's."""
    from medvqa_build.curate import curate_report

    samples, roots = planted
    rng = np.random.default_rng(0)
    emb = {s.sample_id: rng.normal(size=8).astype(np.float32) for s in samples}
    spec = {"dedup": {"phash_max_hamming": 8, "keep": "first"}, "select": {"per_label": 3}}
    _, want = curate_samples(spec, samples, emb, roots, 0)
    assert curate_report(spec, iter(samples), emb, roots, 0) == want
    assert want["dedup"]["removed"] == 4 and want["select"]["removed"] > 0


def test_phash_distances():
    rng = np.random.default_rng(3)
    a, b = _blobs(rng), _blobs(rng)
    from medvqa_build.curate import phash_array

    assert hamming(phash_array(a), phash_array(a)) == 0
    assert hamming(phash_array(a), phash_array(b)) > 12
    assert near_pairs([0, 1, 0xFF], 1) == [(0, 1, 1)]


def test_selection_is_balanced_and_counts_add_up(planted):
    samples, roots = planted
    rng = np.random.default_rng(0)
    emb = {s.sample_id: rng.normal(size=8).astype(np.float32) for s in samples}
    spec = {"dedup": {"phash_max_hamming": 8}, "select": {"per_label": 3}}
    kept, report = curate_samples(spec, samples, emb, roots, 0)
    assert report["select"]["per_label"] == {
        "L0": {"available": 5, "selected": 3, "method": "kcenter"},
        "L1": {"available": 5, "selected": 3, "method": "kcenter"},
    }
    assert len(kept) == report["kept"] == 6
    assert report["kept"] + len(report["removed"]) == report["input"]
    again, _ = curate_samples(spec, samples, emb, roots, 0)
    assert again == kept


def test_kcenter_picks_spread_points():
    pts = np.array([[1, 0], [0.99, 0.01], [0, 1], [0.01, 0.99], [-1, 0.02]], np.float32)
    picked = kcenter_greedy(pts, 3)
    assert len(set(picked)) == 3
    # one of each cluster: {0,1}, {2,3}, {4}
    assert {0 if p in (0, 1) else 2 if p in (2, 3) else 4 for p in picked} == {0, 2, 4}


def test_water_fill():
    assert water_fill({"a": 10, "b": 2, "c": 10}, 12, None) == {"a": 5, "b": 2, "c": 5}
    assert water_fill({"a": 10, "b": 2}, None, 4) == {"a": 4, "b": 2}


def _items_for_split(n_patients=20, per_patient=3):
    samples, items = {}, []
    for p in range(n_patients):
        for k in range(per_patient):
            sid = f"s:{p}-{k}"
            label = ["polyp", "ulcer"][(p + k) % 2]
            samples[sid] = Sample(
                sid,
                "s",
                f"{p}-{k}.png",
                10,
                10,
                "endoscopy",
                labels=(label,),
                group_id=f"patient{p}",
                split="train" if p < 4 else None,
            )
            items.append(
                Item(
                    item_id=f"i{p}-{k}",
                    benchmark="B",
                    category="C",
                    task="T",
                    subtask="T",
                    source="s",
                    sample_ids=(sid,),
                    images=(f"source://s/{p}-{k}.png",),
                    question="q",
                    options=("polyp", "ulcer"),
                    answer="A",
                    gt=label,
                )
            )
    return items, samples


def test_splits_are_group_aware_and_follow_proportions():
    items, samples = _items_for_split()
    spec = {"split": {"proportions": {"test": 0.75, "train": 0.25}}}
    out = assign_splits(spec, items, samples, seed=0)
    by_group: dict[str, set] = {}
    for it in out:
        by_group.setdefault(samples[it.sample_ids[0]].group_id, set()).add(it.split)
    assert all(len(s) == 1 for s in by_group.values())
    n_test = sum(it.split == "test" for it in out)
    assert n_test == 45
    for label in ("polyp", "ulcer"):
        share = sum(it.split == "test" for it in out if it.gt == label) / sum(
            it.gt == label for it in out
        )
        assert 0.6 <= share <= 0.9
    assert assign_splits(spec, items, samples, seed=0) == out


def test_splits_use_official():
    items, samples = _items_for_split()
    spec = {"split": {"proportions": {"test": 0.8, "train": 0.2}, "use_official": True}}
    out = assign_splits(spec, items, samples, seed=0)
    assert all(it.split == "train" for it in out if int(it.item_id[1:].split("-")[0]) < 4)


def test_no_split_spec_leaves_items_alone():
    items, samples = _items_for_split(2, 1)
    assert assign_splits({}, items, samples, 0) == items


@pytest.mark.parametrize(
    "bad, key",
    [
        ({"dedup": {"phash": 3}}, "dedup.phash"),
        ({"select": {"method": "random"}}, "select.method"),
        ({"split": {"proportions": {"test": 0.5, "train": 0.2}}}, "split.proportions"),
        ({"split": {"stratify": ["colour"]}}, "split.stratify"),
        ({"dedupe": {}}, "dedupe"),
    ],
)
def test_bad_spec_names_the_key(bad, key):
    with pytest.raises(RecipeError, match=key.replace(".", r"\.")):
        parse_curate_spec(bad)


def test_phash_file_reads_any_image(tmp_path):
    path = tmp_path / "x.jpg"
    cv2.imwrite(str(path), _blobs(np.random.default_rng(0)))
    assert isinstance(phash_file(path), int)


def test_kcenter_in_place_picks_the_same_and_leaves_the_caller_alone():
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(400, 16)).astype(np.float32)
    kept = vectors.copy()
    picked = kcenter_greedy(vectors, 25)
    assert np.array_equal(vectors, kept)  # the default works on a copy
    assert kcenter_greedy(vectors, 25, overwrite=True) == picked
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-6)  # normalised in place
    ints = np.arange(40, dtype=np.int64).reshape(20, 2) + 1
    assert kcenter_greedy(ints, 3, overwrite=True) == kcenter_greedy(ints.copy(), 3)


def test_selection_holds_one_copy_of_a_labels_vectors(tmp_path):
    """Selection peaks at about one float32 matrix of the label (rows read into it one by
    one, normalised in place), not a list of row arrays plus the matrix plus a copy."""
    import tracemalloc

    from medvqa_build.curate.facts import SampleFacts
    from medvqa_build.curate.select import select_rows
    from medvqa_build.curate.spec import SelectSpec
    from medvqa_build.stages.embed import EmbeddingLookup

    n, dim = 6000, 128
    samples = [
        Sample(f"s:{i:05d}", "s", f"{i}.png", 8, 8, "endoscopy", labels=("polyp",))
        for i in range(n)
    ]
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(n, dim)).astype(np.float32)
    np.save(tmp_path / "embeddings.npy", matrix)  # as the embed stage leaves them
    stored = np.load(tmp_path / "embeddings.npy", mmap_mode="r")
    embeddings = EmbeddingLookup([s.sample_id for s in samples], stored)
    facts = SampleFacts.collect(samples, None, {})
    tracemalloc.start()
    try:
        chosen, report = select_rows(facts, range(n), SelectSpec(total=50), embeddings, 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(chosen) == 50 and report["per_label"]["polyp"]["method"] == "kcenter"
    assert peak < 1.4 * matrix.nbytes, (
        f"peak {peak / 2**20:.1f} MiB for a {matrix.nbytes / 2**20:.1f} MiB label"
    )
    # the same picks as k-center over the stacked rows
    order = sorted(range(n), key=lambda i: samples[i].sample_id)
    assert chosen == set(kcenter_greedy(matrix[order], 50))
