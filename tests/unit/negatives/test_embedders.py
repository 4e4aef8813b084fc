import time

import numpy as np
import pytest

from medvqa_build.negatives import EmbedderError, make_embedder
from medvqa_build.negatives.difficulty import class_centroids
from medvqa_build.negatives.offline_embedder import OfflineEmbedder


def nearest_centroid_accuracy(emb, labels):
    cents = class_centroids(emb, labels)
    names = sorted(cents)
    mat = np.stack([cents[n] for n in names])
    pred = [names[i] for i in np.argmax(emb @ mat.T, axis=1)]
    return np.mean([p == t for p, t in zip(pred, labels, strict=True)])


def test_offline_embedder_separates_visually_different_classes(blob_dataset):
    samples, paths, labels = blob_dataset
    keep = [i for i, lab in enumerate(labels) if not lab.endswith("_twin")]
    emb = OfflineEmbedder(workers=2).embed_paths([paths[i] for i in keep])
    labs = [labels[i] for i in keep]
    assert emb.dtype == np.float32 and emb.shape[1] == OfflineEmbedder().dim
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    assert nearest_centroid_accuracy(emb, labs) == 1.0
    same = [emb[i] @ emb[j] for i in range(len(labs)) for j in range(i) if labs[i] == labs[j]]
    diff = [emb[i] @ emb[j] for i in range(len(labs)) for j in range(i) if labs[i] != labs[j]]
    assert np.mean(same) > np.mean(diff) + 0.05  # hand features: cosines are compressed


def test_offline_embedder_is_deterministic_and_ordered(blob_dataset):
    _, paths, _ = blob_dataset
    e = OfflineEmbedder(batch_size=3, workers=2)
    a = e.embed_paths(paths[:7])
    b = OfflineEmbedder(workers=0).embed_paths(paths[:7])
    np.testing.assert_array_equal(a, b)


def test_open_clip_tiny_from_local_checkpoint(tiny_open_clip, blob_dataset):
    name, ckpt = tiny_open_clip
    _, paths, _ = blob_dataset
    e = make_embedder({"open_clip": {"model_name": name, "pretrained": str(ckpt), "batch_size": 4}})
    assert e.dim == 64 and name in e.id and "file-" in e.id and e.device.type == "cpu"
    out = e.embed_paths(paths[:10])
    assert out.shape == (10, 64) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    # Same weights through the string form: same id, same vectors (batching does not matter).
    e2 = make_embedder(f"open_clip:{name}/{ckpt}")
    assert e2.id == e.id
    np.testing.assert_allclose(e2.embed_paths(paths[:10]), out, atol=1e-5)


def test_open_clip_missing_checkpoint_fails_fast_with_one_line(tiny_open_clip, tmp_path):
    name, _ = tiny_open_clip
    start = time.perf_counter()
    with pytest.raises(EmbedderError) as err:
        make_embedder({"open_clip": {"model_name": name, "pretrained": str(tmp_path / "no.pt")}})
    msg = str(err.value)
    assert "\n" not in msg and name in msg and "does not exist" in msg and "local" in msg
    with pytest.raises(EmbedderError, match="HF_HUB_OFFLINE") as err:
        make_embedder("open_clip:ViT-B-32/openai")  # a hub tag, not cached, offline
    assert "ViT-B-32" in str(err.value)
    with pytest.raises(EmbedderError, match="no open_clip_config.json"):
        make_embedder(f"open_clip:local-dir:{tmp_path}")
    assert time.perf_counter() - start < 5


def test_open_clip_corrupt_checkpoint_is_one_clear_line(tiny_open_clip, tmp_path):
    name, _ = tiny_open_clip
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(EmbedderError, match="cannot load weights") as err:
        make_embedder({"open_clip": {"model_name": name, "pretrained": str(bad)}})
    assert "\n" not in str(err.value)


def test_make_embedder_specs():
    assert make_embedder("offline").id.startswith("offline:")
    assert make_embedder({"name": "offline", "image_size": 64}).id.endswith("size64")
    with pytest.raises(Exception, match="unknown embedder"):
        make_embedder("clipz")
    with pytest.raises(EmbedderError, match="unknown open_clip model"):
        make_embedder("open_clip:NoSuchModel")


def test_load_image_rgb_draft_decodes_jpeg_at_a_smaller_dct_scale(tmp_path):
    from PIL import Image

    from medvqa_build.negatives.embedder import load_image_rgb

    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 255, (768, 1024, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "a.jpg", quality=90)
    Image.fromarray(pixels).save(tmp_path / "a.png")
    assert load_image_rgb(tmp_path / "a.jpg").size == (1024, 768)
    assert load_image_rgb(tmp_path / "a.jpg", min_size=224).size == (512, 384)  # 1/2
    assert load_image_rgb(tmp_path / "a.jpg", min_size=100).size == (256, 192)  # 1/4
    assert load_image_rgb(tmp_path / "a.jpg", min_size=500).size == (1024, 768)
    assert load_image_rgb(tmp_path / "a.png", min_size=100).size == (1024, 768)
    assert load_image_rgb(tmp_path / "a.jpg", min_size=224).mode == "RGB"


def test_open_clip_draft_path_keeps_vectors_and_separates_ids(
    tiny_open_clip, blob_dataset, tmp_path
):
    from PIL import Image

    name, ckpt = tiny_open_clip
    _, paths, _ = blob_dataset
    draft = make_embedder({"open_clip": {"model_name": name, "pretrained": str(ckpt)}})
    full = make_embedder(
        {"open_clip": {"model_name": name, "pretrained": str(ckpt), "decode": "full"}}
    )
    assert draft.decode == "draft" and full.decode == "full"
    assert draft.id != full.id and draft.id.startswith(full.id.rsplit(":", 1)[0])
    # PNGs are not drafted: the same pixels, normalised per batch instead of per image.
    np.testing.assert_allclose(
        draft.embed_paths(paths[:12]), full.embed_paths(paths[:12]), atol=1e-5
    )
    # JPEGs larger than twice the input are decoded smaller: close vectors, deterministic.
    jpegs = []
    for i, p in enumerate(paths[:6]):
        jpegs.append(str(tmp_path / f"{i}.jpg"))
        Image.open(p).resize((256, 256)).save(jpegs[-1], quality=95)
    a = draft.embed_paths(jpegs)
    assert np.min(np.sum(a * full.embed_paths(jpegs), axis=1)) > 0.98
    draft.batch_size, draft.workers = 4, 0
    np.testing.assert_allclose(draft.embed_paths(jpegs), a, atol=1e-5)
