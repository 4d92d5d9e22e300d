"""bench.bio_residuals: correlations of bio covariates with the human score and with the residual."""
from __future__ import annotations

import json

import numpy as np
import pytest

from bench.bio_residuals import correlations, page_lengths


def test_a_covariate_the_score_misses_shows_in_the_residual_and_one_it_carries_does_not():
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(300):
        carried, missed = rng.normal(), rng.normal()
        human = 0.5 + 0.1 * carried + 0.1 * missed
        score = 0.5 + 0.1 * carried + rng.normal(0, 0.02)  # knows `carried`, not `missed`
        rows.append({"human": human, "score": score, "carried": carried, "missed": missed, "flat": 1.0})
    got = correlations(rows, ("carried", "missed", "flat"))
    c = got["covariates"]
    assert c["carried"]["with_human"] > 0.5 and abs(c["carried"]["with_residual"]) < 0.2
    assert c["missed"]["with_human"] > 0.5 and c["missed"]["with_residual"] > 0.9
    assert c["flat"] == {"with_human": None, "with_residual": None}
    assert got["per_bio_mae"] == pytest.approx(100 * np.mean([abs(r["human"] - r["score"]) for r in rows]))


def test_page_lengths_read_the_pages_and_name_a_bad_line(tmp_path):
    d = tmp_path / "wiki-factscore-dev"
    d.mkdir()
    (d / "pages.jsonl").write_text(json.dumps({"topic": "A", "text": "abcd"}) + "\n\n"
                                   + json.dumps({"topic": "B", "text": "xy"}) + "\n", encoding="utf-8")
    assert page_lengths(tmp_path) == {"A": 4, "B": 2}
    (d / "pages.jsonl").write_text(json.dumps({"topic": "A", "text": "abcd"}) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"pages\.jsonl:2: not a page record"):
        page_lengths(tmp_path)
