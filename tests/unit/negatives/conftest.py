"""Fixtures for the negatives tests: blob images and a tiny open_clip model.

HF_HUB_OFFLINE must be set before huggingface_hub is imported, or a missing download retries
for about a minute instead of failing at once.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import json  # noqa: E402

import pytest  # noqa: E402
from negatives_synth import TINY_CONFIG, TINY_NAME, write_blob_dataset  # noqa: E402


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
