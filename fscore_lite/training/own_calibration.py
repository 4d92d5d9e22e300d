"""The trained verifier's calibration on the facts it makes (issue 23, item 3).

The paper calibration fits the decision threshold on the paper's InstructGPT facts and the PACC
share means ``p̄_S``, ``p̄_NS`` (a supported / not-supported fact's mean probability) on the human
facts. The default decomposer's own facts carry no per-fact labels, only their bio's human
FActScore, so the own-facts calibration is fitted at the bio level, over the training bios, each
bio's fact probabilities coming from the fold combiner that never saw its topic (so the fit
mimics unseen topics):

* **share**: a level on the PACC scale (:mod:`~fscore_lite.training.share_line` with the slope fixed
  at 1): ``h ≈ a + u``, ``u`` a bio's unclipped PACC share of its own facts under its fold's pair.
  That pair is already mapped by the paper facts' share line (fitted between subjects' means, so
  it carries how far apart the subjects read), so only the own facts' level is left to fit. A line
  between subjects refitted on the own facts (``groups``) was as good held out by topic but missed
  by 7–8 points for a subject left out of the fit, the level by 1–3 (docs/E2E.md); recipe 5 moved
  the human facts' pair by one offset, which left the strongest subject 5 points high;
* **threshold**: :func:`~fscore_lite.factscore.combiner.share_matching_threshold` of the own
  facts' probabilities against the training bios' mean human share.

Plain numpy, so meta-eval refits it inside every fold (:func:`nested_calibrations`).
"""
from __future__ import annotations

import numpy as np

from ..factscore.combiner import Combiner, line_pair, share_matching_threshold
from ..factscore.score import pacc_unclipped
from .combiner_cv import CvResult, cross_validate
from .share_line import fit_share_line
from .examples import Examples

def pair_of(comb: Combiner) -> tuple[float, float]:
    """``comb``'s PACC pair (p̄_S, p̄_NS), the identity pair (1, 0) when it has none."""
    return comb.pair


def fit_own_calibration(bio_probs: list, human: list[float], pairs: list[tuple[float, float]],
                        target: tuple[float, float], groups: list[str] | None = None) -> dict:
    """Threshold and share line fitted on bios' own-fact probabilities against their human shares
    (bios without facts are left out); ``pairs``: per bio, the pair of the combiner that gave its
    probabilities; ``target``: the pair of the combiner the calibration is for; ``groups``: per bio,
    its subject, to fit a line between their means (default: the level only)."""
    labels = list(groups) if groups is not None else [None] * len(bio_probs)
    keep = [(np.asarray(p, dtype=np.float64), float(h), pair, g)
            for p, h, pair, g in zip(bio_probs, human, pairs, labels) if len(p)]
    if len(keep) < 2:
        raise ValueError(f"the own-facts calibration needs at least 2 bios with facts, not {len(keep)}")
    probs, hs = [p for p, *_ in keep], [h for _, h, *_ in keep]
    a, b = fit_share_line([pacc_unclipped(float(p.mean()), *pair) for p, _, pair, _ in keep], hs,
                          [g for *_, g in keep])
    ps, pns = line_pair(target, a, b)
    return {"threshold": share_matching_threshold(probs, float(np.mean(hs))), "p_supported": ps,
            "p_not_supported": pns, "method": "share line" if groups is not None else "share level", "line": [a, b],
            **({"n_subjects": len({g for *_, g in keep})} if groups is not None else {}), "n_bios": len(keep),
            "n_facts": int(sum(len(p) for p in probs))}


def own_rows_by_bio(own: Examples) -> dict[int, list[dict]]:
    """Bio → its own facts' feature rows (in fact order), from a featurised Examples of own facts."""
    rows: dict[int, list[dict]] = {}
    for f, row in zip(own.model, own.features["model"]):
        rows.setdefault(f.bio, []).append(row)
    return rows


def out_of_fold_probs(cv: CvResult, bios, own_rows: dict[int, list[dict]], topic_of
                      ) -> dict[int, tuple[np.ndarray, tuple[float, float]]]:
    """Bio → its own facts' probabilities from the combiner of ``cv`` that did not see its topic, and
    that combiner's pair (bios of topics outside ``cv.folds`` are left out)."""
    from .stack import fold_combiners

    by_fold = fold_combiners(cv)
    out = {}
    for i in bios:
        fold = cv.folds.get(topic_of(i))
        if fold is None or fold not in by_fold or not own_rows.get(i):
            continue
        comb = by_fold[fold]
        out[i] = comb.probability(comb.matrix(own_rows[i])), pair_of(comb)
    return out


def calibration_from_cv(ex: Examples, cv: CvResult, own_rows: dict[int, list[dict]], target: Combiner) -> dict:
    """The own-facts calibration for ``target``, fitted on every bio of ``cv``'s topics that has own facts."""
    probs = out_of_fold_probs(cv, sorted(own_rows), own_rows, lambda i: ex.bios[i].topic)
    bios = sorted(probs)
    return fit_own_calibration([probs[i][0] for i in bios], [ex.human_share[i] for i in bios],
                               [probs[i][1] for i in bios], pair_of(target)) | {"bios": bios}


def nested_calibrations(ex: Examples, outer: dict[str, int], own_rows: dict[int, list[dict]],
                        features: tuple[str, ...], targets: dict[int, Combiner], l2: float = 1.0,
                        adjust: bool = True) -> dict[int, dict | None]:
    """Outer fold → the own-facts calibration of that fold's combiner (``targets``), fitted on the other
    folds' bios only, their probabilities out of fold *within* those topics (an inner topic-grouped CV
    that never sees the outer fold's topics). None for a fold whose training bios are too few to fit.
    Each record lists the bios it was fitted on (``bios``, indices into ``ex.bios``)."""
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
            out[fold] = calibration_from_cv(ex, cv, rows, targets[fold])
        except ValueError:
            out[fold] = None
    return out
