"""Answer placement balanced across letters: each task cycles through a seeded permutation
of positions, so letters are uniform to within one item rather than merely shuffled."""

from __future__ import annotations

import numpy as np

from ..rng import rng_for


def place_answer(
    truth: str,
    distractors: list[str] | tuple[str, ...],
    slot: int,
    rng: np.random.Generator,
) -> tuple[list[str], int]:
    """Options with ``truth`` at position ``slot % n`` and distractors shuffled around it."""
    n = len(distractors) + 1
    pos = slot % n
    others = [distractors[i] for i in rng.permutation(len(distractors))]
    options = others[:pos] + [truth] + others[pos:]
    return options, pos


class BalancedSlots:
    """Per-(task, n_options) cycling through random permutations of answer positions.

    Each (task, n_options) draws from a stream of its own, derived from ``rng`` once: with one
    shared stream, a quota changed in one task moved the answer letters of every task after it,
    and a diff between two releases showed items changed that nothing about had changed."""

    def __init__(self, rng: np.random.Generator):
        self._seed = int(rng.integers(2**62))
        self._rngs: dict[tuple[str, int], np.random.Generator] = {}
        self._queues: dict[tuple[str, int], list[int]] = {}

    def next(self, task: str, n_options: int) -> int:
        key = (task, n_options)
        queue = self._queues.setdefault(key, [])
        if not queue:
            if key not in self._rngs:
                self._rngs[key] = rng_for(self._seed, "answer-slots", task, n_options)
            queue.extend(int(i) for i in self._rngs[key].permutation(n_options))
        return queue.pop()
