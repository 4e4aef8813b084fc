"""The option-sampler interface: given the truth and a pool, choose distractors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..ontology import Ontology
from ..records import Negatives, Sample
from ..registry import Registry


class NotEnoughOptions(Exception):
    """Too few allowed distractors for the requested option count; the item is dropped
    into the report instead of being emitted with fewer options."""


@dataclass(frozen=True)
class OptionRequest:
    """What a task asks a sampler for: ``n_options - 1 - len(mandatory)`` distractors."""

    truth: str
    pool: tuple[str, ...]
    n_options: int
    sample: Sample | None = None
    mandatory: tuple[str, ...] = ()
    ontology: Ontology = field(default_factory=Ontology)


class OptionSampler(Protocol):
    name: str

    def sample(self, request: OptionRequest, rng: np.random.Generator) -> Negatives: ...


SAMPLERS: Registry[type] = Registry("negative strategy")
