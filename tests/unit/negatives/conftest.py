"""Fixtures for the negatives tests: blob images and a tiny open_clip model.

HF_HUB_OFFLINE must be set before huggingface_hub is imported, or a missing download retries
for about a minute instead of failing at once.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import json  # noqa: E402
from pathlib import Path  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from medvqa_build.records import Sample  # noqa: E402

TINY_CONFIG = {
    "embed_dim": 64,
    "vision_cfg": {"image_size": 64, "layers": 2, "width": 64, "head_width": 32, "patch_size": 16},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2},
}
TINY_NAME = "medvqa-tiny-test-ViT"

# Blob classes: colour (RGB) and radius as a fraction of the image. The *_twin classes look
# almost like their partner, so visually hard negatives exist (named apart: "red_blob" inside
# "red_blob_twin" would be a nested option pair, which the samplers avoid, issue 25).
BLOB_CLASSES = {
    "red_blob": ((200, 40, 40), 0.30),
    "red_twin": ((215, 55, 45), 0.27),
    "green_blob": ((40, 180, 60), 0.30),
    "green_twin": ((50, 195, 70), 0.27),
    "blue_blob": ((40, 60, 200), 0.30),
    "blue_twin": ((55, 70, 215), 0.27),
    "yellow_blob": ((220, 210, 40), 0.30),
    "grey_blob": ((128, 128, 128), 0.30),
}


def make_sample(sid: str, source: str = "src", modality: str = "endoscopy", group: str = ""):
    return Sample(
        sample_id=sid,
        source=source,
        image=f"{sid}.png",
        width=64,
        height=64,
        modality=modality,
        group_id=group,
    )


def clustered_embeddings(classes, per_class, dim=16, spread=0.15, twins=(), seed=0):
    """Unit vectors around one random centre per class; each (a, b) in ``twins`` puts b's
    centre next to a's. Returns (samples, embeddings, labels)."""
    rng = np.random.default_rng(seed)
    centres = {c: rng.normal(size=dim) for c in classes}
    for a, b in twins:
        centres[b] = centres[a] + 0.25 * rng.normal(size=dim)
    samples, vecs, labels = [], [], []
    for c in classes:
        centre = centres[c] / np.linalg.norm(centres[c])
        for i in range(per_class):
            v = centre + spread * rng.normal(size=dim) / np.sqrt(dim)
            vecs.append(v / np.linalg.norm(v))
            samples.append(make_sample(f"{c}:{i}", group=f"{c}-g{i % 3}"))
            labels.append(c)
    return samples, np.array(vecs, dtype=np.float32), labels


def draw_blob(rgb, radius, rng, size=64) -> np.ndarray:
    yy, xx = np.mgrid[:size, :size]
    cx, cy = rng.uniform(0.35, 0.65, size=2) * size
    img = np.full((size, size, 3), 235.0) + rng.normal(0, 12, (size, size, 3))
    inside = (xx - cx) ** 2 + (yy - cy) ** 2 <= (radius * size) ** 2
    img[inside] = np.array(rgb) + rng.normal(0, 18, (int(inside.sum()), 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def write_blob_dataset(root: Path, per_class: int, seed: int = 0, classes=None):
    """PNG files of coloured blobs; returns (samples, paths, labels)."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    samples, paths, labels = [], [], []
    for name, (rgb, radius) in (classes or BLOB_CLASSES).items():
        for i in range(per_class):
            path = root / f"{name}_{i:03d}.png"
            Image.fromarray(draw_blob(rgb, radius, rng)).save(path)
            samples.append(make_sample(f"blobs:{name}/{i}", source="blobs"))
            paths.append(str(path))
            labels.append(name)
    return samples, paths, labels


@pytest.fixture(scope="session")
def synth():
    """The helpers above, for test modules (``--import-mode=importlib`` forbids importing
    from a conftest)."""
    return SimpleNamespace(
        make_sample=make_sample,
        clustered_embeddings=clustered_embeddings,
        write_blob_dataset=write_blob_dataset,
    )


@pytest.fixture(scope="session")
def blob_dataset(tmp_path_factory):
    return write_blob_dataset(tmp_path_factory.mktemp("blobs"), per_class=16)


@pytest.fixture(scope="session")
def tiny_open_clip(tmp_path_factory):
    """(model name, checkpoint path) of a 3.4 M-parameter open_clip model saved locally."""
    import open_clip
    import torch

    cfg_dir = tmp_path_factory.mktemp("open_clip_cfg")
    cfg_path = cfg_dir / f"{TINY_NAME}.json"
    cfg_path.write_text(json.dumps(TINY_CONFIG))
    open_clip.add_model_config(cfg_path)
    torch.manual_seed(123)
    model = open_clip.create_model(TINY_NAME, pretrained=None)
    ckpt = cfg_dir / "tiny.pt"
    torch.save(model.state_dict(), ckpt)
    return TINY_NAME, ckpt
