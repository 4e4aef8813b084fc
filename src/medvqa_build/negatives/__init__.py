"""Distractor (negative option) selection: embedders, the embedding cache, the FAISS index,
option samplers (``label_pool``, ``visual_class``, ``visual_neighbor``), answer placement
and the difficulty report.

Embedders import torch/open_clip lazily, so importing this package stays cheap.
"""

# Each sampler module is imported to register it, under a name nothing reads: a stage's code
# fingerprint then follows only the samplers it runs (``Stage.plugins``, ``SAMPLERS.module``),
# so editing an unused strategy rebuilds nothing (issue 34). Import a sampler's class from its
# module (``negatives.visual_class``), not from here.
# isort: off
from . import visual_class as _visual_class  # noqa: F401  (registers "visual_class")
from . import visual_neighbor as _visual_neighbor  # noqa: F401  (registers "visual_neighbor")
from . import label_pool as _label_pool  # noqa: F401  (registers "label_pool")

# isort: on
from .base import SAMPLERS, NotEnoughOptions, OptionRequest, OptionSampler
from .cache import EmbeddingCache, default_cache_dir, embed_with_cache
from .difficulty import class_centroids, difficulty_report, format_difficulty
from .embedder import EMBEDDERS, Embedder, EmbedderError, UndecodableImage, load_image_rgb
from .embedders import make_embedder
from .index import EmbeddingIndex
from .placement import BalancedSlots, place_answer

__all__ = [
    "EMBEDDERS",
    "SAMPLERS",
    "BalancedSlots",
    "Embedder",
    "EmbedderError",
    "UndecodableImage",
    "load_image_rgb",
    "EmbeddingCache",
    "EmbeddingIndex",
    "NotEnoughOptions",
    "OptionRequest",
    "OptionSampler",
    "class_centroids",
    "default_cache_dir",
    "difficulty_report",
    "embed_with_cache",
    "format_difficulty",
    "make_embedder",
    "place_answer",
]
