"""The run share: calibrated fact probabilities, label shift by maximum likelihood, one FActScore.

Synthetic facts with known labels: a feature drawn from one normal distribution for supported
facts and another for unsupported ones (label shift: only the share changes between runs), a
verifier calibrated where 70% of facts are supported, runs where 25% or 90% are.
"""
from __future__ import annotations

import copy
import random

import numpy as np
import pytest

from fscore_lite.factscore.calibration import (RESPONSE_PRIOR_FACTS, Calibration, Response, fact_posteriors,
                                               fit_scaling, posteriors, response_prior, response_share, run_share,
                                               score_interval)
from fscore_lite.factscore.score import aggregate, apply_run_share, length_penalty

PRIOR = 0.7


def _logits(rng, labels):
    return np.where(labels, rng.normal(1.0, 1.5, len(labels)), rng.normal(-1.0, 1.5, len(labels)))


@pytest.fixture(scope="module")
def calibration() -> Calibration:
    rng = np.random.default_rng(0)
    y = rng.random(20_000) < PRIOR
    scale, offset = fit_scaling(_logits(rng, y), y)
    return Calibration("given", scale, offset, float(y.mean()))


def _run(calibration, share, n_responses, seed, facts=(10, 40)):
    rng = np.random.default_rng(seed)
    out, truth = [], []
    for _ in range(n_responses):
        theta = float(np.clip(rng.normal(share, 0.15), 0, 1))
        y = rng.random(int(rng.integers(*facts))) < theta
        out.append(Response(tuple(calibration.probability(_logits(rng, y))), calibration.prior))
        truth.append(float(y.mean()))
    _run.truths = truth  # each response's own share
    return out, float(np.mean(truth))


def test_scaling_recovers_the_logistic_map():
    rng = np.random.default_rng(1)
    z = rng.normal(0, 2, 50_000)
    y = rng.random(len(z)) < 1 / (1 + np.exp(-(0.5 * z - 0.3)))
    scale, offset = fit_scaling(z, y)
    assert scale == pytest.approx(0.5, abs=0.03) and offset == pytest.approx(-0.3, abs=0.03)
    with pytest.raises(ValueError, match="both labels"):
        fit_scaling([0.1, 0.2], [1, 1])


def test_posteriors_follow_bayes_rule():
    p = np.asarray([0.2, 0.5, 0.9])
    assert posteriors(p, 0.7, 0.7) == pytest.approx(p)  # the calibration's own share: unchanged
    odds = p / (1 - p) * (0.3 / 0.7) * (0.4 / 0.6)
    assert posteriors(p, 0.7, 0.4) == pytest.approx(odds / (1 + odds))
    assert np.all(np.diff(posteriors(p, 0.7, 0.4)) > 0)  # the order of the facts is kept


@pytest.mark.parametrize("share", [0.25, 0.9])
def test_the_run_share_follows_the_lm_where_the_mean_probability_is_pulled_to_the_training_share(calibration, share):
    run, truth = _run(calibration, share, 300, seed=int(share * 100))
    est = run_share(run)
    assert est == pytest.approx(truth, abs=0.03)
    mean_p = np.mean([np.mean(r.probs) for r in run])
    assert abs(mean_p - truth) > 0.08 and (mean_p - truth) * (PRIOR - truth) > 0  # pulled toward 0.7
    # each response's score under its own share in the run; their mean, the run's score, follows the LM too
    shares = [response_share(r, est) for r in run]
    assert np.mean(shares) == pytest.approx(truth, abs=0.03)
    each = np.asarray(_run.truths)
    assert np.mean(np.abs(shares - each)) < np.mean(np.abs([np.mean(r.probs) for r in run] - each))
    # closer to each response's truth than its facts' mean posterior under the run share alone
    at_run = [float(np.mean(posteriors(r.probs, r.prior, est))) for r in run]
    assert np.mean(np.abs(shares - each)) < np.mean(np.abs(at_run - each)) - 0.005


def test_a_responses_share_sits_between_the_run_share_and_its_own_likelihood(calibration):
    rng = np.random.default_rng(9)
    few = Response(tuple(calibration.probability(_logits(rng, np.ones(4, dtype=bool)))), calibration.prior)
    many = Response(tuple(calibration.probability(_logits(rng, np.ones(60, dtype=bool)))), calibration.prior)
    for r in (few, many):
        own = response_prior(r, 0.3, strength=0)  # the response's own maximum likelihood
        got = response_prior(r, 0.3)
        assert 0.3 < got < own
        assert response_prior(r, 0.3, strength=1e9) == pytest.approx(0.3, abs=1e-6)
        assert fact_posteriors(r, 0.3) == pytest.approx(posteriors(r.probs, r.prior, got))
        assert response_share(r, 0.3) == pytest.approx(float(np.mean(fact_posteriors(r, 0.3))))
    # a response with more facts moves further from the run share toward what its facts say
    assert response_prior(many, 0.3) - 0.3 > response_prior(few, 0.3) - 0.3
    assert RESPONSE_PRIOR_FACTS > 0
    with pytest.raises(ValueError, match="at least one fact"):
        response_prior(Response((), calibration.prior), 0.3)


def test_the_run_share_does_not_depend_on_the_order_of_responses(calibration):
    run, _ = _run(calibration, 0.4, 40, seed=3)
    shuffled = run[:]
    random.Random(0).shuffle(shuffled)
    assert run_share(shuffled) == run_share(run)


def test_the_pseudo_response_keeps_a_tiny_run_off_the_bounds(calibration):
    rng = np.random.default_rng(4)
    low = [Response(tuple(calibration.probability(rng.normal(-3, 0.3, 12))), calibration.prior)]
    assert run_share(low, prior_responses=0) == pytest.approx(1e-6)  # the bare maximum likelihood: 0
    assert 0.01 < run_share(low) < 0.5
    many, _ = _run(calibration, 0.3, 400, seed=5)
    pull = lambda run: run_share(run) - run_share(run, prior_responses=0)  # noqa: E731  (toward the prior, 0.7)
    assert 0 < pull(many) < 0.005 and pull(many) < pull(many[:50]) / 4


def test_the_interval_holds_the_estimate_is_seeded_and_narrows(calibration):
    small, _ = _run(calibration, 0.5, 20, seed=6)
    large, _ = _run(calibration, 0.5, 200, seed=7)
    for run in (small, large):
        lo, hi = score_interval(run)
        assert lo <= np.mean([response_share(r, run_share(run)) for r in run]) <= hi
        assert score_interval(run) == (lo, hi)
    width = lambda run: np.subtract(*score_interval(run)[::-1])  # noqa: E731
    assert width(large) < width(small) / 2
    assert score_interval(small[:1]) is None


def _items(calibration, run):
    return [{"topic": f"t{i}", "status": "ok", "calibration": "given",
             "decisions": [{"atom": f"f{j}", "is_supported": p > 0.5, "verifier_probability": p}
                           for j, p in enumerate(r.probs)]} for i, r in enumerate(run)]


def test_apply_run_share_gives_one_factscore_whose_responses_average_to_it(calibration):
    run, truth = _run(calibration, 0.3, 60, seed=8, facts=(4, 30))
    items = _items(calibration, run)
    share = apply_run_share(items, {"given": calibration.prior}, gamma=10)
    assert share == run_share(run)
    for it, r in zip(items, run):
        post = fact_posteriors(r, share)  # under the response's own share in the run
        assert [d["probability"] for d in it["decisions"]] == [round(float(q), 6) for q in post]
        assert [d["is_supported"] for d in it["decisions"]] == [bool(q > 0.5) for q in post]
        assert it["init_score"] == pytest.approx(post.mean(), abs=1e-6)
        assert it["score"] == pytest.approx(post.mean() * length_penalty(len(post), 10), abs=1e-6)
    out = aggregate(items, gamma=10, priors={"given": calibration.prior})
    assert out["score"] == pytest.approx(np.mean([it["score"] for it in items]))
    assert out["init_score"] == pytest.approx(np.mean([it["init_score"] for it in items]))
    assert out["init_score"] == pytest.approx(truth, abs=0.05)
    assert out["score_ci95"][0] <= out["score"] <= out["score_ci95"][1]
    assert set(out["diagnostics"]) == {"share_decided_supported", "mean_verifier_probability"}
    assert out["diagnostics"]["mean_verifier_probability"] > out["init_score"] + 0.1  # not the FActScore
    # the same items in another order: the same bytes per item
    again = copy.deepcopy(list(reversed(_items(calibration, run))))
    apply_run_share(again, {"given": calibration.prior}, gamma=10)
    assert list(reversed(again)) == items


def test_items_without_a_calibration_keep_the_reference_count():
    dec = [{"is_supported": s} for s in [True] * 11 + [False] * 9]
    items = [{"status": "ok", "decisions": dec, "calibration": None, "score": 0.55, "init_score": 0.55}]
    assert apply_run_share(items, {"given": 0.6}) is None
    out = aggregate(items, gamma=10)
    assert out["score"] == 0.55 and "diagnostics" not in out
