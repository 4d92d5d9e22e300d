"""The share line (recipe 6): the calibration of facts that carry no per-fact label — the paper's facts
and the default decomposer's own facts — fitted between subjects' means, and the held-out estimate as
the aggregate (the mean of per-bio unclipped PACC, clipped once), as ``score`` reports it."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from fscore_lite.factscore.combiner import Combiner, line_pair
from fscore_lite.factscore.score import PAPER_CALIBRATION, calibration_note, pacc_unclipped, paper_calibration
from fscore_lite.training.combiner_cv import (aggregate_estimate, cross_validate, fit_adjusted, pacc_means, paper_line,
                                              per_subject)
from fscore_lite.training.examples import Examples, Fact
from fscore_lite.training.own_calibration import fit_own_calibration
from fscore_lite.training.share_line import fit_share_line

SUBJECTS = {"low": (0.2, 0.45), "middle": (0.45, 0.7), "high": (0.7, 0.95)}


def test_the_line_between_subjects_is_not_flattened_by_each_bios_noise():
    rng = np.random.default_rng(0)
    groups = [g for g in SUBJECTS for _ in range(200)]
    human = np.asarray([rng.uniform(*SUBJECTS[g]) for g in groups])
    u = (human - 0.1) / 1.5 + rng.normal(0, 0.15, len(human))  # true line: h = 0.1 + 1.5·u, u read with noise
    a, b = fit_share_line(u, human, groups)
    assert b == pytest.approx(1.5, abs=0.12) and a == pytest.approx(0.1, abs=0.05)
    flat = np.polyfit(u, human, 1)[0]  # through the bios: attenuated
    assert flat < 1.2
    # one subject, or subjects whose shares do not order their readings: the level only
    a1, b1 = fit_share_line(u[:200], human[:200], groups[:200])
    assert b1 == 1.0 and a1 == pytest.approx(float(np.mean(human[:200] - u[:200])))
    assert fit_share_line([0.5, 0.3], [0.2, 0.8], ["x", "y"])[1] == 1.0
    with pytest.raises(ValueError):
        fit_share_line([], [], [])


def test_line_pair_gives_the_line_through_pacc():
    pair = (0.78, 0.36)
    for a, b in ((0.0, 1.0), (-0.1, 1.4), (0.05, 0.8)):
        moved = line_pair(pair, a, b)
        for m in (0.3, 0.55, 0.9):
            assert pacc_unclipped(m, *moved) == pytest.approx(a + b * pacc_unclipped(m, *pair))
    comb = Combiner(("x",), (0.0,), (1.0,), (0.0,), 0.0, 0.5).with_adjustment(*pair)
    cal = comb.with_calibration({"threshold": 0.6, "line": [-0.1, 1.4], "shift": 9.0})
    assert (cal.p_supported, cal.p_not_supported) == pytest.approx(line_pair(pair, -0.1, 1.4))


def _examples(seed=0, n_topics=30, separation=1.2, offset=-0.8):
    """Every topic with a bio of each subject; human facts and model facts each supported with the
    bio's share. The feature separates S from NS; on the model facts it separates less (``separation``
    against 2) and reads ``offset`` lower, as the paper's facts do against human facts."""
    rng = np.random.default_rng(seed)
    bios, human, model, shares, hrows, mrows = [], [], [], [], [], []
    for t in range(n_topics):
        topic = f"topic {t:02d}"
        for subject, (lo, hi) in SUBJECTS.items():
            h = float(rng.uniform(lo, hi))
            labels, mlabels = rng.random(20) < h, rng.random(20) < h
            texts = [f"{topic} {subject} fact {j}" for j in range(20)]
            bios.append(SimpleNamespace(topic=topic, subject=subject, model_facts=lambda texts=texts: texts))
            i = len(bios) - 1
            shares.append(float(labels.mean()))
            for lab in labels:
                human.append(Fact(topic, "h", i, bool(lab)))
                hrows.append({"x": float(lab) * 2.0 + rng.normal(0, 1.0)})
            for lab, text in zip(mlabels, texts):
                model.append(Fact(topic, text, i, None))
                mrows.append({"x": float(lab) * separation + rng.normal(0, 1.0) + offset})
    return Examples(bios, human, model, shares, {"human": hrows, "model": mrows})


def _table(ex, res):
    return {r["subject"]: (r["estimated"], r["human"]) for r in per_subject(ex, res)}


def test_the_paper_line_brings_each_held_out_subject_to_its_human_mean():
    ex = _examples()
    plain = cross_validate(ex, ("x",), 5)
    pair = pacc_means(ex, plain.human_prob)
    unmapped = {s: (100 * aggregate_estimate([pacc_unclipped(plain.bio_mean_prob[i], *pair)
                                              for i, b in enumerate(ex.bios) if b.subject == s]), h)
                for s, (_, h) in _table(ex, plain).items()}
    assert max(abs(e - h) for e, h in unmapped.values()) > 8  # the human facts' pair misreads the paper's facts
    a, b = paper_line(ex, plain, pair)
    assert b > 1.2  # subjects read closer together than the pair predicts
    u = [pacc_unclipped(m, *pair) for m in plain.bio_mean_prob]
    assert a + b * np.mean(u) == pytest.approx(np.mean(ex.human_share)) and np.mean(u) < np.mean(ex.human_share) - 0.1
    held = _table(ex, cross_validate(ex, ("x",), 5, adjust=True))  # each fold's line from the other folds only
    assert max(abs(e - h) for e, h in held.values()) < 3
    # each fold combiner's pair is the inner CV's human-fact pair mapped by the inner line
    train = {t for t in ex.topics if t != "topic 00"}
    comb = fit_adjusted(ex, ("x",), train)
    inner = cross_validate(ex, ("x",), 4, topics=train)
    ipair = pacc_means(ex, inner.human_prob, train)
    assert (comb.p_supported, comb.p_not_supported) == pytest.approx(line_pair(ipair, *paper_line(ex, inner, ipair, train)))


def test_subject_estimate_is_the_clipped_mean_of_unclipped_bio_shares():
    ex = _examples(seed=3, n_topics=10)
    res = cross_validate(ex, ("x",), 5, adjust=True)
    rows = per_subject(ex, res)
    for r in rows:
        raw = [res.bio_estimate[i] for i, b in enumerate(ex.bios) if b.subject == r["subject"]]
        assert r["estimated"] == pytest.approx(100 * min(1.0, max(0.0, float(np.mean(raw)))))
    # one bio's share far outside [0, 1] moves the aggregate by its full amount, not by its clipped one
    res.bio_estimate = [-1.0] + res.bio_estimate[1:]
    low = [res.bio_estimate[i] for i, b in enumerate(ex.bios) if b.subject == ex.bios[0].subject]
    assert per_subject(ex, res)[0]["estimated"] == pytest.approx(100 * max(0.0, float(np.mean(low))))


def test_own_calibration_fits_the_line_between_subjects_for_its_target():
    rng = np.random.default_rng(4)
    groups = [g for g in SUBJECTS for _ in range(80)]
    human = [float(rng.uniform(*SUBJECTS[g])) for g in groups]
    fold_pair, target = (0.8, 0.3), (0.82, 0.32)
    # own facts: the share reads as u = (h + 0.1)/1.3 under the fold pair, with noise per fact
    probs = [np.clip(rng.normal(0.3 + 0.5 * (h + 0.1) / 1.3, 0.15, 30), 0, 1) for h in human]
    cal = fit_own_calibration(probs, human, [fold_pair] * len(human), target, groups)
    assert cal["method"] == "share line" and cal["n_subjects"] == 3
    assert cal["line"] == pytest.approx([-0.1, 1.3], abs=0.08)
    assert (cal["p_supported"], cal["p_not_supported"]) == pytest.approx(line_pair(target, *cal["line"]))
    for g in SUBJECTS:
        idx = [i for i, x in enumerate(groups) if x == g]
        est = np.mean([pacc_unclipped(float(probs[i].mean()), *line_pair(fold_pair, *cal["line"])) for i in idx])
        assert est == pytest.approx(np.mean([human[i] for i in idx]), abs=0.03)


def test_the_summary_names_each_share_line():
    assert paper_calibration({}) == PAPER_CALIBRATION  # an older record: the human facts' pair
    extra = {"training": {"share_means": {"human_facts": [0.8, 0.3], "paper_line": [-0.0412, 1.25], "n_subjects": 3}}}
    moved = paper_calibration(extra)
    assert moved["threshold"] == PAPER_CALIBRATION["threshold"]
    assert "-0.0412" in moved["share_means"] and "1.2500" in moved["share_means"] and "paper's facts" in moved["share_means"]
    assert calibration_note(extra, 0, "default")["fitted_on"] == moved
    own = {"threshold": 0.6, "p_supported": 0.7, "p_not_supported": 0.3, "method": "share line", "line": [0.02, 1.3],
           "n_subjects": 3, "n_bios": 232, "calibrated_for_facts": {"llm_sha256": "x", "atomic_facts": {}}}
    note = calibration_note(extra | {"own_facts_calibration": own}, 0, "default")
    assert "+0.0200 + 1.3000" in note["own_facts"]["fitted_on"] and note["own_facts"]["line"] == [0.02, 1.3]
    assert note["fitted_on"] == moved
    level = calibration_note(extra | {"own_facts_calibration": own | {"method": "share level", "line": [0.05, 1.0]}},
                             0, "default")
    assert "one level on the PACC scale (share = +0.0500 + PACC share)" in level["own_facts"]["fitted_on"]


def _per_bio(rng, offsets, slope=1.5):
    """Per-bio records as ``run_e2e_cv`` writes them: own facts' unclipped PACC read from the human share
    through the line h = 0.1 + slope·u, each subject's readings moved by its offset."""
    out = []
    for subject, (lo, hi) in SUBJECTS.items():
        for j in range(100):
            h = float(rng.uniform(lo, hi))
            u = (h - 0.1) / slope + offsets.get(subject, 0.0) + rng.normal(0, 0.02)
            out.append({"subject": subject, "fold": j % 5, "human": 100 * h, "own": {"pacc": u}})
    return out


def test_subject_holdout_fits_each_subjects_calibration_on_the_others_only():
    from fscore_lite.metaeval.e2e_table import subject_holdout

    rng = np.random.default_rng(5)
    rows = {r["subject"]: r for r in subject_holdout(_per_bio(rng, {}), between_subjects=True)}
    assert set(rows) == set(SUBJECTS) and all(r["error_rate"] < 1.5 for r in rows.values())
    # a subject whose facts read 0.1 higher than the others': the line of the others misses it by 1.5 × 0.1
    moved = {r["subject"]: r for r in subject_holdout(_per_bio(rng, {"middle": 0.1}), between_subjects=True)}
    assert moved["middle"]["estimated"] - moved["middle"]["human"] == pytest.approx(15, abs=2)
    # the level (as shipped): right where the pair's slope holds, and blind to the left-out subject
    level = {r["subject"]: r for r in subject_holdout(_per_bio(rng, {}, slope=1.0))}
    assert all(r["error_rate"] < 1.5 for r in level.values())
    level = {r["subject"]: r for r in subject_holdout(_per_bio(rng, {"high": -0.08}, slope=1.0))}
    assert level["high"]["human"] - level["high"]["estimated"] == pytest.approx(8, abs=2)
    assert subject_holdout([r for r in _per_bio(rng, {}) if r["subject"] == "low"]) == []
