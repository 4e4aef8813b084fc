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
) -> np.ndarray:
    """A logit per option row, each from a model fitted on the other folds' items only.
    ``features(k)`` is the feature matrix of every row for the model that scores fold ``k``
    (some columns are counted from the training folds only).

    One logistic regression over the option rows (is this option the answer?); the rows'
    features are centred within their item, so the item-wise softmax of these logits is a
    conditional-logit choice among the item's options. lbfgs on standardised features is
    deterministic: the same rows give the same scores. BLAS runs on one thread: the problems
    are small, and on a busy machine its thread pool made the fits several times slower.
    """
    with threadpool_limits(limits=1, user_api="blas"):
        return _scores(features, is_correct, fold_of_row, folds)


def _scores(
    features: Callable[[int], np.ndarray],
    is_correct: np.ndarray,
    fold_of_row: np.ndarray,
    folds: int,
) -> np.ndarray:
    scores = np.zeros(len(is_correct))
    for k in range(folds):
        test = fold_of_row == k
        train = ~test
        if not test.any() or len(np.unique(is_correct[train])) < 2:
            continue
        x = features(k)
        scaler = StandardScaler().fit(x[train])
        model = LogisticRegression(C=1.0, max_iter=1000)
        model.fit(scaler.transform(x[train]), is_correct[train])
        scores[test] = model.decision_function(scaler.transform(x[test]))
    return scores
