"""fscore_lite.stats: the one mean and the one AUC that scoring, meta-eval and the report use."""
from __future__ import annotations

import numpy as np

from fscore_lite.stats import auc, mean


def _pairwise_auc(scores, labels) -> float:
    """The definition: P(score of a positive > score of a negative), ties counted half."""
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def test_auc_is_the_probability_that_a_positive_outranks_a_negative():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(2, 40))
        scores = np.round(rng.random(n), 1)  # coarse: many ties
        labels = rng.random(n) < 0.5
        if labels.all() or not labels.any():
            continue
        assert auc(scores, labels) == _pairwise_auc(scores.tolist(), labels.tolist())
    assert auc([0.1, 0.9], [0, 1]) == 1.0 and auc([0.9, 0.1], [False, True]) == 0.0
    assert auc([0.5, 0.5, 0.5], [1, 0, 1]) == 0.5


def test_auc_needs_both_classes_and_reads_ones_as_positive():
    assert auc([0.1, 0.2], [1, 1]) is None and auc([0.1], [False]) is None and auc([], []) is None
    assert auc(np.array([0.2, 0.8, 0.4]), np.array([0, 1, 2])) == 1.0  # only 1 is positive


def test_mean_skips_missing_values():
    assert mean([1.0, None, 2.0]) == 1.5
    assert mean([]) is None and mean([None]) is None
