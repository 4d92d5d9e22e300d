"""bench.q2_mix: a mix of two Q² scores, judged at the paper's threshold and chosen on development keys."""
from __future__ import annotations

from bench.q2_mix import choose, judge


def _run():
    # A alone is right on half, B alone on the other half; their mean is right on every response
    run = {}
    for i in range(40):
        consistent = i % 2 == 0
        # consistent: one score says 0.9, the other 0.2 (mean 0.55); inconsistent: 0.1 and 0.6 (mean 0.35)
        pair = (0.9, 0.2) if consistent else (0.1, 0.6)
        a, b = pair if i % 4 < 2 else pair[::-1]
        run[("f", str(i), 0)] = (consistent, {"A": a, "B": b})
    return run


def test_the_mean_beats_either_score_alone_and_is_chosen():
    run = _run()
    keys = sorted(run)
    assert judge(run, keys, "A", "B", 0.5)["accuracy"] == 1.0
    assert judge(run, keys, "A", "B", 1.0)["accuracy"] < 1.0
    assert judge(run, keys, "A", "B", 0.0)["accuracy"] < 1.0
    assert 0.0 < choose(run, keys, "A", "B") < 1.0


def test_consistent_only_above_the_threshold():
    run = {("f", "x", 0): (True, {"A": 0.5, "B": 0.5}), ("f", "y", 0): (False, {"A": 0.5, "B": 0.5})}
    assert judge(run, sorted(run), "A", "B", 0.5)["accuracy"] == 0.5  # 0.5 is "inconsistent"


def _four_scores(n: int) -> dict:
    # Q2 says nothing (constant); overlap separates the labels, so only overlap can carry the fit
    run = {}
    for i in range(n):
        consistent = i % 2 == 0
        ov = (0.8 if consistent else 0.2) + 0.01 * (i % 7)
        run[("f", f"{i:03d}", 0)] = (consistent, {"Q2": 0.5, "Q2_no_nli": 0.5, "e2e_nli": 0.5, "overlap": ov})
    return run


def test_the_logistic_fit_learns_the_score_that_separates_and_is_cross_validated():
    from bench.q2_mix import cv_accuracy, logistic, predicted

    run = _four_scores(60)
    keys = sorted(run)
    model = logistic(run, keys, 1.0)
    assert model.coef[3] > 0 and all(abs(c) < 1e-6 for c in model.coef[:3])
    p = predicted(run, keys, model)
    assert all((q > 0.5) == run[k][0] for q, k in zip(p, keys))
    assert cv_accuracy(run, keys, 1.0) == 1.0
    # labels independent of every score: cross-validation cannot find a rule
    flipped = {k: (i % 3 == 0, rec) for i, (k, (_, rec)) in enumerate(sorted(run.items()))}
    assert cv_accuracy(flipped, sorted(flipped), 1.0) < 0.8
