"""bench.fact_sets: per-bio errors of several fact sets of the same bios, alone, averaged and correlated."""
from __future__ import annotations

import numpy as np
import pytest

from bench.fact_sets import compare


def test_a_shared_error_stays_in_the_average_and_an_independent_one_shrinks():
    rng = np.random.default_rng(0)
    human, shared, a, b, c = {}, {}, {}, {}, {}
    for i in range(400):
        human[i] = rng.uniform(0.2, 0.8)
        shared[i] = rng.normal(0, 0.1)
        a[i] = human[i] + shared[i]                       # the verifier's error only
        b[i] = human[i] + shared[i] + rng.normal(0, 0.01)  # nearly the same
        c[i] = human[i] + rng.normal(0, 0.1)              # an error of its own
    got = compare({"a": a, "b": b, "c": c}, human)
    assert got["bios"] == 400
    assert got["pairs"]["a+b"]["error_corr"] > 0.95
    assert abs(got["pairs"]["a+c"]["error_corr"]) < 0.15
    # averaging two sets with one shared error leaves it; two independent errors shrink by about 1/sqrt(2)
    assert got["pairs"]["a+b"]["per_bio_mae"] == pytest.approx(got["sets"]["a"]["per_bio_mae"], rel=0.05)
    assert got["pairs"]["a+c"]["per_bio_mae"] < 0.8 * got["sets"]["a"]["per_bio_mae"]
    assert got["sets"]["a"]["per_bio_mae"] == pytest.approx(100 * np.mean([abs(a[i] - human[i]) for i in human]))
    d = got["pairs"]["a+c"]["difference"]  # c − a: the shared error's mean, about 0
    assert d["mean"] == pytest.approx(100 * np.mean([c[i] - a[i] for i in human]))
    assert d["ci95"][0] < d["mean"] < d["ci95"][1]


def test_a_set_that_scores_higher_shows_a_difference_whose_interval_excludes_zero():
    rng = np.random.default_rng(1)
    human = {i: rng.uniform(0.2, 0.8) for i in range(200)}
    low = {i: h + rng.normal(0, 0.05) for i, h in human.items()}
    high = {i: s + 0.03 + rng.normal(0, 0.01) for i, s in low.items()}
    d = compare({"low": low, "high": high}, human)["pairs"]["low+high"]["difference"]
    assert d["mean"] == pytest.approx(3.0, abs=0.3) and d["ci95"][0] > 0


def test_only_bios_every_set_scores_are_judged_and_a_flat_error_has_no_correlation():
    human = {0: 0.5, 1: 0.6, 2: 0.7}
    got = compare({"x": {0: 0.6, 1: 0.7, 2: 0.8}, "y": {0: 0.5, 1: 0.9}}, human)
    assert got["bios"] == 2
    x = got["sets"]["x"]
    assert (x["bios"], x["per_bio_mae"], x["er"]) == (2, pytest.approx(10.0), pytest.approx(10.0))
    assert got["pairs"]["x+y"]["error_corr"] is None  # x's error is 0.1 on both bios
    assert got["pairs"]["x+y"]["per_bio_mae"] == pytest.approx(100 * (0.05 + 0.2) / 2)
