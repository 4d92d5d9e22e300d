"""Topic-grouped cross-validation of the trained verifier's combiner (build step and meta-eval).

Folds group topics (all bios and facts of a topic fall in one fold), assigned round-robin
over topics sorted by sha256 — fixed for a given topic set. In each fold, the combiner and
its threshold are fitted on the other folds' topics only and applied to the held-out ones, so
every reported estimate comes from a combiner that never saw that topic.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..factscore.combiner import Combiner, fit_logistic, line_pair, share_matching_threshold
from ..factscore.score import pacc_unclipped
from ..stats import f1_not_supported, f1_ns_ci, signed_error_ci
from .examples import Examples, topic_folds
from .share_line import fit_share_line


def fit_combiner(ex: Examples, features: tuple[str, ...], topics: set[str], l2: float = 1.0) -> Combiner:
    """Combiner and share-matching threshold fitted on the facts and bios of ``topics``."""
    rows = [(r, f.label) for r, f in zip(ex.features["human"], ex.human) if f.topic in topics]
    x = np.asarray([[r[n] for n in features] for r, _ in rows], dtype=np.float64)
    y = np.asarray([lab for _, lab in rows], dtype=np.float64)
    comb = fit_logistic(x, y, features, l2=l2)
    bios = [i for i, b in enumerate(ex.bios) if b.topic in topics]
    probs = bio_probabilities(ex, comb, set(bios))
    target = float(np.mean([ex.human_share[i] for i in bios]))
    return comb.with_threshold(share_matching_threshold([probs[i] for i in bios], target))


def fit_adjusted(ex: Examples, features: tuple[str, ...], topics: set[str], l2: float = 1.0,
                 inner: int = 4) -> Combiner:
    """:func:`fit_combiner` plus the PACC means (:meth:`Combiner.adjusted_share`): the mean
    probability of supported and of unsupported human facts of ``topics``, each predicted by a
    combiner fitted on the other ``inner`` topic-grouped folds of ``topics``, then mapped by the
    paper's facts' share line (:func:`paper_line`, fitted on the same out-of-fold probabilities)."""
    comb = fit_combiner(ex, features, topics, l2)
    inner = min(inner, len(topics))
    if inner < 2:
        return comb  # too few topics to predict any out of fold: no adjustment
    res = cross_validate(ex, features, inner, l2, topics=topics)
    pair = pacc_means(ex, res.human_prob, topics)
    return comb.with_adjustment(*line_pair(pair, *paper_line(ex, res, pair, topics)))


def paper_line(ex: Examples, res: "CvResult", pair: tuple[float, float], topics: set[str] | None = None
               ) -> tuple[float, float]:
    """The share line (:func:`~fscore_lite.training.share_line.fit_share_line`, between subjects' means)
    of the paper's facts under ``pair``: over the bios of ``topics``, their out-of-fold mean probability in
    ``res`` against their human share. The pair comes from human facts, which read higher than the paper's
    facts of the same support; without the line the paper's facts' aggregate share reads several points
    low and the subjects too far apart (docs/E2E.md)."""
    bios = [i for i, b in enumerate(ex.bios) if (topics is None or b.topic in topics)
            and not np.isnan(res.bio_mean_prob[i])]
    if not bios:
        return 0.0, 1.0
    return fit_share_line([pacc_unclipped(res.bio_mean_prob[i], *pair) for i in bios],
                          [ex.human_share[i] for i in bios], [ex.bios[i].subject for i in bios])


def pacc_means(ex: Examples, human_prob: list[float], topics: set[str] | None = None) -> tuple[float, float]:
    """The mean out-of-fold probability of supported and of unsupported human facts (of ``topics``)."""
    probs = [(p, f.label) for p, f in zip(human_prob, ex.human) if topics is None or f.topic in topics]
    return (float(np.mean([p for p, lab in probs if lab])), float(np.mean([p for p, lab in probs if not lab])))


def bio_probabilities(ex: Examples, comb: Combiner, bios: set[int]) -> dict[int, np.ndarray]:
    by_bio: dict[int, list[dict]] = {i: [] for i in bios}
    for r, f in zip(ex.features["model"], ex.model):
        if f.bio in by_bio:
            by_bio[f.bio].append(r)
    return {i: comb.probability(comb.matrix(rows)) for i, rows in by_bio.items()}


@dataclass
class CvResult:
    """Out-of-fold predictions: per human fact (supported?) and per bio (estimated score)."""

    human_pred: list[bool]
    bio_estimate: list[float]
    folds: dict[str, int]
    combiners: list[Combiner]
    human_prob: list[float] = field(default_factory=list)  # out-of-fold probability per human fact (nan: unused)
    bio_decisions: list[float] = field(default_factory=list)  # per bio: the share of facts decided supported
    bio_mean_prob: list[float] = field(default_factory=list)  # per bio: its facts' mean probability (nan: none)


def bio_estimate(comb: Combiner, probs: np.ndarray) -> float:
    """A bio's share of supported facts as the run's aggregate averages it: PACC before the clip when
    the combiner has its means (:func:`~fscore_lite.factscore.score.pacc_unclipped`; only a mean over
    many bios estimates a share), else the share of facts above the threshold."""
    probs = np.asarray(probs, dtype=np.float64)
    if not comb.adjusts or not probs.size:
        return float(np.mean(probs > comb.threshold)) if probs.size else float("nan")
    return pacc_unclipped(float(probs.mean()), *comb.pair)


def aggregate_estimate(values) -> float:
    """The subject's estimate from its bios' :func:`bio_estimate`: their mean, clipped once to [0, 1]
    (as ``score``'s ``score_adjusted``)."""
    return min(1.0, max(0.0, float(np.mean(values))))


def cross_validate(ex: Examples, features: tuple[str, ...], k: int = 5, l2: float = 1.0,
                   topics: set[str] | None = None, adjust: bool = False) -> CvResult:
    """Topic-grouped k-fold predictions over ``topics`` (default: all); with ``adjust`` each
    fold's combiner also gets PACC means from an inner CV of its own training topics."""
    folds = topic_folds(sorted(topics) if topics is not None else ex.topics, k)
    human_pred = [False] * len(ex.human)
    human_prob = [float("nan")] * len(ex.human)
    estimate = [float("nan")] * len(ex.bios)
    decided = [float("nan")] * len(ex.bios)
    mean_prob = [float("nan")] * len(ex.bios)
    combiners = []
    x = np.asarray([[r[n] for n in features] for r in ex.features["human"]], dtype=np.float64)
    for fold in range(k):
        train = {t for t, f in folds.items() if f != fold}
        if len(train) == len(folds):
            continue  # more folds than topics: this one holds none out
        comb = fit_adjusted(ex, features, train, l2) if adjust else fit_combiner(ex, features, train, l2)
        combiners.append(comb)
        held_facts = [i for i, f in enumerate(ex.human) if folds.get(f.topic) == fold]
        if held_facts:
            probs = comb.probability(x[held_facts])
            for i, p in zip(held_facts, probs):
                human_prob[i] = float(p)
                human_pred[i] = bool(p > comb.threshold)
        held = {i for i, b in enumerate(ex.bios) if folds.get(b.topic) == fold}
        for i, p in bio_probabilities(ex, comb, held).items():
            if len(p):
                estimate[i] = bio_estimate(comb, p)
                decided[i] = float(np.mean(p > comb.threshold))
                mean_prob[i] = float(p.mean())
    return CvResult(human_pred, estimate, folds, combiners, human_prob, decided, mean_prob)


def in_sample(ex: Examples, comb: Combiner) -> CvResult:
    """Predictions of one combiner on every example (topics it was trained on: optimistic)."""
    preds = [bool(p > comb.threshold) for p in comb.probability(comb.matrix(ex.features["human"]))]
    probs = bio_probabilities(ex, comb, set(range(len(ex.bios))))
    return CvResult(preds, [bio_estimate(comb, probs[i]) for i in range(len(ex.bios))], {}, [comb], [],
                    [float(np.mean(probs[i] > comb.threshold)) for i in range(len(ex.bios))],
                    [float(probs[i].mean()) if len(probs[i]) else float("nan") for i in range(len(ex.bios))])


def per_subject(ex: Examples, res: CvResult) -> list[dict]:
    """Per subject: bios, human and estimated FActScore (×100; the aggregate, :func:`aggregate_estimate`),
    ER, F1 of predicting NS."""
    out = []
    for subject in dict.fromkeys(b.subject for b in ex.bios):
        bios = [i for i, b in enumerate(ex.bios) if b.subject == subject]
        facts = [(p, bool(f.label), f.topic) for p, f in zip(res.human_pred, ex.human) if ex.bios[f.bio].subject == subject]
        preds, labels, topics = (list(c) for c in zip(*facts)) if facts else ([], [], [])
        human = 100 * float(np.mean([ex.human_share[i] for i in bios]))
        est = 100 * aggregate_estimate([res.bio_estimate[i] for i in bios])
        f1 = f1_not_supported(preds, labels)
        counted = 100 * float(np.mean([res.bio_decisions[i] for i in bios])) if res.bio_decisions else est
        out.append({"subject": subject, "n_bios": len(bios), "human": human, "estimated": est,
                    "estimated_unclipped": 100 * float(np.mean([res.bio_estimate[i] for i in bios])),
                    "error_rate": abs(est - human), "f1_ns": f1, "estimated_by_decisions": counted,
                    "error_rate_by_decisions": abs(counted - human),
                    "signed_error_ci95": signed_error_ci([res.bio_estimate[i] for i in bios],
                                                         [ex.human_share[i] for i in bios],
                                                         [ex.bios[i].topic for i in bios]),
                    "f1_ns_ci95": f1_ns_ci(preds, labels, topics),
                    "n_facts": sum(len(ex.bios[i].model_facts()) for i in bios), "n_human_facts": len(facts)})
    return out
