"""Distractor (negative option) selection: samplers, answer placement, and (later) embedders
and the FAISS index behind visually hard negatives."""

from .base import OptionRequest, OptionSampler, SAMPLERS, NotEnoughOptions
from .label_pool import LabelPoolSampler
from .placement import place_answer

__all__ = [
    "OptionRequest",
    "OptionSampler",
    "SAMPLERS",
    "NotEnoughOptions",
    "LabelPoolSampler",
    "place_answer",
]
