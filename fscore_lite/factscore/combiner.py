"""The trained verifier's combiner: standardised features → one logit per fact.

:class:`Combiner` is what the runtime applies (coefficients from the model manifest);
:func:`fit_logistic` fits one (L2-regularised, Newton–Raphson, deterministic). Plain numpy, so
the build and the meta-evaluation refit it per cross-validation fold. The logit becomes a
probability only through a :class:`~fscore_lite.factscore.calibration.Calibration` of the kind
of facts it is applied to.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class Combiner:
    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float

    def logit(self, x: np.ndarray) -> np.ndarray:
        z = (np.asarray(x, dtype=np.float64) - np.asarray(self.mean)) / np.asarray(self.scale)
        return z @ np.asarray(self.coef) + self.intercept

    def probability(self, x: np.ndarray) -> np.ndarray:
        """The fitted model's own probability (uncalibrated: the calibrations map :meth:`logit`)."""
        return 1.0 / (1.0 + np.exp(-self.logit(x)))

    def matrix(self, rows: list[dict[str, float]]) -> np.ndarray:
        return np.asarray([[r[f] for f in self.features] for r in rows], dtype=np.float64).reshape(-1, len(self.features))

    def to_json(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}

    @staticmethod
    def from_json(d: dict) -> "Combiner":
        return Combiner(tuple(d["features"]), tuple(map(float, d["mean"])), tuple(map(float, d["scale"])),
                        tuple(map(float, d["coef"])), float(d["intercept"]))


def fit_logistic(x: np.ndarray, y: np.ndarray, features: tuple[str, ...], l2: float = 1.0,
                 iterations: int = 50) -> Combiner:
    """L2-regularised logistic regression on standardised features (the intercept is not
    penalised), by Newton–Raphson. ``y`` is 1 for supported facts."""
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
                    tuple(map(float, w[:-1])), float(w[-1]))
