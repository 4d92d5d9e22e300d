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
