"""Answer placement balanced across letters: each task cycles through a seeded permutation
of positions, so letters are uniform to within one item rather than merely shuffled."""

from __future__ import annotations

import numpy as np


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
    """Per-(task, n_options) cycling through random permutations of answer positions."""

    def __init__(self, rng: np.random.Generator):
        self._rng = rng
        self._queues: dict[tuple[str, int], list[int]] = {}

    def next(self, task: str, n_options: int) -> int:
        queue = self._queues.setdefault((task, n_options), [])
        if not queue:
            queue.extend(int(i) for i in self._rng.permutation(n_options))
        return queue.pop()
