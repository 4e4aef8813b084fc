"""Shared fixtures. No test touches the network: the Hub is offline before anything imports it."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

# The embedding cache is shared across builds; tests get their own, never ~/.cache.
os.environ.setdefault("MEDVQA_CACHE", tempfile.mkdtemp(prefix="medvqa-test-cache-"))

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def synthetic_root(tmp_path_factory) -> Path:
    """A small synthetic-endo dataset with one truncated JPEG (written once per session)."""
    from medvqa_build.sources.synthetic_endo import write_synthetic_endo

    root = tmp_path_factory.mktemp("synthetic-endo")
    return write_synthetic_endo(
        root, n_images=25, n_videos=1, frames_per_video=8, n_corrupt=1, seed=0
    )


@pytest.fixture
def repo() -> Path:
    return REPO
