"""Everything the trained verifier fits on labels, fitted on a chosen set of training bios.

The build fits it on every training bio; meta-eval refits it inside each held-out split (topics
held out, and the LM held out too), so a held-out bio is scored by a verifier that never saw its
topic — nor, with ``--hold-out lm``, any bio of its LM.

* **Combiner**: logistic regression on the facts of ``train_kinds`` (by default the paper's facts
  and every decomposer's own facts, each with its silver label, :mod:`.silver`), the kinds of facts
  ``score`` verifies.
* **Calibrations**, one per kind of facts ``score`` may verify (given facts: the paper's; generated
  facts: each decomposer's own): the combiner's logits of those facts, each predicted *out of fold*
  by a combiner fitted on the other inner topic-grouped folds, mapped to their labels by logistic
  calibration (:func:`~fscore_lite.factscore.calibration.fit_scaling`), with the facts' share of
  supported labels as the prior the probabilities hold under.

Nothing is fitted to a subject's mean: every number comes from per-fact labels.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from ..factscore.calibration import GIVEN, Calibration, fit_scaling
from ..factscore.combiner import Combiner, fit_logistic
from .examples import OWN, Examples

INNER_FOLDS = 4


@dataclass(frozen=True)
class FitSettings:
    features: tuple[str, ...]
    l2: float = 1.0
    inner_folds: int = INNER_FOLDS
    # the kinds of facts the combiner learns from ("own" stands for every decomposer's own facts)
    train_kinds: tuple[str, ...] = ("model", "own")


@dataclass
class Fitted:
    combiner: Combiner
    calibrations: dict[str, Calibration] = field(default_factory=dict)  # GIVEN and each decomposer's name


def calibration_name(kind: str) -> str:
    """The calibration a kind of facts is scored with: a decomposer's own, or the given facts'."""
    return kind[len(OWN):] if kind.startswith(OWN) else GIVEN


def _kinds(ex: Examples, names: tuple[str, ...]) -> list[str]:
    return [k for k in ex.kinds if k in names or ("own" in names and k.startswith(OWN))]


def labelled(ex: Examples, kind: str, bios: set[int], features: tuple[str, ...]):
    """(x, y, indices) of the labelled facts of ``kind`` whose bio is in ``bios``."""
    idx = [i for i, f in enumerate(ex.facts_of(kind)) if f.bio in bios and f.label is not None]
    rows = ex.features[kind]
    x = np.asarray([[rows[i][n] for n in features] for i in idx], dtype=np.float64).reshape(-1, len(features))
    y = np.asarray([float(ex.facts_of(kind)[i].label) for i in idx], dtype=np.float64)
    return x, y, idx


def fit_combiner(ex: Examples, bios: set[int], s: FitSettings) -> Combiner:
    parts = [labelled(ex, k, bios, s.features) for k in _kinds(ex, s.train_kinds)]
    x = np.vstack([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    if not len(y):
        raise ValueError("no labelled facts to fit the combiner on")
    return fit_logistic(x, y, s.features, l2=s.l2)


def inner_folds(ex: Examples, bios: set[int], k: int) -> dict[str, int]:
    """Topic → inner fold over the topics of ``bios`` (round-robin over their sha256, salted so that
    inner folds do not repeat the outer ones)."""
    topics = sorted({ex.bios[i].topic for i in bios})
    ordered = sorted(topics, key=lambda t: hashlib.sha256(("inner:" + t).encode("utf-8")).hexdigest())
    return {t: i % k for i, t in enumerate(ordered)}


def fit_verifier(ex: Examples, bios: set[int], s: FitSettings, fitted_for: dict[str, dict] | None = None) -> Fitted:
    """The combiner and a calibration for each kind of facts but the human ones, fitted on ``bios`` only.
    ``fitted_for``: per calibration name, what made those facts (recorded in the calibration)."""
    comb = fit_combiner(ex, bios, s)
    folds = inner_folds(ex, bios, min(s.inner_folds, len({ex.bios[i].topic for i in bios})))
    kinds = [k for k in ex.kinds if k != "human"]
    logits = {k: {} for k in kinds}  # kind → fact index → out-of-fold logit (in-sample with one topic only)
    for fold in sorted(set(folds.values())):
        train = {i for i in bios if folds[ex.bios[i].topic] != fold}
        held = {i for i in bios if folds[ex.bios[i].topic] == fold}
        try:
            inner = fit_combiner(ex, train, s) if train else comb
        except ValueError:  # no labelled facts outside this fold
            inner = comb
        for k in kinds:
            x, _, idx = labelled(ex, k, held, s.features)
            logits[k].update(zip(idx, inner.logit(x)) if len(idx) else ())
    out = Fitted(comb)
    for k in kinds:
        _, y, idx = labelled(ex, k, bios, s.features)
        if not len(idx) or y.min() == y.max():
            continue
        scale, offset = fit_scaling([logits[k][i] for i in idx], y)
        name = calibration_name(k)
        out.calibrations[name] = Calibration(name, scale, offset, float(y.mean()), dict((fitted_for or {}).get(name, {})),
                                             len(idx), len({ex.facts_of(k)[i].bio for i in idx}))
    return out
