"""Out-of-fold option scores for the text-only audit with scikit-learn (the ``audit`` extra).

Only :mod:`medvqa_build.validate.blind` imports this module, inside the function that needs
it, so a build without scikit-learn still imports and reports the audit as skipped.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits  # a dependency of scikit-learn


def out_of_fold_scores(
    features: Callable[[int], np.ndarray],
    is_correct: np.ndarray,
    fold_of_row: np.ndarray,
    folds: int,
    nonnegative: int = 0,
) -> np.ndarray:
    """A logit per option row, each from a model fitted on the other folds' items only.
    ``features(k)`` is the feature matrix of every row for the model that scores fold ``k``
    (some columns are counted from the training folds only). The last ``nonnegative``
    columns may only raise an option's score: a column that would get a negative weight is
    left out and the model fitted again (see :func:`_fit`).

    One logistic regression over the option rows (is this option the answer?); the rows'
    features are centred within their item, so the item-wise softmax of these logits is a
    conditional-logit choice among the item's options. lbfgs on standardised features is
    deterministic: the same rows give the same scores. BLAS runs on one thread: the problems
    are small, and on a busy machine its thread pool made the fits several times slower.
    """
    with threadpool_limits(limits=1, user_api="blas"):
        return _scores(features, is_correct, fold_of_row, folds, nonnegative)


def _scores(
    features: Callable[[int], np.ndarray],
    is_correct: np.ndarray,
    fold_of_row: np.ndarray,
    folds: int,
    nonnegative: int,
) -> np.ndarray:
    scores = np.zeros(len(is_correct))
    for k in range(folds):
        test = fold_of_row == k
        train = ~test
        if not test.any() or len(np.unique(is_correct[train])) < 2:
            continue
        x = StandardScaler().fit(features(k)[train]).transform(features(k))
        scores[test] = _fit(x[train], is_correct[train], nonnegative).decision_function(x[test])
    return scores


def _fit(x: np.ndarray, y: np.ndarray, nonnegative: int) -> LogisticRegression:
    """The logistic regression with the last ``nonnegative`` columns' weights >= 0 (by
    zeroing a column that gets a negative weight and fitting again).

    Those are the answer shares, counted without the row's own fold. In a task balanced by
    construction (each answer given a fixed number of times), leaving an item's own answer
    out of the counts makes its answer look rarer than its distractors: a model free to
    weigh that negatively learns the artifact of counting without replacement, not a cue a
    reader could use. A real prior (a text usually, or never, the answer) has a positive
    weight."""
    free = np.ones(x.shape[1], bool)
    while True:
        model = LogisticRegression(C=1.0, max_iter=1000).fit(np.where(free, x, 0.0), y)
        weights = model.coef_[0]
        negative = free & (weights < 0) & (np.arange(len(free)) >= len(free) - nonnegative)
        if not negative.any():
            return model
        free &= ~negative
