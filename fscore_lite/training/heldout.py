"""Held-out agreement of the trained verifier with people: what a user's run would report.

Every fitted number (:func:`~fscore_lite.training.fit.fit_verifier`) is refitted inside each split
on the other bios only. Two ways to hold out:

* ``topic``: topic-grouped K-fold CV — a bio is scored by a verifier that never saw its topic;
* ``lm``: for each LM (subject) and each topic fold, the verifier is fitted on the *other* LMs'
  bios of the other folds' topics and scores that LM's bios of the fold: it has seen neither the
  topic nor any bio of the LM, as for a user scoring an LM no label came from. With a fact-stage
  verifier every fact is then featurised by a cross-encoder fine-tuned without that LM's labels
  (:meth:`~fscore_lite.training.examples.Examples.without_lm`).

A subject's bios are then one run, as ``score`` would make it: its facts' calibrated
probabilities (each from the split that held it out) go through the run share
(:func:`~fscore_lite.factscore.calibration.run_share`), each bio's score is the mean posterior of
its facts under its own share in that run, and the estimate is their mean — ``score`` with no length penalty.
"""
from __future__ import annotations

import numpy as np

from ..factscore.calibration import Response, fact_posteriors, response_share, run_share, score_interval
from ..stats import f1_not_supported, signed_error_ci
from .examples import Examples, topic_folds
from .fit import FitSettings, calibration_name, fit_verifier, labelled

HOLD_OUTS = ("topic", "lm")


def splits(ex: Examples, hold_out: str, folds: int):
    """(examples as the split's fitted parts see them, train bios, held-out bios) per split."""
    if hold_out not in HOLD_OUTS:
        raise ValueError(f"hold-out must be one of {', '.join(HOLD_OUTS)}, not {hold_out!r}")
    fold_of = topic_folds(ex.topics, folds)
    units = list(dict.fromkeys(b.subject for b in ex.bios)) if hold_out == "lm" else [None]
    for unit in units:
        view = ex if unit is None else ex.without_lm(unit)
        for fold in range(folds):
            held = {i for i, b in enumerate(ex.bios) if fold_of[b.topic] == fold and unit in (None, b.subject)}
            train = {i for i, b in enumerate(ex.bios) if fold_of[b.topic] != fold and (unit is None or b.subject != unit)}
            if held and train:
                yield view, train, held


def held_out_responses(ex: Examples, kinds: list[str], s: FitSettings, hold_out: str = "lm", folds: int = 5,
                       fitted_for: dict | None = None) -> dict[str, dict[int, Response]]:
    """Per kind of facts: bio → its facts as a held-out run sees them (calibrated probabilities, in
    fact order, and the calibration's prior). Bios without facts of a kind are absent."""
    out: dict[str, dict[int, Response]] = {k: {} for k in kinds}
    for view, train, held in splits(ex, hold_out, folds):
        fitted = fit_verifier(view, train, s, fitted_for)
        for kind in kinds:
            out[kind].update(scored_bios(view, fitted, kind, held, s))
    return out


def scored_bios(ex: Examples, fitted, kind: str, held: set[int], s: FitSettings) -> dict[int, Response]:
    """Bio → its facts of ``kind`` as the fitted verifier ``fitted`` scores them, for the bios of ``held``
    (none when ``fitted`` has no calibration for ``kind``)."""
    cal = fitted.calibrations.get(calibration_name(kind))
    if cal is None:
        return {}
    rows = ex.features[kind]
    by_bio: dict[int, list[int]] = {}
    for j, f in enumerate(ex.facts_of(kind)):
        if f.bio in held:
            by_bio.setdefault(f.bio, []).append(j)
    out = {}
    for b, idx in by_bio.items():
        x = np.asarray([[rows[j][n] for n in s.features] for j in idx], dtype=np.float64)
        out[b] = Response(tuple(map(float, cal.probability(fitted.combiner.logit(x)))), cal.prior)
    return out


def bio_scores(ex: Examples, responses: dict[int, Response]) -> dict[int, float]:
    """Bio → its score (share at gamma 0) when each subject's bios are one run."""
    out = {}
    for subject in dict.fromkeys(b.subject for b in ex.bios):
        bios = [i for i in sorted(responses) if ex.bios[i].subject == subject]
        if bios:
            share = run_share([responses[i] for i in bios])
            out.update({i: response_share(responses[i], share) for i in bios})
    return out


def paired_difference(ex: Examples, a: dict[int, float], b: dict[int, float]) -> list[dict]:
    """Per subject, on the bios both have: mean of ``a − b`` (×100) with its interval over resampled topics."""
    rows = []
    for subject in dict.fromkeys(x.subject for x in ex.bios):
        bios = [i for i in sorted(a) if i in b and ex.bios[i].subject == subject]
        if bios:
            rows.append({"subject": subject, "n_bios": len(bios),
                         "difference": 100 * float(np.mean([a[i] - b[i] for i in bios])),
                         "ci95": signed_error_ci([a[i] for i in bios], [b[i] for i in bios],
                                                 [ex.bios[i].topic for i in bios])})
    return rows


def subject_rows(ex: Examples, responses: dict[int, Response]) -> list[dict]:
    """Per subject, its bios as one run: human FActScore, the run's estimate (its ``score`` at gamma 0)
    with the run's own 95% interval, the error, the per-bio mean absolute error, and the estimate −
    human interval over resampled topics (×100)."""
    rows = []
    for subject in dict.fromkeys(b.subject for b in ex.bios):
        bios = [i for i in sorted(responses) if ex.bios[i].subject == subject]
        if not bios:
            continue
        run = [responses[i] for i in bios]
        share = run_share(run)
        per_bio = np.asarray([response_share(r, share) for r in run])
        human = np.asarray([ex.human_share[i] for i in bios])
        est = float(per_bio.mean())
        ci = score_interval(run)
        rows.append({"subject": subject, "n_bios": len(bios), "human": 100 * float(human.mean()), "estimate": 100 * est,
                     "er": 100 * abs(est - float(human.mean())),
                     "ci95": [100 * ci[0], 100 * ci[1]] if ci else None,
                     "per_bio_mae": 100 * float(np.mean(np.abs(per_bio - human))),
                     "error_ci95": signed_error_ci(list(per_bio), list(human), [ex.bios[i].topic for i in bios]),
                     "run_share": share, "facts_per_response": float(np.mean([len(r.probs) for r in run]))})
    return rows


def fact_f1(ex: Examples, s: FitSettings, hold_out: str = "lm", folds: int = 5) -> list[dict]:
    """Per subject, F1 of predicting NS on the human facts, each decided held out (given-facts
    calibration, its posterior under the subject's run share of those facts above 0.5)."""
    from ..factscore.calibration import GIVEN

    probs: dict[int, float] = {}
    prior: dict[int, float] = {}
    for view, train, held in splits(ex, hold_out, folds):
        fitted = fit_verifier(view, train, s)
        cal = fitted.calibrations.get(GIVEN)
        if cal is None:
            continue
        x, _, idx = labelled(view, "human", held, s.features)
        for j, p in zip(idx, cal.probability(fitted.combiner.logit(x))):
            probs[j], prior[j] = float(p), cal.prior
    rows = []
    for subject in dict.fromkeys(b.subject for b in ex.bios):
        idx = [j for j in sorted(probs) if ex.bios[ex.human[j].bio].subject == subject]
        if not idx:
            continue
        by_bio: dict[int, list[int]] = {}
        for j in idx:
            by_bio.setdefault(ex.human[j].bio, []).append(j)
        run = [Response(tuple(probs[j] for j in js), prior[js[0]]) for js in by_bio.values()]
        share = run_share(run)
        preds = [bool(q > 0.5) for r in run for q in fact_posteriors(r, share)]
        labels = [bool(ex.human[j].label) for js in by_bio.values() for j in js]
        rows.append({"subject": subject, "n_facts": len(labels), "f1_ns": f1_not_supported(preds, labels)})
    return rows
