"""Topic-grouped cross-validation of the llm+trained combiner (:mod:`fscore_lite.factscore.stacked`).

Rows are human-labelled facts of the training topics, each with two inputs: the trained
verifier's combiner logit *out of fold* (from the topic-grouped CV of
:func:`~fscore_lite.training.fit.fit_verifier`, so the logit of a held-out topic's fact comes from
a combiner that never saw that topic) and the LLM's margin. The same topic → fold map is used
here, so in every fold both stages are fitted on the other folds' topics only.

The stack is a logistic regression on those gold labels: its probabilities are calibrated on
human facts as they stand, under their labelled share (:func:`stack_calibration`). Each subject's
held-out facts, grouped by bio, are one run: its share (:func:`~fscore_lite.factscore.calibration.run_share`)
is compared with the labelled share of the same facts, and each fact is decided, as ``score`` decides
it, by its posterior under its bio's own share
(:func:`~fscore_lite.factscore.calibration.fact_posteriors`). The trained verifier alone (its given-facts
calibration) is measured the same way on the same facts, so the two columns compare like with like.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..factscore.calibration import Calibration, Response, fact_posteriors, run_share
from ..factscore.combiner import Combiner, fit_logistic
from ..factscore.stacked import STACK_FEATURES
from ..stats import auc, f1_not_supported
from .examples import Examples, topic_folds
from .fit import FitSettings, fit_verifier, labelled

STACK = "llm+trained"  # the stack's calibration name


@dataclass
class StackRows:
    topics: list[str]
    subjects: list[str]
    bios: list[int]
    x: np.ndarray  # (n, 2): trained logit (out of fold), LLM margin
    y: np.ndarray  # 1 = supported
    trained_prob: np.ndarray  # the trained verifier's out-of-fold probability (given-facts calibration)
    trained_prior: np.ndarray  # the prior of that calibration


def stack_calibration(y: np.ndarray) -> Calibration:
    """The stack's probabilities as they are, under the labelled share of the facts it was fitted on."""
    return Calibration(STACK, 1.0, 0.0, float(np.mean(y)), {"facts": "human-labelled facts of the training topics"},
                       len(y), 0)


def fit_stack(x: np.ndarray, y: np.ndarray, l2: float = 1.0) -> tuple[Combiner, Calibration]:
    return fit_logistic(x, y, STACK_FEATURES, l2=l2), stack_calibration(y)


def out_of_fold_logits(ex: Examples, s: FitSettings, folds: dict[str, int]) -> dict[int, tuple[float, float, float]]:
    """Human fact index → (combiner logit, given-facts probability, that calibration's prior), each from
    the fit on the other folds' topics."""
    from ..factscore.calibration import GIVEN

    out = {}
    for fold in sorted(set(folds.values())):
        train = {i for i, b in enumerate(ex.bios) if folds[b.topic] != fold}
        held = {i for i, b in enumerate(ex.bios) if folds[b.topic] == fold}
        if not train or not held:
            continue
        fitted = fit_verifier(ex, train, s)
        x, _, idx = labelled(ex, "human", held, s.features)
        z = fitted.combiner.logit(x)
        cal = fitted.calibrations[GIVEN]
        out.update({j: (float(zz), float(p), cal.prior) for j, zz, p in zip(idx, z, cal.probability(z))})
    return out


def human_stack_rows(ex: Examples, logits: dict, sample: list[int], margins: list[float]) -> StackRows:
    """Stack rows for the human facts ``sample`` (indices into ``ex.human``) with their margins."""
    facts = [ex.human[i] for i in sample]
    return StackRows(
        topics=[f.topic for f in facts], subjects=[ex.bios[f.bio].subject for f in facts], bios=[f.bio for f in facts],
        x=np.asarray([[logits[i][0], m] for i, m in zip(sample, margins)], dtype=np.float64).reshape(-1, 2),
        y=np.asarray([float(f.label) for f in facts]),
        trained_prob=np.asarray([logits[i][1] for i in sample]), trained_prior=np.asarray([logits[i][2] for i in sample]))


@dataclass
class StackCv:
    prob: np.ndarray
    prior: np.ndarray


def cross_validate_stack(rows: StackRows, folds: dict[str, int], l2: float = 1.0) -> StackCv:
    """Out-of-fold probabilities of the stack over ``folds`` (topic → fold, as the trained CV's)."""
    n = len(rows.y)
    prob, prior = np.full(n, np.nan), np.full(n, np.nan)
    fold_of = np.asarray([folds[t] for t in rows.topics])
    for k in sorted(set(folds.values())):
        train, held = np.flatnonzero(fold_of != k), np.flatnonzero(fold_of == k)
        if not len(held) or len(set(rows.y[train])) < 2:
            continue
        comb, cal = fit_stack(rows.x[train], rows.y[train], l2)
        prob[held] = cal.probability(comb.logit(rows.x[held]))
        prior[held] = cal.prior
    return StackCv(prob, prior)


def _measure(prob, prior, y, bios, m) -> dict:
    """A subject's facts ``m`` grouped by bio as one run: its share estimate (against the labelled share of
    the same facts), F1(NS) of the facts' posteriors under each bio's own share, and AUC."""
    idx = np.flatnonzero(m)
    groups: dict[int, list[int]] = {}
    for i in idx:
        groups.setdefault(bios[i], []).append(i)
    run = [Response(tuple(prob[g]), float(prior[g[0]])) for g in groups.values()]
    share = run_share(run)
    post = np.concatenate([fact_posteriors(r, share) for r in run])
    labels = np.concatenate([y[g] for g in groups.values()])
    return {"estimated": 100 * share, "f1_ns": f1_not_supported([bool(p > 0.5) for p in post], [bool(v) for v in labels]),
            "auc": auc(prob[idx], y[idx])}


def subject_table(rows: StackRows, cv: StackCv) -> list[dict]:
    """Per subject (and "all"): facts, labelled supported share, both run-share estimates (×100), their
    errors, F1(NS) and AUC — the trained verifier alone vs stacked, on the same held-out facts."""
    out = []
    bios = np.asarray(rows.bios)
    for subject in [*dict.fromkeys(rows.subjects), "all"]:
        m = np.asarray([subject in ("all", s) for s in rows.subjects]) & ~np.isnan(cv.prob)
        if not m.any():
            continue
        human = 100 * float(rows.y[m].mean())
        row = {"subject": subject, "n_facts": int(m.sum()), "human": human}
        for name, prob, prior in (("trained", rows.trained_prob, rows.trained_prior), ("stacked", cv.prob, cv.prior)):
            r = _measure(prob, prior, rows.y, bios, m)
            row[name] = r | {"error": abs(r["estimated"] - human)}
        out.append(row)
    return out


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


def stack_folds(ex: Examples, folds: int) -> dict[str, int]:
    return topic_folds(ex.topics, folds)
