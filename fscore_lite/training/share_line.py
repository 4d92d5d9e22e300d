"""The share line: how a calibration maps a set of facts' PACC share to the human FActScore.

PACC's share means ``(p̄_S, p̄_NS)`` come from labelled human facts. Facts made another way (the
paper's InstructGPT facts, or the facts the default decomposer makes) read differently: lower,
and with subjects further apart than the human facts' pair predicts. Those facts carry no
per-fact label, only their bio's human FActScore ``h``, so the correction is fitted at the bio
level, as a line on the PACC scale, ``h ≈ a + b·u`` with ``u`` the bio's unclipped PACC share
under its pair.

A least-squares line through the bios is flattened by the noise of one bio's mean probability
(regression dilution: a bio's ``u`` is a noisy reading of its true share), which pulls every
subject toward the middle. Fitted between the *subjects'* means instead (Wald's grouping
estimator: a bio's subject is known without error and does not depend on that noise), the slope
is not attenuated. With fewer than two subjects only the level is fitted (``b = 1``), as is a
fit whose slope is not positive.

In terms of the pair, the line is another pair: ``share = a + b·(m − p̄_NS)/(p̄_S − p̄_NS)``
equals ``(m − p̄'_NS)/(p̄'_S − p̄'_NS)`` with :func:`~fscore_lite.factscore.combiner.line_pair`.
"""
from __future__ import annotations

import numpy as np


def fit_share_line(shares, human, groups=None) -> tuple[float, float]:
    """``(a, b)`` of ``h ≈ a + b·u`` (``shares``: the bios' unclipped PACC ``u``; ``human``: their human
    shares), fitted between the means of ``groups`` (one label per bio: its subject), each weighted by
    its number of bios. One group, or a slope that is not positive: ``b = 1`` and ``a`` the mean gap."""
    u = np.asarray(shares, dtype=np.float64)
    h = np.asarray(human, dtype=np.float64)
    if not len(u):
        raise ValueError("the share line needs at least one bio")
    labels = list(groups) if groups is not None else [None] * len(u)
    names = list(dict.fromkeys(labels))
    level = (float(np.mean(h - u)), 1.0)
    if len(names) < 2:
        return level
    idx = [np.asarray([i for i, g in enumerate(labels) if g == name]) for name in names]
    w = np.asarray([len(i) for i in idx], dtype=np.float64)
    gu = np.asarray([u[i].mean() for i in idx])
    gh = np.asarray([h[i].mean() for i in idx])
    cu, ch = np.average(gu, weights=w), np.average(gh, weights=w)
    var = float(np.sum(w * (gu - cu) ** 2))
    if var <= 1e-12:
        return level
    b = float(np.sum(w * (gu - cu) * (gh - ch)) / var)
    if not np.isfinite(b) or b <= 0:
        return level
    return float(ch - b * cu), b
