"""From a fact's verifier logit to the run's FActScore: calibrated probabilities, the run's share.

A :class:`Calibration` turns the combiner's logit into a probability calibrated on one kind of
facts (those a named decomposer made for the training bios, or the facts given in the input),
``p = σ(scale · logit + offset)``, fitted out of fold on facts of topics the combiner never saw,
and records the share of supported facts among those facts (``prior``): the probabilities hold
under that share.

A run's responses come from one LM whose share of supported facts is unknown and need not be the
training share; under that change the verifier's evidence for a fact (its features given its
label) stays what it was, and only the share moves (label shift). :func:`run_share` estimates the
run's share by maximum likelihood (the EM fixed point of Saerens, Latinne & Decaestecker 2002),
each response weighing as much as any other, as FActScore averages over responses, with
:data:`PRIOR_RESPONSES` pseudo-response at the calibrations' own share (a Beta prior: a run of one
or a few responses is pulled toward the training share instead of to 0 or 1, a run of many is
not).

Responses of one LM differ in how much of them is supported, and a response's facts say something
about its own share: :func:`response_prior` estimates each response's share the same way, from its
own facts, under a Beta prior worth :data:`RESPONSE_PRIOR_FACTS` facts at the run's share (a response
with few or ambiguous facts stays near the run's share, one with many clear facts moves to its own).
Each fact's probability is then its posterior under its response's share (:func:`fact_posteriors`), a
response's score the mean of those, and the run's score the mean of the responses' scores.

Plain numpy, deterministic (bisection, no random start), used by ``score`` and meta-eval alike.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from .kinds import GIVEN  # noqa: F401  (the calibration of facts given in the input)

EPS = 1e-6  # probabilities are kept inside [EPS, 1 − EPS]: a fact is never certain either way
BISECTION_STEPS = 60  # the share's interval halves each step: 2^-60 is far below a rounding step
PRIOR_RESPONSES = 1.0  # the run share's Beta prior: this many responses at the calibrations' share
RESPONSE_PRIOR_FACTS = 20.0  # a response's share: Beta prior worth this many facts at the run's share


@dataclass(frozen=True)
class Calibration:
    """The calibration of one kind of facts (``facts``: :data:`GIVEN` or a decomposer's name)."""

    facts: str
    scale: float
    offset: float
    prior: float  # share of supported facts among the facts it was fitted on (their silver labels)
    fitted_for: dict = field(default_factory=dict)  # what made those facts (decomposer settings, LLM sha256)
    n_facts: int = 0
    n_bios: int = 0

    def probability(self, logits) -> np.ndarray:
        return np.clip(sigmoid(self.scale * np.asarray(logits, dtype=np.float64) + self.offset), EPS, 1 - EPS)

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(d: dict) -> "Calibration":
        return Calibration(str(d["facts"]), float(d["scale"]), float(d["offset"]), float(d["prior"]),
                           dict(d.get("fitted_for") or {}), int(d.get("n_facts", 0)), int(d.get("n_bios", 0)))


def sigmoid(z) -> np.ndarray:
    """1 / (1 + e^−z), without overflow for large |z|."""
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z, dtype=np.float64)))


def fit_scaling(logits, labels, iterations: int = 100) -> tuple[float, float]:
    """``(scale, offset)`` of ``σ(scale · logit + offset)`` by maximum likelihood (Newton's method):
    logistic calibration of out-of-fold logits (Platt scaling with both parameters)."""
    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if len(z) < 2 or y.min() == y.max():
        raise ValueError("calibration needs facts of both labels")
    x = np.stack([z, np.ones_like(z)], axis=1)
    w = np.array([1.0, 0.0])
    for _ in range(iterations):
        p = sigmoid(x @ w)
        step = np.linalg.solve((x * (p * (1 - p))[:, None]).T @ x + 1e-9 * np.eye(2), x.T @ (p - y))
        w -= step
        if np.max(np.abs(step)) < 1e-12:
            break
    return float(w[0]), float(w[1])


def _ratio(probs, prior: float) -> np.ndarray:
    """Each fact's likelihood ratio P(features | S) / P(features | NS) from its probability under ``prior``."""
    p = np.clip(np.asarray(probs, dtype=np.float64), EPS, 1 - EPS)
    return (p / (1 - p)) * ((1 - prior) / prior)


def posteriors(probs, prior: float, share: float) -> np.ndarray:
    """The facts' probabilities of being supported when the share of supported facts is ``share``
    instead of ``prior`` (Bayes' rule on the prior odds)."""
    odds = _ratio(probs, prior) * (share / (1 - share))
    return np.clip(odds / (1 + odds), EPS, 1 - EPS)


@dataclass(frozen=True)
class Response:
    """One response's facts as the run share sees them: their calibrated probabilities and the prior
    of the calibration that made them."""

    probs: tuple[float, ...]
    prior: float

    def ratios(self) -> np.ndarray:
        return _ratio(self.probs, self.prior)


def _prior_gradient(prior: float, share, weight: float = PRIOR_RESPONSES):
    """d/dπ of ``weight`` pseudo-responses at share ``prior``: weight · (prior/π − (1 − prior)/(1 − π))."""
    return weight * (prior / share - (1 - prior) / (1 - share))


def _gradient(ratios: np.ndarray, weights: np.ndarray, share: float, prior: float, weight: float) -> float:
    """d/dπ of the weighted log likelihood Σ_i ω_i · log(π·l_i + 1 − π) over every fact of the run, plus the
    pseudo-responses'."""
    return float(np.sum(weights * (ratios - 1) / (share * ratios + 1 - share)) + _prior_gradient(prior, share, weight))


def run_prior(responses: list[Response]) -> float:
    """The share the pseudo-responses hold: the mean of the responses' calibration priors."""
    return float(np.mean([r.prior for r in responses]))


def run_share(responses: list[Response], prior_responses: float = PRIOR_RESPONSES) -> float:
    """The run's share of supported facts: the maximiser over [EPS, 1 − EPS] of the responses' log
    likelihood (each response's mean over its facts, weighing alike) plus ``prior_responses`` pseudo-responses
    at :func:`run_prior`. The objective is concave in π, so bisection on its derivative finds the one maximum."""
    kept = [r for r in responses if len(r.probs)]
    if not kept:
        raise ValueError("the run share needs at least one response with facts")
    ratios = np.concatenate([r.ratios() for r in kept])
    omega = np.concatenate([np.full(len(r.probs), 1.0 / len(r.probs)) for r in kept])
    prior = run_prior(kept)
    lo, hi = EPS, 1 - EPS
    if _gradient(ratios, omega, lo, prior, prior_responses) <= 0:
        return lo
    if _gradient(ratios, omega, hi, prior, prior_responses) >= 0:
        return hi
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        if _gradient(ratios, omega, mid, prior, prior_responses) > 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _response_gradient(ratios: np.ndarray, pi, share, strength: float):
    """d/dπ of one response's log likelihood Σ_j log(π·l_j + 1 − π) plus a Beta prior worth ``strength``
    facts at ``share``; ``pi`` and ``share`` broadcast (a column of facts against a row of values)."""
    r = ratios[:, None]
    return np.sum((r - 1) / (pi * r + 1 - pi), axis=0) + strength * (share / pi - (1 - share) / (1 - pi))


def _response_priors(ratios: np.ndarray, shares: np.ndarray, strength: float) -> np.ndarray:
    """:func:`response_prior` of one response at each run share of ``shares`` (bisection, all at once)."""
    lo = np.full(len(shares), EPS)
    hi = np.full(len(shares), 1 - EPS)
    if strength <= 0:  # the response's own maximum likelihood, which may sit at a bound
        at_lo = _response_gradient(ratios, lo, shares, 0.0) <= 0
        at_hi = _response_gradient(ratios, hi, shares, 0.0) >= 0
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        rising = _response_gradient(ratios, mid, shares, strength) > 0
        lo = np.where(rising, mid, lo)
        hi = np.where(rising, hi, mid)
    out = (lo + hi) / 2
    if strength <= 0:
        out = np.where(at_lo, EPS, np.where(at_hi, 1 - EPS, out))
    return out


def response_prior(response: Response, share: float, strength: float = RESPONSE_PRIOR_FACTS) -> float:
    """A response's own share of supported facts in a run whose share is ``share``: the maximiser of its
    facts' likelihood (as :func:`run_share` has it) plus a Beta prior worth ``strength`` facts at
    ``share``. Between ``share`` (strength → ∞) and the response's own maximum likelihood (strength 0)."""
    if not len(response.probs):
        raise ValueError("a response's share needs at least one fact")
    return float(_response_priors(response.ratios(), np.asarray([share], dtype=np.float64), strength)[0])


def fact_posteriors(response: Response, share: float, strength: float = RESPONSE_PRIOR_FACTS) -> np.ndarray:
    """A response's facts' probabilities of being supported, under its own share (:func:`response_prior`)
    in a run of share ``share``."""
    return posteriors(response.probs, response.prior, response_prior(response, share, strength))


def response_share(response: Response, share: float, strength: float = RESPONSE_PRIOR_FACTS) -> float:
    """A response's score (its estimated share of supported facts): the mean of :func:`fact_posteriors`."""
    return float(np.mean(fact_posteriors(response, share, strength)))


GRID = 1001  # the share values on which the bootstrap's resampled runs are solved (step 0.001)
CHUNK = 512  # responses tabulated at a time: memory stays near resamples × GRID whatever the run's size


def _gradients(ratios: list[np.ndarray], grid: np.ndarray):
    """Per response, at every grid share: the gradient of its mean log likelihood."""
    for r in ratios:
        yield np.mean((r[:, None] - 1) / (grid[None, :] * r[:, None] + 1 - grid[None, :]), axis=0)


def _scores(ratios: list[np.ndarray], shares: np.ndarray, strength: float):
    """Per response, at each run share of ``shares``: its score (the mean posterior of its facts under its
    own share, :func:`response_prior`)."""
    for r in ratios:
        pi = _response_priors(r, shares, strength)
        yield np.mean(pi[None, :] * r[:, None] / (pi[None, :] * r[:, None] + 1 - pi[None, :]), axis=0)


def score_interval(responses: list[Response], penalties=None, resamples: int = 1000, seed: int = 0,
                   level: float = 0.95, prior_responses: float = PRIOR_RESPONSES,
                   strength: float = RESPONSE_PRIOR_FACTS) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the run's score — the mean over responses of their score
    (:func:`response_share` under the resample's own :func:`run_share`) times their ``penalties``
    (default 1) — over responses resampled with replacement (fixed seed). Each resample's run share is
    solved on a fixed grid of shares, exact to the grid's step. None with fewer than two responses."""
    kept = [i for i, r in enumerate(responses) if len(r.probs)]
    if len(kept) < 2:
        return None
    ratios = [responses[i].ratios() for i in kept]
    pen = np.ones(len(kept)) if penalties is None else np.asarray([penalties[i] for i in kept], dtype=np.float64)
    grid = np.linspace(EPS, 1 - EPS, GRID)
    rng = np.random.default_rng(seed)
    n = len(ratios)
    counts = np.stack([np.bincount(rng.integers(0, n, n), minlength=n) for _ in range(resamples)]).astype(np.float64)
    prior = np.asarray([responses[i].prior for i in kept])
    # each resample's pseudo-responses sit at its own responses' mean prior
    gradient = _prior_gradient(((counts @ prior) / n)[:, None], grid[None, :], prior_responses)
    for start in range(0, n, CHUNK):
        grad = np.stack(list(_gradients(ratios[start:start + CHUNK], grid)))
        gradient += counts[:, start:start + CHUNK] @ grad
    first = np.argmax(gradient <= 0, axis=1)  # the first share where the likelihood stops rising
    first[np.all(gradient > 0, axis=1)] = GRID - 1
    solved, column = np.unique(first, return_inverse=True)  # the run shares the resamples reached
    score = np.zeros(resamples)
    for start in range(0, n, CHUNK):
        post = np.stack(list(_scores(ratios[start:start + CHUNK], grid[solved], strength)))
        block = post[:, column] * pen[start:start + CHUNK, None]  # responses × resamples
        score += np.sum(block.T * counts[:, start:start + CHUNK], axis=1)
    score /= n
    tail = (1 - level) / 2
    return float(np.quantile(score, tail)), float(np.quantile(score, 1 - tail))
