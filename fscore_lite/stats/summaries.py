"""Plain summaries of scored values: the mean and the area under the ROC curve."""
from __future__ import annotations


def mean(values) -> float | None:
    """Mean of the values that are not None; None when there are none."""
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def auc(scores, labels) -> float | None:
    """Area under the ROC curve of ``scores`` for the positive labels (truthy, or 1), ties
    counted half (Mann-Whitney with average ranks); None without both classes.

    Ranks are whole or half numbers, so their sums are exact and the result is the correctly
    rounded area."""
    scores = [float(s) for s in scores]
    positive = [bool(y == 1) for y in labels]
    n1 = sum(positive)
    n0 = len(positive) - n1
    if not n1 or not n0:
        return None
    order = sorted(range(len(scores)), key=scores.__getitem__)
    ranks = [0.0] * len(scores)
    i = 0
    while i < len(order):  # average ranks over ties
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        for k in order[i : j + 1]:
            ranks[k] = (i + j) / 2 + 1
        i = j + 1
    return (sum(r for r, p in zip(ranks, positive) if p) - n1 * (n1 + 1) / 2) / (n1 * n0)


def f1_not_supported(pred_supported: list[bool], human_supported: list[bool]) -> float | None:
    """F1 of predicting "not supported" against the human labels; None when neither has one."""
    tp = sum((not p) and (not h) for p, h in zip(pred_supported, human_supported))
    fp = sum((not p) and h for p, h in zip(pred_supported, human_supported))
    fn = sum(p and (not h) for p, h in zip(pred_supported, human_supported))
    return 2 * tp / (2 * tp + fp + fn) if (2 * tp + fp + fn) else None
