"""Out-of-fold option scores for the text-only audit with scikit-learn (the ``audit`` extra).

Only :mod:`medvqa_build.validate.blind` imports this module, inside the function that needs
it, so a build without scikit-learn still imports and reports the audit as skipped.
"""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler


def out_of_fold_scores(
    features: np.ndarray, is_correct: np.ndarray, fold_of_row: np.ndarray, folds: int
) -> np.ndarray:
    """A logit per option row, each from a model fitted on the other folds' items only.

    One logistic regression over the option rows (is this option the answer?); the rows'
    features are centred within their item, so the item-wise softmax of these logits is a
    conditional-logit choice among the item's options. lbfgs on standardised features is
    deterministic: the same rows give the same scores.
    """
    scores = np.zeros(len(features))
    for k in range(folds):
        test = fold_of_row == k
        train = ~test
        if not test.any() or len(np.unique(is_correct[train])) < 2:
            continue
        scaler = StandardScaler().fit(features[train])
        model = LogisticRegression(C=1.0, max_iter=1000)
        model.fit(scaler.transform(features[train]), is_correct[train])
        scores[test] = model.decision_function(scaler.transform(features[test]))
    return scores
