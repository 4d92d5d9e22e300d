"""Seeded bootstrap confidence intervals over responses (pure Python, deterministic).

The resampling uses :class:`random.Random` seeded with a fixed integer, so the same values
give the same interval on every machine and Python version (``Random.random`` is specified
as Mersenne Twister; indices are drawn as ``int(random() * n)``, not with ``randrange``).
"""
from __future__ import annotations

import math
import random

from .summaries import auc

N_BOOT = 1000
SEED = 0
LEVEL = 0.95


def _percentile(sorted_xs: list[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of an already sorted list."""
    if len(sorted_xs) == 1:
        return sorted_xs[0]
    pos = q * (len(sorted_xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def _resampled_ratios(nums: list[float], dens: list[float], n_boot: int, seed: int) -> list[float]:
    """``sum(nums) / sum(dens)`` over ``n_boot`` resamples (with replacement, same size) of the
    indices, sorted. With every denominator 1 it is the bootstrap of a plain mean."""
    n = len(nums)
    rnd = random.Random(seed).random
    ratios = []
    for _ in range(n_boot):
        num = den = 0.0
        for _ in range(n):
            j = int(rnd() * n)
            num += nums[j]
            den += dens[j]
        ratios.append(num / den)
    ratios.sort()
    return ratios


def _interval(draws: list[float], point: float, level: float) -> tuple[float, float]:
    """The percentile interval of sorted ``draws``, clamped to hold ``point`` (which only matters
    for tiny or degenerate samples where the percentile interval can miss it by rounding)."""
    alpha = (1.0 - level) / 2.0
    return min(_percentile(draws, alpha), point), max(_percentile(draws, 1.0 - alpha), point)


def bootstrap_ci(values: list[float], n_boot: int = N_BOOT, seed: int = SEED,
                 level: float = LEVEL) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean of ``values``; None for no values. The interval
    always contains the sample mean."""
    values = [float(v) for v in values if v is not None]
    if not values:
        return None
    return _interval(_resampled_ratios(values, [1.0] * len(values), n_boot, seed), sum(values) / len(values), level)


def score_ci95(scores: list[float], seed: int = SEED, n_boot: int = N_BOOT) -> list[float] | None:
    """The summary's ``score_ci95``: [low, high] of the mean per-response score, rounded to 6 places."""
    ci = bootstrap_ci(scores, n_boot=n_boot, seed=seed, level=0.95)
    return None if ci is None else [round(ci[0], 6), round(ci[1], 6)]


def paired_difference(a: dict, b: dict, n_boot: int = N_BOOT, seed: int = SEED,
                      level: float = LEVEL) -> dict | None:
    """Mean of ``a[k] - b[k]`` over the keys both have (e.g. topics), with a bootstrap interval
    over those keys (pairs resampled together). None when no key is shared."""
    keys = sorted(k for k in a if k in b and a[k] is not None and b[k] is not None)
    if not keys:
        return None
    diffs = [float(a[k]) - float(b[k]) for k in keys]
    mean = sum(diffs) / len(diffs)
    ci = bootstrap_ci(diffs, n_boot=n_boot, seed=seed, level=level)
    return {"n": len(keys), "mean": mean, "ci": list(ci), "level": level,
            "excludes_zero": ci[0] > 0 or ci[1] < 0}


def clustered_ratio_ci(groups: dict, n_boot: int = N_BOOT, seed: int = SEED,
                       level: float = LEVEL) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``sum(numerators) / sum(denominators)``, resampling whole
    groups.

    ``groups`` maps a cluster key (e.g. a topic) to its ``(numerator, denominator)``; the keys are
    resampled with replacement. A mean of values is the ratio (sum, count); an F1 is the ratio
    (2·TP, 2·TP + FP + FN). Values of one cluster are correlated (the same page decides them), so
    resampling them one by one would give too narrow an interval. Keys are read in sorted order,
    so the interval does not depend on the dict's order. Denominators are non-negative; groups with
    a zero one carry no weight. None when no group has weight."""
    keys = sorted(k for k, (_, den) in groups.items() if den)
    if not keys:
        return None
    nums = [float(groups[k][0]) for k in keys]
    dens = [float(groups[k][1]) for k in keys]
    return _interval(_resampled_ratios(nums, dens, n_boot, seed), sum(nums) / sum(dens), level)


def clustered_mean_ci(groups: dict, n_boot: int = N_BOOT, seed: int = SEED,
                      level: float = LEVEL) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean of all values, resampling whole groups
    (:func:`clustered_ratio_ci` of each group's sum and count): ``groups`` maps a cluster key to
    its values, and a topic with two bios counts twice, as in the plain mean."""
    return clustered_ratio_ci({k: (sum(v), len(v)) for k, v in groups.items()}, n_boot, seed, level)


def signed_error_ci(estimates: list[float], humans: list[float], topics: list[str]) -> list[float] | None:
    """95% interval (points) of a subject's signed error, mean estimate − mean human score, by a
    seeded bootstrap that resamples topics (:func:`clustered_mean_ci`):
    how far the ER could move with another sample of topics like these. Shares are in [0, 1]."""
    groups: dict[str, list[float]] = {}
    for e, h, t in zip(estimates, humans, topics):
        groups.setdefault(t, []).append(100.0 * (float(e) - float(h)))
    ci = clustered_mean_ci(groups)
    return None if ci is None else [round(ci[0], 2), round(ci[1], 2)]


def f1_ns_ci(pred_supported: list[bool], human_supported: list[bool], topics: list[str]) -> list[float] | None:
    """95% interval of :func:`~fscore_lite.stats.summaries.f1_not_supported` (a share, like it) by a seeded bootstrap that
    resamples topics: F1 = 2·TP / (2·TP + FP + FN), each count summed over the topics drawn."""
    groups: dict[str, list[int]] = {}
    for p, h, t in zip(pred_supported, human_supported, topics):
        g = groups.setdefault(t, [0, 0])
        tp = (not p) and (not h)
        g[0] += 2 * tp
        g[1] += 2 * tp + ((not p) and h) + (p and (not h))
    ci = clustered_ratio_ci({t: tuple(g) for t, g in groups.items()})
    return None if ci is None else [round(ci[0], 4), round(ci[1], 4)]


def auc_ci(scores: list[float], labels: list[bool], n_boot: int = N_BOOT, seed: int = SEED,
           level: float = LEVEL) -> tuple[float, float] | None:
    """Percentile bootstrap interval of :func:`~fscore_lite.stats.summaries.auc` (positive =
    truthy label), resampling the (score, label) pairs together with the seeded draw of
    :func:`bootstrap_ci`. A resample holding one class only has no AUC and is skipped. None when
    the sample itself lacks a class."""
    point = auc(scores, labels)
    if point is None:
        return None
    n = len(scores)
    rnd = random.Random(seed).random
    draws = []
    for _ in range(n_boot):
        idx = [int(rnd() * n) for _ in range(n)]
        a = auc([scores[j] for j in idx], [labels[j] for j in idx])
        if a is not None:
            draws.append(a)
    draws.sort()
    return _interval(draws, point, level) if draws else (point, point)
