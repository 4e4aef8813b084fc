"""The option-sampler interface: given the truth and a pool, choose distractors."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..ontology import Ontology
from ..records import Negatives, Sample
from ..registry import Registry
from .frequency import FrequencyLedger


class NotEnoughOptions(Exception):
    """Too few allowed distractors for the requested option count; the item is dropped
    into the report instead of being emitted with fewer options."""


@dataclass(frozen=True)
class OptionRequest:
    """What a task asks a sampler for: ``n_options - 1 - len(mandatory)`` distractors.

    Visual samplers find the query image by ``sample.sample_id`` among the samples they were
    fitted on, or use ``embedding`` (a unit vector) when it is given. With a ``ledger`` (the
    task's, from its generator context) a sampler draws the texts owed showings first and
    records the item; without one it ignores frequency.
    """

    truth: str
    pool: tuple[str, ...]
    n_options: int
    sample: Sample | None = None
    mandatory: tuple[str, ...] = ()
    ontology: Ontology = field(default_factory=Ontology)
    embedding: np.ndarray | None = field(default=None, compare=False, repr=False)
    ledger: FrequencyLedger | None = field(default=None, compare=False, repr=False)

    def mandatory_distractors(self) -> list[str]:
        """Mandatory options other than the truth (a truth of "Healthy" drops "Healthy")."""
        truth = self.truth.casefold()
        out: list[str] = []
        for m in self.mandatory:
            if m.casefold() != truth and m not in out:
                out.append(m)
        return out

    def distractors_needed(self) -> int:
        return self.n_options - 1 - len(self.mandatory_distractors())


class OptionSampler(Protocol):
    name: str
    needs_embeddings: bool

    def fit(
        self,
        samples: Sequence[Sample],
        embeddings: np.ndarray,
        labels: Sequence[str | None],
        rng: np.random.Generator | None = None,
    ) -> OptionSampler: ...

    def sample(self, request: OptionRequest, rng: np.random.Generator) -> Negatives: ...


def not_enough(request: OptionRequest, allowed: int, need: int, what: str) -> NotEnoughOptions:
    return NotEnoughOptions(
        f"{request.truth!r}: {allowed} allowed {what}, need {need} for {request.n_options} options"
    )


SAMPLERS: Registry[type] = Registry("negative strategy")
