"""The trained verifier's calibrated combiner: standardised features → logistic regression.

:class:`Combiner` is what the runtime applies (coefficients and threshold come from the model
manifest); :func:`fit_logistic` fits one (L2-regularised, Newton–Raphson, deterministic) and
:func:`share_matching_threshold` picks the decision threshold so that the estimated share of
supported facts matches the human FActScore on the training bios. Both are plain numpy, so
the meta-evaluation can refit them per cross-validation fold without the build step.

The share of a response's facts that are supported is estimated by probabilistic adjusted
classify-and-count (PACC, :meth:`Combiner.adjusted_share`): counting decisions, or averaging
probabilities, pulls every response toward the training mean (a verifier that is unsure
overestimates low shares and underestimates high ones); PACC undoes that with the mean
probability the combiner gives supported and unsupported facts of topics it did not see.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np


@dataclass(frozen=True)
class Combiner:
    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    threshold: float  # supported iff probability > threshold
    # mean out-of-fold probability of supported / not supported human facts (PACC); None: no adjustment
    p_supported: float | None = None
    p_not_supported: float | None = None

    def logit(self, x: np.ndarray) -> np.ndarray:
        z = (np.asarray(x, dtype=np.float64) - np.asarray(self.mean)) / np.asarray(self.scale)
        return z @ np.asarray(self.coef) + self.intercept

    def probability(self, x: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-self.logit(x)))

    def matrix(self, rows: list[dict[str, float]]) -> np.ndarray:
        return np.asarray([[r[f] for f in self.features] for r in rows], dtype=np.float64).reshape(-1, len(self.features))

    def to_json(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}

    @staticmethod
    def from_json(d: dict) -> "Combiner":
        opt = lambda k: None if d.get(k) is None else float(d[k])  # noqa: E731
        return Combiner(tuple(d["features"]), tuple(d["mean"]), tuple(d["scale"]), tuple(d["coef"]),
                        float(d["intercept"]), float(d["threshold"]), opt("p_supported"), opt("p_not_supported"))

    def with_threshold(self, threshold: float) -> "Combiner":
        return replace(self, threshold=float(threshold))

    def with_adjustment(self, p_supported: float, p_not_supported: float) -> "Combiner":
        return replace(self, p_supported=float(p_supported), p_not_supported=float(p_not_supported))

    def with_calibration(self, calibration: dict) -> "Combiner":
        """The same weights with another calibration (the own-facts calibration of the verifier's
        manifest entry): its threshold, and this combiner's share means mapped by its share ``line``
        (:func:`line_pair`, recipe 6) or moved by its ``shift`` (recipe 5); a record with neither, of an
        older recipe, gives the share means themselves."""
        if "line" in calibration:
            ps, pns = line_pair(self.pair, *calibration["line"])
        elif "shift" in calibration:
            ps, pns = (p + calibration["shift"] for p in self.pair)
        else:
            ps, pns = calibration["p_supported"], calibration["p_not_supported"]
        return self.with_threshold(calibration["threshold"]).with_adjustment(ps, pns)

    @property
    def pair(self) -> tuple[float, float]:
        """The PACC share means (p̄_S, p̄_NS); without them (1, 0), under which the share is the mean probability."""
        return (self.p_supported, self.p_not_supported) if self.adjusts else (1.0, 0.0)

    @property
    def adjusts(self) -> bool:
        return (self.p_supported is not None and self.p_not_supported is not None
                and self.p_supported > self.p_not_supported)

    def adjusted_share(self, probs) -> float | None:
        """PACC estimate of the share of supported facts among facts with probabilities ``probs``:
        ``(mean(probs) − p̄_NS) / (p̄_S − p̄_NS)``, clipped to [0, 1]; None without the two means."""
        probs = np.asarray(probs, dtype=np.float64)
        if not self.adjusts or not probs.size:
            return None
        share = (float(probs.mean()) - self.p_not_supported) / (self.p_supported - self.p_not_supported)
        return min(1.0, max(0.0, share))


def line_pair(pair: tuple[float, float], a: float, b: float) -> tuple[float, float]:
    """The share means under which PACC gives ``a + b·u``, ``u`` being PACC under ``pair``
    (:mod:`fscore_lite.training.share_line`): ``p̄'_S − p̄'_NS = (p̄_S − p̄_NS)/b`` and
    ``p̄'_NS = p̄_NS − a·(p̄_S − p̄_NS)/b``."""
    s, ns = pair
    spread = (s - ns) / b
    low = ns - a * spread
    return low + spread, low


def fit_logistic(x: np.ndarray, y: np.ndarray, features: tuple[str, ...], l2: float = 1.0,
                 iterations: int = 50) -> Combiner:
    """L2-regularised logistic regression on standardised features (the intercept is not
    penalised), by Newton–Raphson. ``y`` is 1 for supported facts. Threshold 0.5 until
    :func:`share_matching_threshold` sets it."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    reg = np.full(z.shape[1], l2)
    reg[-1] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))
        grad = z.T @ (p - y) + reg * w
        hess = (z * (p * (1 - p))[:, None]).T @ z + np.diag(reg) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    return Combiner(tuple(features), tuple(map(float, mean)), tuple(map(float, scale)),
                    tuple(map(float, w[:-1])), float(w[-1]), 0.5)


def estimated_share(bio_probs: list[np.ndarray], threshold: float) -> float:
    """Mean over bios of the share of facts with probability above ``threshold``."""
    return float(np.mean([np.mean(p > threshold) for p in bio_probs if len(p)]))


def share_matching_threshold(bio_probs: list[np.ndarray], human_share: float) -> float:
    """The threshold whose :func:`estimated_share` is closest to ``human_share`` (ties: the
    smallest such threshold), searched over the midpoints of the observed probabilities."""
    values = np.unique(np.concatenate([p for p in bio_probs if len(p)]))
    candidates = np.concatenate([[0.0], (values[:-1] + values[1:]) / 2, [1.0]])
    best, best_err = 0.5, float("inf")
    # the estimated share falls as the threshold grows: bisect, then check neighbours
    lo, hi = 0, len(candidates) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if estimated_share(bio_probs, candidates[mid]) > human_share:
            lo = mid
        else:
            hi = mid
    for i in range(max(0, lo - 2), min(len(candidates), hi + 3)):
        err = abs(estimated_share(bio_probs, candidates[i]) - human_share)
        if err < best_err - 1e-12:
            best, best_err = float(candidates[i]), err
    return best
