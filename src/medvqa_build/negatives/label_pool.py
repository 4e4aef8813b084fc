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
        need = request.distractors_needed()
        if need < 0 or len(allowed) < need:
            raise NotEnoughOptions(
                f"{request.truth!r}: {len(allowed)} allowed distractors in a pool of "
                f"{len(request.pool)}, need {need} for {request.n_options} options"
            )
        if len(allowed) == need:  # every allowed label is shown: the set is the recipe's own
            picks = [allowed[i] for i in sorted(rng.choice(need, size=need, replace=False))]
        else:
            picks = self._apart(request, mandatory, allowed, need, rng)
        return Negatives(
            strategy=self.name,
            candidates=tuple(mandatory + picks),
            scores=(),
            pool_size=len(allowed),
        )

    @staticmethod
    def _apart(request, mandatory, allowed, need, rng) -> list[str]:
        """``need`` random picks, none whose text contains (or lies inside) the truth's, a
        mandatory option's or another pick's (VLMEvalKit matches replies by containment):
        a nested pick gives way to the next allowed text, in pool order."""
        free = unnested([request.truth, *mandatory], allowed)
        if len(free) < need:
            raise NotEnoughOptions(
                f"{request.truth!r}: {len(free)} distractors whose texts do not contain the "
                f"truth's or a mandatory option's, need {need}"
            )
        picks = [free[i] for i in sorted(rng.choice(len(free), size=need, replace=False))]
        apart = first_apart(picks + [a for a in free if a not in picks], need)
        if len(apart) < need:
            raise NotEnoughOptions(
                f"{request.truth!r}: {len(apart)} distractors whose texts do not contain one "
                f"another, need {need} for {request.n_options} options"
            )
        return sorted(apart, key=free.index)
