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


def test_auc_ci_brackets_the_auc_is_seeded_and_narrows_with_more_data():
    from fscore_lite.stats import auc_ci

    rng = np.random.default_rng(1)
    labels = (rng.random(60) < 0.5).tolist()
    scores = [float(y) * 0.3 + float(rng.random()) for y in labels]  # informative but noisy
    lo, hi = auc_ci(scores, labels)
    assert lo < auc(scores, labels) < hi and 0.0 <= lo and hi <= 1.0
    assert auc_ci(scores, labels) == (lo, hi)  # the same seeded draw every time
    lo4, hi4 = auc_ci(scores * 4, labels * 4)  # four times the responses: a narrower interval
    assert hi4 - lo4 < hi - lo
    assert auc_ci([0.1, 0.9, 0.2, 0.8], [0, 1, 0, 1]) == (1.0, 1.0)  # every resample ranks perfectly
    assert auc_ci([0.1, 0.2], [1, 1]) is None  # one class: no AUC, no interval
