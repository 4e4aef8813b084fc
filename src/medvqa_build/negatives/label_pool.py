"""``label_pool``: distractors drawn uniformly from the source's label vocabulary (EndoBench)."""

from __future__ import annotations

import numpy as np

from ..records import Negatives
from ..vocab import first_apart, unnested
from .base import SAMPLERS, NotEnoughOptions, OptionRequest


@SAMPLERS.register("label_pool")
class LabelPoolSampler:
    """Random distractors from the pool, never the truth or an ontology relative of it, and
    no two options whose texts contain one another."""

    name = "label_pool"
    needs_embeddings = False

    def fit(self, samples=None, embeddings=None, labels=None, rng=None) -> LabelPoolSampler:
        """Nothing to learn; present so the pipeline can fit every sampler alike."""
        return self

    def sample(self, request: OptionRequest, rng: np.random.Generator) -> Negatives:
        mandatory = request.mandatory_distractors()
        taken = {m.casefold() for m in mandatory}
        allowed = request.ontology.allowed_distractors(
            request.truth, [p for p in sorted(request.pool) if p.casefold() not in taken]
        )
        # no option's text inside another's (VLMEvalKit matches replies by containment)
        allowed = unnested([request.truth, *mandatory], allowed)
        need = request.distractors_needed()
        if need < 0 or len(allowed) < need:
            raise NotEnoughOptions(
                f"{request.truth!r}: {len(allowed)} allowed distractors in a pool of "
                f"{len(request.pool)}, need {need} for {request.n_options} options"
            )
        picks = [allowed[i] for i in sorted(rng.choice(len(allowed), size=need, replace=False))]
        # a pick nested in an earlier one gives way to the next allowed text, in pool order
        apart = first_apart(picks + [a for a in allowed if a not in picks], need)
        if len(apart) < need:
            raise NotEnoughOptions(
                f"{request.truth!r}: {len(apart)} distractors whose texts do not contain one "
                f"another, need {need} for {request.n_options} options"
            )
        picks = sorted(apart, key=allowed.index)
        return Negatives(
            strategy=self.name,
            candidates=tuple(mandatory + picks),
            scores=(),
            pool_size=len(allowed),
        )
