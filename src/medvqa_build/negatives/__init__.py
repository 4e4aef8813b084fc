"""Distractor (negative option) selection: embedders, the embedding cache, the FAISS index,
option samplers (``label_pool``, ``visual_class``, ``visual_neighbor``), answer placement
and the difficulty report.

Embedders import torch/open_clip lazily, so importing this package stays cheap.
"""

from . import visual_class, visual_neighbor  # noqa: F401  (register the visual samplers)
from .base import SAMPLERS, NotEnoughOptions, OptionRequest, OptionSampler
from .cache import EmbeddingCache, default_cache_dir, embed_with_cache
from .difficulty import class_centroids, difficulty_report, format_difficulty
from .embedder import EMBEDDERS, Embedder, EmbedderError, UndecodableImage, load_image_rgb
from .embedders import make_embedder
from .index import EmbeddingIndex
from .label_pool import LabelPoolSampler
from .offline_embedder import OfflineEmbedder
from .placement import BalancedSlots, place_answer
from .visual_class import VisualClassSampler
from .visual_neighbor import VisualNeighborSampler

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
    "LabelPoolSampler",
    "NotEnoughOptions",
    "OfflineEmbedder",
    "OptionRequest",
    "OptionSampler",
    "VisualClassSampler",
    "VisualNeighborSampler",
    "class_centroids",
    "default_cache_dir",
    "difficulty_report",
    "embed_with_cache",
    "format_difficulty",
    "make_embedder",
    "place_answer",
]
