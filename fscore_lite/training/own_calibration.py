"""The trained verifier's calibration on the facts it makes (issue 23, item 3).

The paper calibration fits the decision threshold on the paper's InstructGPT facts and the PACC
means on the human facts. The default decomposer's own facts carry no per-fact labels, only
their bio's human FActScore, so the own-facts calibration is fitted at the bio level, over the
training bios, each bio's fact probabilities coming from the fold combiner that never saw its
topic (so the fit mimics unseen topics):

* **share**: least squares of the bio's human share ``h`` on its mean probability ``m``,
  ``h ≈ α + β·m``, written as the PACC pair ``p̄_S = (1 − α) / β``, ``p̄_NS = −α / β`` — then
  ``(m − p̄_NS) / (p̄_S − p̄_NS) = α + β·m`` and the runtime's ``pacc_unclipped`` applies it
  unchanged. With ``β ≤ 0`` (the mean probability does not rise with the share) there is no
  adjustment: the identity pair (1, 0), and the record says so;
* **threshold**: :func:`~fscore_lite.factscore.combiner.share_matching_threshold` of the own
  facts' probabilities against the training bios' mean human share.

Plain numpy, so meta-eval refits it inside every fold (:func:`nested_calibrations`).
"""
from __future__ import annotations

import numpy as np

from ..factscore.combiner import Combiner, share_matching_threshold
from .combiner_cv import CvResult, cross_validate
from .examples import Examples

NO_ADJUSTMENT = ("the bios' human share does not rise with their mean probability (slope ≤ 0): no share "
                 "adjustment, the estimate is the mean probability")


def fit_share_line(mean_probs, human) -> tuple[float, float]:
    """(α, β) of the least-squares line ``human ≈ α + β · mean_probs``."""
    m = np.asarray(mean_probs, dtype=np.float64)
    h = np.asarray(human, dtype=np.float64)
    if len(m) < 2 or float(np.ptp(m)) == 0.0:
        return float(np.mean(h)) if len(h) else 0.0, 0.0
    beta, alpha = np.polyfit(m, h, 1)
    return float(alpha), float(beta)


def share_pair(alpha: float, beta: float) -> tuple[float, float] | None:
    """The PACC pair (p̄_S, p̄_NS) equivalent to ``α + β·m``; None when ``β ≤ 0``."""
    if beta <= 0:
        return None
    return (1.0 - alpha) / beta, -alpha / beta


def fit_own_calibration(bio_probs: list, human: list[float]) -> dict:
    """Threshold and share means fitted on bios' own-fact probabilities against their human shares
    (bios without facts are left out)."""
    keep = [(np.asarray(p, dtype=np.float64), float(h)) for p, h in zip(bio_probs, human) if len(p)]
    if len(keep) < 2:
        raise ValueError(f"the own-facts calibration needs at least 2 bios with facts, not {len(keep)}")
    probs, hs = [p for p, _ in keep], [h for _, h in keep]
    alpha, beta = fit_share_line([float(p.mean()) for p in probs], hs)
    pair = share_pair(alpha, beta)
    out = {"threshold": share_matching_threshold(probs, float(np.mean(hs))),
           "p_supported": pair[0] if pair else 1.0, "p_not_supported": pair[1] if pair else 0.0,
           "alpha": alpha, "beta": beta, "n_bios": len(keep), "n_facts": int(sum(len(p) for p in probs))}
    if pair is None:
        out["note"] = NO_ADJUSTMENT
    return out


def apply_calibration(comb: Combiner, calibration: dict) -> Combiner:
    """``comb`` with the own-facts threshold and share means."""
    return comb.with_calibration(calibration)


def own_rows_by_bio(own: Examples) -> dict[int, list[dict]]:
    """Bio → its own facts' feature rows (in fact order), from a featurised Examples of own facts."""
    rows: dict[int, list[dict]] = {}
    for f, row in zip(own.model, own.features["model"]):
        rows.setdefault(f.bio, []).append(row)
    return rows


def out_of_fold_probs(cv: CvResult, bios, own_rows: dict[int, list[dict]], topic_of) -> dict[int, np.ndarray]:
    """Bio → its own facts' probabilities from the combiner of ``cv`` that did not see its topic
    (bios of topics outside ``cv.folds`` are left out)."""
    from .stack import fold_combiners

    by_fold = fold_combiners(cv)
    out = {}
    for i in bios:
        fold = cv.folds.get(topic_of(i))
        if fold is None or fold not in by_fold or not own_rows.get(i):
            continue
        comb = by_fold[fold]
        out[i] = comb.probability(comb.matrix(own_rows[i]))
    return out


def calibration_from_cv(ex: Examples, cv: CvResult, own_rows: dict[int, list[dict]]) -> dict:
    """The own-facts calibration fitted on every bio of ``cv``'s topics that has own facts."""
    probs = out_of_fold_probs(cv, sorted(own_rows), own_rows, lambda i: ex.bios[i].topic)
    bios = sorted(probs)
    return fit_own_calibration([probs[i] for i in bios], [ex.human_share[i] for i in bios]) | {
        "bios": bios}


def nested_calibrations(ex: Examples, outer: dict[str, int], own_rows: dict[int, list[dict]],
                        features: tuple[str, ...], l2: float = 1.0, adjust: bool = True) -> dict[int, dict | None]:
    """Outer fold → the own-facts calibration fitted on the other folds' bios only, their probabilities
    out of fold *within* those topics (an inner topic-grouped CV that never sees the outer fold's
    topics). None for a fold whose training bios are too few to fit. Each record lists the bios it
    was fitted on (``bios``, indices into ``ex.bios``)."""
    k = len(set(outer.values()))
    out: dict[int, dict | None] = {}
    for fold in sorted(set(outer.values())):
        train = {t for t, f in outer.items() if f != fold}
        inner = min(k, len(train))
        rows = {i: r for i, r in own_rows.items() if ex.bios[i].topic in train}
        if inner < 2 or len(rows) < 2:
            out[fold] = None
            continue
        cv = cross_validate(ex, features, inner, l2, topics=train, adjust=adjust)
        try:
            out[fold] = calibration_from_cv(ex, cv, rows)
        except ValueError:
            out[fold] = None
    return out
