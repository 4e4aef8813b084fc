"""Count options that give nothing away (issue 32.3): the answer's rank among the options is
spread evenly over the task, and each count is a distractor about ``n_options - 1`` times as
often as it is the answer.

"Counts nearest the truth" made the truth the middle option (a guesser of "the second
smallest" beat chance) and a count never seen as an answer a safe exclusion. Here each item
first takes the rank its truth will have among the options, the rank the task has used least
among those its truth allows (a truth of 0 can only be the smallest; ties drawn from the
task's generator), then fills the counts below and above the truth with a draw weighted by
the showings each count is owed (:class:`~medvqa_build.negatives.frequency.FrequencyLedger`).
Which counts are asked about, and so how flat the answers are, is the balance policy's part.
"""

from __future__ import annotations

import numpy as np

from ..negatives.frequency import FrequencyLedger, weighted_order
from .base import ItemProblem


def feasible_ranks(truth: int, n_distractors: int, max_count: int) -> list[int]:
    """Ranks (0 = smallest option) ``truth`` can take with ``n_distractors`` other counts in
    ``0..max(max_count, truth)``."""
    below, above = truth, max(max_count, truth) - truth
    return [r for r in range(n_distractors + 1) if r <= below and n_distractors - r <= above]


def count_distractors(
    truth: int,
    n_distractors: int,
    max_count: int,
    rng: np.random.Generator,
    ledger: FrequencyLedger | None = None,
) -> list[int]:
    """``n_distractors`` other counts in ``0..max(max_count, truth)``, sorted, such that the
    truth's rank is the least used one it allows and the counts owed showings come first
    (without a ledger: a uniform rank among those allowed, counts drawn uniformly)."""
    ledger = ledger if ledger is not None else FrequencyLedger()
    ranks = feasible_ranks(truth, n_distractors, max_count)
    if not ranks:
        raise ItemProblem(
            f"counts 0..{max_count} give {max(max_count, truth)} distractors, need {n_distractors}"
        )
    used = np.array([ledger.ranks[r] for r in ranks])
    least = [r for r, u in zip(ranks, used, strict=True) if u == used.min()]
    rank = least[int(rng.integers(len(least)))]
    top = max(max_count, truth)
    picks = []
    for values, k in ((range(truth), rank), (range(truth + 1, top + 1), n_distractors - rank)):
        texts = [str(v) for v in values]
        order = weighted_order(texts, ledger.weights(texts, n_distractors + 1), rng)
        picks += [int(t) for t in order[:k]]
    ledger.ranks[rank] += 1
    ledger.record(str(truth), [str(p) for p in picks])
    return sorted(picks)
