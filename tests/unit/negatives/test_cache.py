import numpy as np

from medvqa_build.negatives import EmbeddingCache, embed_with_cache
from medvqa_build.store.atomic import file_sha256


class CountingEmbedder:
    """Deterministic fake: the vector is a function of the file bytes; counts images seen."""

    id = "fake:v1"
    dim = 8

    def __init__(self):
        self.seen = 0

    def embed_paths(self, paths):
        self.seen += len(paths)
        out = []
        for p in paths:
            seed = int(file_sha256(p)[:8], 16)
            v = np.random.default_rng(seed).normal(size=self.dim)
            out.append(v / np.linalg.norm(v))
        return np.array(out, dtype=np.float32)


def write_files(root, n, dup=0, tag="image"):
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        p = root / f"img{i}.bin"
        p.write_bytes(f"{tag} {i % (n - dup) if dup else i}".encode())
        paths.append(str(p))
    return paths


def test_second_call_computes_nothing(tmp_path):
    paths = write_files(tmp_path / "imgs", 10)
    emb = CountingEmbedder()
    first = embed_with_cache(emb, paths, tmp_path / "cache", shard_rows=4, progress=False)
    assert emb.seen == 10 and first.shape == (10, 8) and first.dtype == np.float32
    second = embed_with_cache(emb, paths, tmp_path / "cache", progress=False)
    assert emb.seen == 10
    np.testing.assert_array_equal(first, second)
    more = write_files(tmp_path / "more", 3, tag="other")
    embed_with_cache(emb, paths + more, tmp_path / "cache", progress=False)
    assert emb.seen == 13  # only the new content is embedded


def test_same_content_embedded_once_and_keys(tmp_path):
    paths = write_files(tmp_path / "imgs", 6, dup=3)  # img3..5 repeat img0..2
    emb = CountingEmbedder()
    out = embed_with_cache(emb, paths, tmp_path / "cache", progress=False)
    assert emb.seen == 3
    np.testing.assert_array_equal(out[:3], out[3:])
    keyed = embed_with_cache(
        emb, paths[:2], tmp_path / "cache", keys=["k-a", "k-b"], progress=False
    )
    assert emb.seen == 5 and keyed.shape == (2, 8)


def test_partial_shard_is_never_read(tmp_path):
    paths = write_files(tmp_path / "imgs", 4)
    emb = CountingEmbedder()
    embed_with_cache(emb, paths, tmp_path / "cache", shard_rows=2, progress=False)
    cache = EmbeddingCache(tmp_path / "cache", emb.id, emb.dim)
    # An interrupted write leaves a .npy without its .json index (and temp files).
    (cache.dir / "shard-orphan.npy").write_bytes(b"garbage")
    (cache.dir / ".shard-x.json.tmp").write_text("{")
    index = sorted(cache.dir.glob("shard-*.json"))[0]
    index.with_suffix(".npy").unlink()  # index whose array vanished: ignored too
    again = embed_with_cache(emb, paths, tmp_path / "cache", progress=False)
    assert emb.seen == 6 and again.shape == (4, 8)


def test_other_embedder_id_does_not_share(tmp_path):
    paths = write_files(tmp_path / "imgs", 3)
    a, b = CountingEmbedder(), CountingEmbedder()
    b.id = "fake:v2"
    embed_with_cache(a, paths, tmp_path / "cache", progress=False)
    embed_with_cache(b, paths, tmp_path / "cache", progress=False)
    assert a.seen == 3 and b.seen == 3


def test_vectors_written_into_a_memory_mapped_file_match(tmp_path):
    """A file-backed ``out`` is filled with pwrite, shard by shard: the same values, in key
    order, as an in-memory result (keys spanning shards, repeated, out of order)."""
    paths = write_files(tmp_path / "imgs", 11)
    emb = CountingEmbedder()
    embed_with_cache(emb, paths, tmp_path / "cache", shard_rows=3, progress=False)
    order = [paths[i] for i in (10, 0, 5, 5, 3, 9, 1, 0)]
    expected = embed_with_cache(emb, order, tmp_path / "cache", progress=False)
    out = np.lib.format.open_memmap(tmp_path / "e.npy", mode="w+", dtype=np.float32, shape=(8, 8))
    got = embed_with_cache(emb, order, tmp_path / "cache", progress=False, out=out)
    assert got is out and emb.seen == 11  # all from the cache's four shards
    del out, got
    np.testing.assert_array_equal(np.load(tmp_path / "e.npy"), expected)
    np.testing.assert_array_equal(expected[2], expected[3])
    assert not np.array_equal(expected[0], expected[1])


def test_key_index_first_code_wins_on_load_last_on_put():
    from medvqa_build.negatives.cache import _KeyIndex

    index = _KeyIndex()
    index.add(["a", "b", "a"], [1, 2, 3], replace=False)  # shards loaded in name order
    index.add(["a", "c"], [4, 5], replace=False)
    assert index.codes(["a", "b", "c", "zz"]).tolist() == [1, 2, 5, -1]
    index.add(["b", "d", "d"], [6, 7, 8], replace=True)  # a shard just written wins
    assert index.codes([b"a", b"b", b"d"]).tolist() == [1, 6, 8]  # bytes keys look up alike
    assert len(index) == 4


def test_missing_key_raises_key_error_naming_it(tmp_path):
    paths = write_files(tmp_path / "imgs", 2)
    emb = CountingEmbedder()
    embed_with_cache(emb, paths, tmp_path / "cache", progress=False)
    cache = EmbeddingCache(tmp_path / "cache", emb.id, emb.dim)
    assert file_sha256(paths[0]) in cache and "nope" not in cache and len(cache) == 2
    try:
        cache.get([file_sha256(paths[0]), "nope"])
    except KeyError as exc:
        assert exc.args == ("nope",)
    else:
        raise AssertionError("a key that is not cached must raise")
