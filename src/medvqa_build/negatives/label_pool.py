"""``label_pool``: distractors drawn at random from the source's label vocabulary (EndoBench),
weighted by the showings each label is owed when the request carries the task's ledger."""

from __future__ import annotations

import numpy as np

from ..records import Negatives
from ..vocab import first_apart, unnested
from .base import SAMPLERS, NotEnoughOptions, OptionRequest
from .frequency import weighted_order


@SAMPLERS.register("label_pool")
class LabelPoolSampler:
    """Random distractors from the pool, never the truth or an ontology relative of it, and
    no two options whose texts contain one another.

    ``balance_frequency`` (default true): with the task's ledger in the request, a label is
    drawn with a weight of the distractor showings it is owed, so each label is a distractor
    about ``n_options - 1`` times as often as it is the answer (issue 32.2); false draws
    uniformly, as before."""

    name = "label_pool"
    needs_embeddings = False

    def __init__(self, balance_frequency: bool = True):
        self.balance_frequency = bool(balance_frequency)

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
        ledger = request.ledger if self.balance_frequency else None
        if len(allowed) == need:  # every allowed label is shown: the set is the recipe's own
            picks = [allowed[i] for i in sorted(rng.choice(need, size=need, replace=False))]
        elif ledger is not None:
            picks = self._owed(request, mandatory, allowed, need, rng)
        else:
            picks = self._apart(request, mandatory, allowed, need, rng)
        if request.ledger is not None:
            request.ledger.record(request.truth, mandatory + picks)
        return Negatives(
            strategy=self.name,
            candidates=tuple(mandatory + picks),
            scores=(),
            pool_size=len(allowed),
        )

    @staticmethod
    def _free(request, mandatory, allowed, need) -> list[str]:
        free = unnested([request.truth, *mandatory], allowed)
        if len(free) < need:
            raise NotEnoughOptions(
                f"{request.truth!r}: {len(free)} distractors whose texts do not contain the "
                f"truth's or a mandatory option's, need {need}"
            )
        return free

    @staticmethod
    def _short(request, apart, need) -> NotEnoughOptions:
        return NotEnoughOptions(
            f"{request.truth!r}: {len(apart)} distractors whose texts do not contain one "
            f"another, need {need} for {request.n_options} options"
        )

    @classmethod
    def _apart(cls, request, mandatory, allowed, need, rng) -> list[str]:
        """``need`` random picks, none whose text contains (or lies inside) the truth's, a
        mandatory option's or another pick's (VLMEvalKit matches replies by containment):
        a nested pick gives way to the next allowed text, in pool order."""
        free = cls._free(request, mandatory, allowed, need)
        picks = [free[i] for i in sorted(rng.choice(len(free), size=need, replace=False))]
        apart = first_apart(picks + [a for a in free if a not in picks], need)
        if len(apart) < need:
            raise cls._short(request, apart, need)
        return sorted(apart, key=free.index)

    @classmethod
    def _owed(cls, request, mandatory, allowed, need, rng) -> list[str]:
        """``need`` picks drawn with the ledger's weights (a nested pick gives way to the next
        text of the weighted order), returned in pool order."""
        free = cls._free(request, mandatory, allowed, need)
        order = weighted_order(free, request.ledger.weights(free, request.n_options), rng)
        apart = first_apart(order, need)
        if len(apart) < need:
            raise cls._short(request, apart, need)
        return sorted(apart, key=free.index)
