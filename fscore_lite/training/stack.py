"""Topic-grouped cross-validation of the llm+trained combiner (:mod:`fscore_lite.factscore.stacked`).

Rows are human-labelled facts of the training topics, each with two inputs: the trained
verifier's logit *out of fold* (from the topic-grouped CV of the trained combiner, so the logit
of a held-out topic's fact comes from a combiner that never saw that topic) and the LLM's margin.
The same topic → fold map is used here, so in every fold both stages are fitted on the other
folds' topics only.

Per fold, the stack gets a threshold (the share of training facts decided supported matches
their labelled share) and PACC means from an inner topic-grouped CV of its own training rows.
Each held-out fact then has a probability, a decision and a PACC term ``(p − p̄_NS) / (p̄_S − p̄_NS)``
whose mean over a subject's facts is that subject's estimated supported share. The trained
verifier alone is measured the same way on the same facts (its fold combiners' thresholds and
PACC means), so the two columns compare like with like.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..factscore.combiner import Combiner, fit_logistic, share_matching_threshold
from ..factscore.stacked import STACK_FEATURES
from ..stats import auc, f1_not_supported
from .combiner_cv import CvResult
from .examples import Examples, topic_folds


@dataclass
class StackRows:
    topics: list[str]
    subjects: list[str]
    x: np.ndarray  # (n, 2): trained logit (out of fold), LLM margin
    y: np.ndarray  # 1 = supported
    trained_prob: np.ndarray  # the trained verifier's out-of-fold probability
    trained_pred: np.ndarray  # its out-of-fold decision
    trained_pacc: np.ndarray  # its PACC term with its fold's means


def with_pacc_means(comb: Combiner, prob: np.ndarray, y: np.ndarray) -> Combiner:
    """``comb`` with the mean of out-of-fold probabilities ``prob`` (nan: none) over supported and
    unsupported rows as its PACC means; unchanged when either class has none."""
    ok = ~np.isnan(prob)
    if not (ok & (y == 1)).any() or not (ok & (y == 0)).any():
        return comb
    return comb.with_adjustment(float(prob[ok & (y == 1)].mean()), float(prob[ok & (y == 0)].mean()))


def fit_stack(x: np.ndarray, y: np.ndarray, l2: float = 1.0) -> Combiner:
    """The stacked logistic combiner on rows ``x`` with the share-matching threshold."""
    comb = fit_logistic(x, y, STACK_FEATURES, l2=l2)
    return comb.with_threshold(share_matching_threshold([comb.probability(x)], float(np.mean(y))))


def fit_stack_adjusted(rows: StackRows, idx: np.ndarray, l2: float = 1.0, inner: int = 4) -> Combiner:
    """:func:`fit_stack` on rows ``idx`` plus PACC means from an inner topic-grouped CV of them."""
    comb = fit_stack(rows.x[idx], rows.y[idx], l2)
    topics = sorted({rows.topics[i] for i in idx})
    inner = min(inner, len(topics))
    if inner < 2:
        return comb
    folds = topic_folds(topics, inner)
    prob = np.full(len(idx), np.nan)
    fold_of = np.asarray([folds[rows.topics[i]] for i in idx])
    for k in range(inner):
        tr, te = idx[fold_of != k], fold_of == k
        if not te.any() or len(set(rows.y[tr])) < 2:
            continue
        prob[te] = fit_logistic(rows.x[tr], rows.y[tr], STACK_FEATURES, l2=l2).probability(rows.x[idx[te]])
    return with_pacc_means(comb, prob, rows.y[idx])


def pacc_terms(comb: Combiner, prob: np.ndarray) -> np.ndarray:
    """Per fact ``(p − p̄_NS) / (p̄_S − p̄_NS)`` (unclipped; a mean of them is clipped)."""
    if not comb.adjusts:
        return (prob > comb.threshold).astype(np.float64)
    return (prob - comb.p_not_supported) / (comb.p_supported - comb.p_not_supported)


@dataclass
class StackCv:
    prob: np.ndarray
    pred: np.ndarray
    pacc: np.ndarray
    combiners: list[Combiner]


def cross_validate_stack(rows: StackRows, folds: dict[str, int], l2: float = 1.0) -> StackCv:
    """Out-of-fold predictions of the stack over ``folds`` (topic → fold, as the trained CV's)."""
    n = len(rows.y)
    prob, pred, pacc = np.full(n, np.nan), np.zeros(n, dtype=bool), np.full(n, np.nan)
    fold_of = np.asarray([folds[t] for t in rows.topics])
    combiners = []
    for k in sorted(set(folds.values())):
        train, held = np.flatnonzero(fold_of != k), np.flatnonzero(fold_of == k)
        if not len(held) or len(set(rows.y[train])) < 2:
            continue
        comb = fit_stack_adjusted(rows, train, l2)
        combiners.append(comb)
        prob[held] = comb.probability(rows.x[held])
        pred[held] = prob[held] > comb.threshold
        pacc[held] = pacc_terms(comb, prob[held])
    return StackCv(prob, pred, pacc, combiners)


def subject_table(rows: StackRows, cv: StackCv) -> list[dict]:
    """Per subject (and "all"): facts, labelled supported share, both estimates (PACC, ×100), their
    errors, F1(NS) and AUC — the trained verifier alone vs stacked, on the same held-out facts."""
    out = []
    for subject in [*dict.fromkeys(rows.subjects), "all"]:
        m = np.asarray([subject in ("all", s) for s in rows.subjects]) & ~np.isnan(cv.prob)
        if not m.any():
            continue
        human = 100 * float(rows.y[m].mean())
        row = {"subject": subject, "n_facts": int(m.sum()), "human": human}
        for name, prob, pred, pacc in (("trained", rows.trained_prob, rows.trained_pred, rows.trained_pacc),
                                       ("stacked", cv.prob, cv.pred, cv.pacc)):
            est = 100 * min(1.0, max(0.0, float(np.mean(pacc[m]))))
            f1 = f1_not_supported([bool(p) for p in pred[m]], [bool(v) for v in rows.y[m]])
            row[name] = {"estimated": est, "error": abs(est - human), "f1_ns": f1, "auc": auc(prob[m], rows.y[m])}
        out.append(row)
    return out


def fold_combiners(res: CvResult) -> dict[int, object]:
    """Fold → the trained combiner fitted without that fold (folds holding no topic skipped)."""
    return dict(zip(sorted(set(res.folds.values())), res.combiners))


def human_stack_rows(ex: Examples, oof: CvResult, sample: list[int], margins: list[float]) -> StackRows:
    """Stack rows for the human facts ``sample`` (indices into ``ex.human``) with their margins:
    trained logit out of fold, label, and the trained verifier's own out-of-fold outputs."""
    from ..factscore.stacked import logit_of

    by_fold = fold_combiners(oof)
    topics = [ex.human[i].topic for i in sample]
    tprob = np.asarray([oof.human_prob[i] for i in sample])
    return StackRows(
        topics=topics, subjects=[ex.bios[ex.human[i].bio].subject for i in sample],
        x=np.asarray([[logit_of(p), m] for p, m in zip(tprob, margins)], dtype=np.float64),
        y=np.asarray([1.0 if ex.human[i].label else 0.0 for i in sample]),
        trained_prob=tprob, trained_pred=np.asarray([oof.human_pred[i] for i in sample]),
        trained_pacc=np.asarray([float(pacc_terms(by_fold[oof.folds[t]], np.asarray([p]))[0])
                                 for t, p in zip(topics, tprob)]))


def human_sample_margins(ex: Examples, llm, retriever, every: int, progress: bool = False,
                         record=None) -> tuple[list[int], list[float]]:
    """The fixed human-fact sample (every ``every``-th) and the LLM's margin for each."""
    from ..factscore.stacked import llm_margin
    from ..progress import Progress

    sample = list(range(0, len(ex.human), every))
    margins = []
    bar = Progress(None, f"{llm.name} margins (human facts)", enabled=progress)
    bar.add_total(len(sample), "facts")
    for i in sample:
        f = ex.human[i]
        margins.append(llm_margin(llm, f.topic, f.text, retriever.retrieve(f.topic, f.text), *llm_prompt_settings(record)))
        bar.advance(1, unit="facts")
    bar.close()
    return sample, margins


def llm_prompt_settings(record) -> tuple[int, int]:
    from ..factscore.stacked import LLM_PASSAGES, LLM_WINDOW_TOKENS

    record = record or {}
    return int(record.get("passages", LLM_PASSAGES)), int(record.get("window_tokens", LLM_WINDOW_TOKENS))
