"""``python -m bench.q2_mix OUT [--dev-limit 50] [--a Q2_no_nli] [--b overlap] [--logistic]``: a weighted mean
of two of a Q² run's scores, its weight chosen on the development sample and judged on the rest.

Reads ``fscore-lite meta-eval q2 --out OUT``'s per-response files (as :mod:`bench.q2_compare` does). For each
weight ``w`` of 0, 0.1, ..., 1 the score ``w·A + (1 − w)·B`` is judged at the paper's threshold (consistent
iff the score is above it) and by ROC AUC on the ``--limit N`` sample (development) and on the other
responses (held out). ``w`` is chosen by the development accuracy (then AUC; then the larger ``w``), and
held out it is paired response by response against the run's ``Q2`` (:func:`fscore_lite.stats.bootstrap.
paired_difference`).

``--logistic`` instead fits an L2-regularised logistic regression of "consistent" on all four scores
(:data:`~bench.q2_compare.METHODS`; :func:`fscore_lite.factscore.combiner.fit_logistic`) to the development
sample, its L2 strength of :data:`L2S` chosen by 5-fold cross-validated accuracy there, and judges its
probability at 0.5 on the held-out responses the same way.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from bench.q2_compare import METHODS, correct, dev_keys, judged, load_run
from fscore_lite.factscore.combiner import fit_logistic
from fscore_lite.metaeval.q2_wow import is_inconsistent
from fscore_lite.stats import auc
from fscore_lite.stats.bootstrap import paired_difference

WEIGHTS = tuple(i / 10 for i in range(11))
L2S = (0.1, 1.0, 10.0, 100.0)
FOLDS = 5


def mixed(record: dict, a: str, b: str, w: float) -> float:
    return w * record[a] + (1 - w) * record[b]


def judge(run: dict, keys: list, a: str, b: str, w: float) -> dict:
    """Accuracy at the threshold and AUC of the mix over ``keys`` (:func:`~bench.q2_compare.judged`)."""
    return judged([mixed(run[k][1], a, b, w) for k in keys], [run[k][0] for k in keys])


def choose(run: dict, keys: list, a: str, b: str) -> float:
    """The weight of ``WEIGHTS`` with the best accuracy over ``keys`` (then AUC, then the larger weight)."""
    scored = {w: judge(run, keys, a, b, w) for w in WEIGHTS}
    return max(WEIGHTS, key=lambda w: (scored[w]["accuracy"], scored[w]["auc"], w))


def logistic(run: dict, dev_k: list, l2: float):
    """The logistic regression of "consistent" on :data:`METHODS`, fitted to ``dev_k``."""
    x = np.asarray([[run[k][1][m] for m in METHODS] for k in dev_k])
    return fit_logistic(x, np.asarray([run[k][0] for k in dev_k], dtype=float), METHODS, l2=l2)


def predicted(run: dict, keys: list, model) -> list[float]:
    return [float(p) for p in model.probability(model.matrix([run[k][1] for k in keys]))]


def cv_accuracy(run: dict, dev_k: list, l2: float) -> float:
    """5-fold cross-validated accuracy over ``dev_k`` (fold = position in ``dev_k`` modulo 5)."""
    right = 0
    for f in range(FOLDS):
        train = [k for i, k in enumerate(dev_k) if i % FOLDS != f]
        test = [k for i, k in enumerate(dev_k) if i % FOLDS == f]
        p = predicted(run, test, logistic(run, train, l2))
        right += sum((q > 0.5) == run[k][0] for q, k in zip(p, test))
    return right / len(dev_k)


def main_logistic(run: dict, dev_k: list, held: list) -> None:
    cv = {l2: cv_accuracy(run, dev_k, l2) for l2 in L2S}
    for l2 in L2S:
        print(f"  L2 {l2:g}: development 5-fold accuracy {100 * cv[l2]:.1f}%")
    l2 = max(L2S, key=lambda v: (cv[v], v))
    model = logistic(run, dev_k, l2)
    p = dict(zip(held, predicted(run, held, model)))
    fit = {k: float((p[k] > 0.5) == run[k][0]) for k in held}
    d = paired_difference(fit, {k: correct(run, k, "Q2") for k in held})
    terms = ", ".join(f"{m} {c:+.2f}" for m, c in zip(METHODS, model.coef))
    print(f"chosen L2 {l2:g}; coefficients (standardised) {terms}, intercept {model.intercept:+.2f}")
    print(f"held out: {100 * sum(fit.values()) / len(held):.1f}% / AUC {auc([p[k] for k in held], [run[k][0] for k in held]):.3f}, "
          f"minus Q2 {100 * d['mean']:+.1f} points ({100 * d['ci'][0]:+.1f} to {100 * d['ci'][1]:+.1f}) paired")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.q2_mix", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path)
    p.add_argument("--dev-limit", type=int, default=50)
    p.add_argument("--a", default="Q2_no_nli")
    p.add_argument("--b", default="overlap")
    p.add_argument("--logistic", action="store_true", help="a logistic regression on all four scores instead")
    o = p.parse_args(argv)
    run = load_run(o.out)
    keys = sorted(run)
    dev = dev_keys(keys, o.dev_limit)
    dev_k, held = [k for k in keys if k in dev], [k for k in keys if k not in dev]
    if o.logistic:
        print(f"logistic regression on {', '.join(METHODS)}: development {len(dev_k)}, held out {len(held)}")
        return main_logistic(run, dev_k, held)
    print(f"w·{o.a} + (1 − w)·{o.b}: development {len(dev_k)}, held out {len(held)} (accuracy / AUC)")
    for w in WEIGHTS:
        d, h = judge(run, dev_k, o.a, o.b, w), judge(run, held, o.a, o.b, w)
        print(f"  w {w:.1f}  development {100 * d['accuracy']:5.1f}% / {d['auc']:.3f}   "
              f"held out {100 * h['accuracy']:5.1f}% / {h['auc']:.3f}")
    w = choose(run, dev_k, o.a, o.b)
    mix = {k: float(is_inconsistent(mixed(run[k][1], o.a, o.b, w)) != run[k][0]) for k in held}
    q2 = {k: correct(run, k, "Q2") for k in held}
    d = paired_difference(mix, q2)
    h = judge(run, held, o.a, o.b, w)
    print(f"chosen w {w:.1f}; held out: {100 * h['accuracy']:.1f}% / AUC {h['auc']:.3f}, minus Q2 "
          f"{100 * d['mean']:+.1f} points ({100 * d['ci'][0]:+.1f} to {100 * d['ci'][1]:+.1f}) paired")


if __name__ == "__main__":
    main()
