"""bench.response_prior: choosing how strongly a response's share is held to its run's, on synthetic runs."""
from __future__ import annotations

import numpy as np
import pytest

from bench.response_prior import GRID, bio_scores, choose, judge
from fscore_lite.factscore.calibration import Response, run_share


def _run(rng, spread: float, n: int = 120, prior: float = 0.7):
    """Responses whose own shares spread around 0.5; each fact's probability calibrated at ``prior``."""
    run, human = {}, {}
    for i in range(n):
        theta = float(np.clip(rng.normal(0.5, spread), 0.02, 0.98))
        y = rng.random(int(rng.integers(15, 40))) < theta
        z = np.where(y, rng.normal(1.0, 1.5, len(y)), rng.normal(-1.0, 1.5, len(y)))
        # the exact posterior at share `prior` of two unit-variance-ratio normals 2/1.5² apart
        odds = np.exp(2 * z / 1.5 ** 2) * prior / (1 - prior)
        run[i] = Response(tuple(odds / (1 + odds)), prior)
        human[i] = float(y.mean())
    return run, human


def test_judge_and_bio_scores_agree_with_the_run_share():
    run, human = _run(np.random.default_rng(0), 0.2)
    share = run_share(list(run.values()))
    at_run = bio_scores(run, float("inf"))
    assert abs(np.mean(list(at_run.values())) - share) < 0.01  # at the run share: the mean is the share
    got = judge(run, human, 20.0)
    assert got["per_bio_mae"] == pytest.approx(100 * np.mean([abs(v - human[i]) for i, v in bio_scores(run, 20.0).items()]))
    assert got["er"] == pytest.approx(abs(got["estimate"] - got["human"]))


def test_responses_that_differ_choose_a_finite_strength_and_lower_the_per_bio_error():
    rng = np.random.default_rng(1)
    runs = [_run(rng, 0.25) for _ in range(2)]
    human = {}
    for k, (_, h) in enumerate(runs):
        human.update({(k, i): v for i, v in h.items()})
    keyed = [{(k, i): r for i, r in run.items()} for k, (run, _) in enumerate(runs)]
    chosen = choose(keyed, human)
    assert chosen in GRID and chosen != float("inf")
    test, test_human = _run(rng, 0.25)
    assert judge(test, test_human, chosen)["per_bio_mae"] < judge(test, test_human, float("inf"))["per_bio_mae"] - 1


def test_responses_alike_hold_to_the_run_share():
    rng = np.random.default_rng(2)
    run, human = _run(rng, 0.0)  # every response has the same share: only noise sets a response apart
    chosen = choose([run], human)
    assert chosen >= 40


def test_the_slope_shows_scores_that_spread_too_little():
    run, human = _run(np.random.default_rng(3), 0.25)
    at_run, own = judge(run, human, float("inf")), judge(run, human, 20.0)
    assert at_run["slope"] > 1.1 and abs(own["slope"] - 1) < abs(at_run["slope"] - 1)
    assert 0 < own["corr"] <= 1
