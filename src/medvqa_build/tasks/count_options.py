"""Count options that give nothing away (issue 32.3): the answer's rank among the options is
spread evenly over the task, and each count is a distractor about ``n_options - 1`` times as
often as it is the answer.

"Counts nearest the truth" made the truth the middle option (a guesser of "the second
smallest" beat chance) and a count never seen as an answer a safe exclusion. Here each item
first takes the rank its truth will have among the options, the rank the task has used least
among those its truth allows (a truth of 0 can only be the smallest; ties drawn from the
task's generator), then fills the counts below and above the truth with a draw weighted by
the showings each count is owed (:class:`~medvqa_build.negatives.frequency.FrequencyLedger`).
The counts come from the range the pool's answers span (:func:`count_range`). Which counts
are asked about, and so how flat the answers are, is the balance policy's part.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..negatives.frequency import FrequencyLedger, weighted_order
from .base import ItemProblem


def count_range(observed: Iterable[int], n_options: int, max_count: int) -> tuple[int, int]:
    """The counts options are drawn from: those the pool's answers span (a count no item can
    have, such as 0 in a task that skips images without findings, would be a safe
    exclusion), at most ``max_count``, widened upwards to ``max_count`` and then downwards
    to 0 (then upwards again) until ``n_options`` counts fit."""
    seen = sorted(set(observed))
    if not seen:
        return 0, max_count
    lo, hi = seen[0], max(min(seen[-1], max_count), seen[0])
    while hi - lo + 1 < n_options:
        if hi < max_count:
            hi += 1
        elif lo > 0:
            lo -= 1
        else:
            hi += 1
    return lo, hi


def feasible_ranks(truth: int, n_distractors: int, max_count: int, min_count: int = 0):
    """Ranks (0 = smallest option) ``truth`` can take with ``n_distractors`` other counts in
    ``min(min_count, truth)..max(max_count, truth)``."""
    below, above = truth - min(min_count, truth), max(max_count, truth) - truth
    return [r for r in range(n_distractors + 1) if r <= below and n_distractors - r <= above]


def count_distractors(
    truth: int,
    n_distractors: int,
    max_count: int,
    rng: np.random.Generator,
    ledger: FrequencyLedger | None = None,
    min_count: int = 0,
) -> list[int]:
    """``n_distractors`` other counts in ``min_count..max_count`` (widened to the truth),
    sorted, such that the truth's rank is the least used one it allows and the counts owed
    showings come first (without a ledger: a uniform rank among those allowed, counts drawn
    uniformly)."""
    ledger = ledger if ledger is not None else FrequencyLedger()
    ranks = feasible_ranks(truth, n_distractors, max_count, min_count)
    low = min(min_count, truth)
    if not ranks:
        raise ItemProblem(
            f"counts {low}..{max(max_count, truth)} give {max(max_count, truth) - low} "
            f"distractors, need {n_distractors}"
        )
    used = np.array([ledger.ranks[r] for r in ranks])
    least = [r for r, u in zip(ranks, used, strict=True) if u == used.min()]
    rank = least[int(rng.integers(len(least)))]
    top = max(max_count, truth)
    picks = []
    for values, k in ((range(low, truth), rank), (range(truth + 1, top + 1), n_distractors - rank)):
        texts = [str(v) for v in values]
        order = weighted_order(texts, ledger.weights(texts, n_distractors + 1), rng)
        picks += [int(t) for t in order[:k]]
    ledger.ranks[rank] += 1
    ledger.record(str(truth), [str(p) for p in picks])
    return sorted(picks)
