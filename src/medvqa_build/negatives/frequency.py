"""Distractor frequency that tells nothing about the answer (issue 32.2).

A task whose answers are skewed ("polyp" in most region items) and whose distractors are drawn
uniformly shows the frequent answer in nearly every item: "pick the option text seen most"
then beats chance without looking at an image, and a text that is only ever a distractor is
never the answer. The :class:`FrequencyLedger` of a task counts, per option text, its items as
the answer and as a distractor; a text is owed ``(n_options - 1) x answers - distractors``
showings, so that at the end each text is the answer in about ``1 / n_options`` of the items
that show it, whatever its share of the answers. Samplers draw the texts they owe first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np


class FrequencyLedger:
    """Per task: how often each option text was the answer and how often a distractor.

    A generator's context holds one per task; a sampler reads it through the request and
    records each item it completes (the answer, then every distractor shown)."""

    def __init__(self) -> None:
        self.answers: Counter[str] = Counter()
        self.distractors: Counter[str] = Counter()
        self.ranks: Counter[int] = Counter()  # the answer's rank among ordered options
        self.items = 0  # items recorded
        self.expected: dict[str, float] = {}  # planned answers per text (:meth:`expect`)
        self.total = 0

    def expect(self, planned: Mapping[str, float], total: int) -> None:
        """The task's planned answers per text and its planned item count: a text is then
        owed its showings as the task goes, not only once its answers have come. Generation
        takes answer classes in turn, so the largest classes' answers come last; owed only
        after them, their showings could not be made up (a text that is the answer in the
        last items can only be a distractor in those items)."""
        self.expected = {t: float(v) for t, v in planned.items()}
        self.total = int(total)

    def owed(self, text: str, n_options: int) -> float:
        """Distractor showings ``text`` is owed: ``(n_options - 1)`` per time it was the
        answer (or, with a plan, per answer it is due by now if that is more), less the times
        it was already a distractor (negative: shown too often)."""
        answered: float = self.answers[text]
        if self.total > 0 and text in self.expected:
            due = self.expected[text] * min(1.0, (self.items + 1) / self.total)
            answered = max(answered, due)
        return (n_options - 1) * answered - self.distractors[text]

    def record(self, truth: str, distractors: Iterable[str]) -> None:
        self.answers[truth] += 1
        self.distractors.update(distractors)
        self.items += 1

    def weights(self, texts: Sequence[str], n_options: int) -> np.ndarray:
        """Draw weights: the showings owed (none below zero) plus one answer's worth,
        ``n_options - 1``. A text owed nothing is still drawn, as often as one owed a single
        answer's showings: a text shown only when owed would be shown about as many times as
        it is the answer times ``n_options``, and with few answers a text's answers in one
        half of a task would tell those in the other (the audit's cross-validated shares
        found 0.5 against 0.25 on 40 items over 20 texts; 0.33 with this floor)."""
        owed = np.array([self.owed(t, n_options) for t in texts], dtype=np.float64)
        return np.maximum(owed, 0.0) + (n_options - 1)


def weighted_order(texts: Sequence[str], weights: np.ndarray, rng) -> list[str]:
    """``texts`` in a weighted random order without replacement (Efraimidis and Spirakis:
    the largest ``log(u) / w`` first), so the first ``k`` are a weighted draw of ``k``."""
    if not len(texts):
        return []
    keys = np.log(rng.random(len(texts))) / np.asarray(weights, dtype=np.float64)
    return [texts[i] for i in np.argsort(-keys, kind="stable")]


def owed_order(ranked: Sequence[str], ledger: FrequencyLedger, n_options: int, hardness: float):
    """``ranked`` (most similar first) reordered by ``owed - hardness x (n_options - 1) x
    rank``, ties by rank: with an empty ledger the visual order itself; a text climbs one rank
    past a more similar one per ``hardness`` answers' worth of showings it is owed more."""
    step = hardness * (n_options - 1)
    keyed = [(-(ledger.owed(t, n_options) - step * r), r, t) for r, t in enumerate(ranked)]
    return [t for *_, t in sorted(keyed)]


def expected_answers(available: Mapping[str, int], total: int, level: int) -> dict[str, float]:
    """Answers per class when classes are taken in turn up to ``total`` items, at most
    ``level`` each: water-filling, ``min(available, L)`` with ``L`` the level that fills
    ``total`` (fractional where the last round is partial)."""
    counts = sorted((min(int(n), level), name) for name, n in available.items() if n > 0)
    left, out = float(total), {}
    for k, (n, name) in enumerate(counts):
        share = left / (len(counts) - k)  # an even share of what is left
        out[name] = float(min(n, share))
        left -= out[name]
    return out
