"""Scoring helpers for benchmark answers: accuracy for single-answer MCQs and set precision,
recall and F1 for multi-select ones (SpineBench's localisation task), plus the random
baselines a dataset card reports."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from math import comb

from .baselines import random_baseline as percent


def parse_letters(answer: str, n_options: int | None = None) -> frozenset[str]:
    """``"A,C"``, ``"A, C"``, ``"AC"``, ``"(A) and (C)"`` -> ``{"A", "C"}``.

    Letters beyond ``n_options`` are ignored; words are not letters ("A and C" keeps A, C).
    """
    text = answer.upper()
    tokens = re.findall(r"\b[A-Z]+\b", text)
    letters = set()
    for tok in tokens:
        if len(tok) == 1 or (
            tok.isalpha()
            and len(set(tok)) == len(tok)
            and len(tok) <= 6
            and all(c in "ABCDEF" for c in tok)
        ):
            letters.update(tok)
    if n_options is not None:
        allowed = {chr(ord("A") + i) for i in range(n_options)}
        letters &= allowed
    return frozenset(letters)


def accuracy(predictions: Sequence[str], answers: Sequence[str]) -> float:
    """Share of exact answers (letters compared as sets, so "C,A" equals "A,C")."""
    if len(predictions) != len(answers):
        raise ValueError(f"{len(predictions)} predictions for {len(answers)} answers")
    if not answers:
        return float("nan")
    pairs = zip(predictions, answers, strict=True)
    hits = sum(parse_letters(p) == parse_letters(a) for p, a in pairs)
    return hits / len(answers)


def multi_select_scores(prediction: str, answer: str) -> dict[str, float]:
    """Precision, recall and F1 of one multi-select prediction (empty prediction: P=R=F1=0)."""
    pred, gold = parse_letters(prediction), parse_letters(answer)
    tp = len(pred & gold)
    precision = tp / len(pred) if pred else 0.0
    recall = tp / len(gold) if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "exact": float(pred == gold)}


def mean_multi_select(predictions: Iterable[str], answers: Iterable[str]) -> dict[str, float]:
    """Macro-averaged (per item) precision, recall, F1 and exact-match accuracy."""
    rows = [multi_select_scores(p, a) for p, a in zip(predictions, answers, strict=True)]
    if not rows:
        return {
            "precision": float("nan"),
            "recall": float("nan"),
            "f1": float("nan"),
            "exact": float("nan"),
        }
    return {k: sum(r[k] for r in rows) / len(rows) for k in rows[0]}


def random_baselines(items) -> dict[str, float]:
    """Per task: mean random-guess accuracy (fraction) over its items; see :mod:`baselines`."""
    return {task: value / 100.0 for task, value in percent(items).items()}


def expected_random_f1(n_options: int, n_true: int) -> float:
    """Mean F1 of a uniform random non-empty subset against a fixed answer of ``n_true``."""
    total, subsets = 0.0, 0
    for k in range(1, n_options + 1):
        for tp in range(0, min(k, n_true) + 1):
            ways = comb(n_true, tp) * comb(n_options - n_true, k - tp)
            if ways:
                f1 = 2 * tp / (k + n_true)
                total += ways * f1
                subsets += ways
    return total / subsets
