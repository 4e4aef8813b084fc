"""The offline embedder v2: draft-decoded thumbnails, cv2/numpy features, deterministic."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from medvqa_build.negatives import make_embedder
from medvqa_build.negatives.offline_embedder import (
    OfflineEmbedder,
    load_thumbnail,
    thumbnail_features,
)

DIM = 150  # 72 HSV + 6 Lab + 10 LBP + 36 orientation + 7 Hu + 16 layout + 3 extent


def _scene(seed: int, h: int = 240, w: int = 320) -> np.ndarray:
    """A smooth background with a bright disc: colour, texture and a foreground to find."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:h, :w]
    img = np.stack([120 + 60 * np.sin(xx / 37.0), 80 + 40 * np.cos(yy / 23.0), 90 + 0 * xx], -1)
    img = img + rng.normal(0, 10, img.shape)
    disc = (xx - w * 0.6) ** 2 + (yy - h * 0.4) ** 2 < (0.2 * h) ** 2
    img[disc] = (230, 200, 60)
    return np.clip(img, 0, 255).astype(np.uint8)


@pytest.fixture
def embedder():
    return OfflineEmbedder(workers=0)


def test_dimension_norm_and_versioned_id(embedder):
    assert embedder.dim == DIM
    assert embedder.id == "offline:v2:size128"
    assert make_embedder({"name": "offline", "image_size": 64}).id == "offline:v2:size64"
    vec = embedder.embed_array(_scene(0))
    assert vec.shape == (DIM,) and vec.dtype == np.float32
    assert np.linalg.norm(vec) == pytest.approx(1.0, abs=1e-5)
    assert np.isfinite(embedder.embed_array(np.zeros((5, 5, 3), np.uint8))).all()


def test_same_bytes_same_vector_across_threads_and_batches(tmp_path):
    paths = []
    for i in range(9):
        paths.append(str(tmp_path / f"{i}.jpg"))
        Image.fromarray(_scene(i)).save(paths[-1], quality=90)
    a = OfflineEmbedder(workers=0).embed_paths(paths)
    b = OfflineEmbedder(workers=2, batch_size=2).embed_paths(paths)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, OfflineEmbedder(workers=2).embed_paths(paths))
    assert len({v.tobytes() for v in a}) == len(paths)  # different images, different vectors


def test_identical_images_of_different_classes_map_alike(tmp_path, embedder):
    """The embedder sees pixels only: the same picture filed under two classes (two folders,
    two names) gets one vector, and a re-encode of it stays its nearest neighbour."""
    rgb = _scene(3)
    for name in ("polyp/a.jpg", "ulcer/b.jpg"):
        (tmp_path / name).parent.mkdir()
        Image.fromarray(rgb).save(tmp_path / name, quality=90)
    Image.fromarray(rgb).save(tmp_path / "same.png")
    others = []
    for i in range(4, 8):
        others.append(str(tmp_path / f"other{i}.jpg"))
        Image.fromarray(_scene(i)[::-1]).save(others[-1], quality=90)
    vecs = embedder.embed_paths(
        [str(tmp_path / "polyp/a.jpg"), str(tmp_path / "ulcer/b.jpg"), str(tmp_path / "same.png")]
    )
    np.testing.assert_array_equal(vecs[0], vecs[1])
    rest = embedder.embed_paths(others)
    assert vecs[0] @ vecs[2] > 0.99
    assert vecs[0] @ vecs[2] > np.max(rest @ vecs[0])


def test_jpeg_is_draft_decoded_to_the_smallest_covering_scale(tmp_path, monkeypatch):
    from medvqa_build.negatives import offline_embedder

    Image.fromarray(_scene(1, 600, 800)).save(tmp_path / "big.jpg", quality=90)
    seen = []
    real = offline_embedder.load_image_rgb

    def spy(path, min_size=None):
        img = real(path, min_size=min_size)
        seen.append(img.size)
        return img

    monkeypatch.setattr(offline_embedder, "load_image_rgb", spy)
    thumb = load_thumbnail(tmp_path / "big.jpg", 128)
    assert seen == [(200, 150)]  # 1/4 of 800 x 600: the smallest scale with both sides >= 128
    assert thumb.shape == (128, 128, 3) and thumb.dtype == np.uint8
    full = Image.open(tmp_path / "big.jpg").convert("RGB").resize((128, 128), Image.BOX)
    assert np.abs(thumb.astype(int) - np.asarray(full, dtype=int)).mean() < 4


@pytest.mark.parametrize(
    "kind",
    ["png_rgb", "png_grey", "png_rgba", "png_16bit", "jpeg_grey", "tiny_png", "tiny_jpeg", "wide"],
)
def test_draft_decode_handles_every_kind_of_file(tmp_path, embedder, kind):
    rgb = _scene(2)
    grey = np.asarray(Image.fromarray(rgb).convert("L"))
    path = tmp_path / f"{kind}.{'jpg' if 'jpeg' in kind else 'png'}"
    if kind == "png_rgb":
        Image.fromarray(rgb).save(path)
    elif kind == "png_grey":
        Image.fromarray(grey).save(path)
    elif kind == "png_rgba":
        Image.fromarray(np.dstack([rgb, np.full(grey.shape, 200, np.uint8)])).save(path)
    elif kind == "png_16bit":
        Image.fromarray(grey.astype(np.uint16) * 64 + 100).save(path)  # I;16
        assert Image.open(path).mode.startswith("I")
    elif kind == "jpeg_grey":
        Image.fromarray(grey).save(path, quality=95)
    elif kind == "tiny_png":
        Image.fromarray(rgb[:3, :2]).save(path)
    elif kind == "tiny_jpeg":
        Image.fromarray(rgb[:7, :9]).save(path, quality=95)
    elif kind == "wide":
        Image.fromarray(np.tile(rgb[:20], (1, 4, 1))).save(path, quality=95)
    thumb = load_thumbnail(path, 128)
    assert thumb.shape == (128, 128, 3) and thumb.dtype == np.uint8
    vec = embedder.embed_paths([str(path)])[0]
    assert vec.shape == (DIM,) and np.isfinite(vec).all()
    assert np.linalg.norm(vec) == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_array_equal(vec, thumbnail_features(thumb))
    if kind in ("png_grey", "png_16bit", "jpeg_grey"):
        assert np.array_equal(thumb[..., 0], thumb[..., 1])  # grey stays grey
    if kind == "png_16bit":  # min-max rescaled to 8 bits, as every 16-bit file is
        wide = grey.astype(np.float32) * 64 + 100
        scaled = (wide - wide.min()) / (wide.max() - wide.min()) * 255
        Image.fromarray(scaled.astype(np.uint8)).save(tmp_path / "scaled.png")
        expected = load_thumbnail(tmp_path / "scaled.png", 128)
        assert np.abs(thumb.astype(int) - expected.astype(int)).max() <= 1
    if kind == "png_rgba":  # alpha is dropped: the colour channels as an RGB file gives them
        Image.fromarray(rgb).save(tmp_path / "rgb.png")
        np.testing.assert_array_equal(thumb, load_thumbnail(tmp_path / "rgb.png", 128))


def test_embed_array_accepts_grey_and_rgba_arrays(embedder):
    rgb = _scene(5)
    grey = rgb.mean(axis=2).astype(np.uint8)
    np.testing.assert_array_equal(
        embedder.embed_array(grey), embedder.embed_array(np.dstack([grey] * 3))
    )
    rgba = np.dstack([rgb, np.zeros(rgb.shape[:2], np.uint8)])
    np.testing.assert_array_equal(embedder.embed_array(rgba), embedder.embed_array(rgb))


def test_separates_colour_texture_and_layout(embedder):
    """Three looks, six images each: every image is nearer its own class's centroid."""
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[:96, :96]
    images, labels = [], []
    for k in range(6):
        noise = rng.normal(0, 6, (96, 96, 3))
        red = np.full((96, 96, 3), (180, 60, 50)) + noise
        stripes = np.where(((xx + 3 * k) // 4) % 2, 200, 60)[..., None] * [1, 1, 1] + noise
        disc = np.full((96, 96, 3), 90.0) + noise
        disc[(xx - 30 - 4 * k) ** 2 + (yy - 48) ** 2 < 15**2] = (90, 200, 90)
        for name, img in (("red", red), ("stripes", stripes), ("disc", disc)):
            images.append(np.clip(img, 0, 255).astype(np.uint8))
            labels.append(name)
    vecs = np.stack([embedder.embed_array(img) for img in images])
    names = sorted(set(labels))
    cents = np.stack([vecs[[lab == n for lab in labels]].mean(0) for n in names])
    pred = [names[i] for i in np.argmax(vecs @ cents.T, axis=1)]
    assert pred == labels
