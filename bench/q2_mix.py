"""``python -m bench.q2_mix OUT [--dev-limit 50] [--a Q2_no_nli] [--b overlap]``: a weighted mean of two of
a Q² run's scores, its weight chosen on the development sample and judged on the rest.

Reads ``fscore-lite meta-eval q2 --out OUT``'s per-response files (as :mod:`bench.q2_compare` does). For each
weight ``w`` of 0, 0.1, ..., 1 the score ``w·A + (1 − w)·B`` is judged at the paper's threshold (consistent
iff the score is above it) and by ROC AUC on the ``--limit N`` sample (development) and on the other
responses (held out). ``w`` is chosen by the development accuracy (then AUC; then the larger ``w``), and
held out it is paired response by response against the run's ``Q2`` (:func:`fscore_lite.stats.bootstrap.
paired_difference`).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from bench.q2_compare import correct, dev_keys, judged, load_run
from fscore_lite.metaeval.q2_wow import is_inconsistent
from fscore_lite.stats.bootstrap import paired_difference

WEIGHTS = tuple(i / 10 for i in range(11))


def mixed(record: dict, a: str, b: str, w: float) -> float:
    return w * record[a] + (1 - w) * record[b]


def judge(run: dict, keys: list, a: str, b: str, w: float) -> dict:
    """Accuracy at the threshold and AUC of the mix over ``keys`` (:func:`~bench.q2_compare.judged`)."""
    return judged([mixed(run[k][1], a, b, w) for k in keys], [run[k][0] for k in keys])


def choose(run: dict, keys: list, a: str, b: str) -> float:
    """The weight of ``WEIGHTS`` with the best accuracy over ``keys`` (then AUC, then the larger weight)."""
    scored = {w: judge(run, keys, a, b, w) for w in WEIGHTS}
    return max(WEIGHTS, key=lambda w: (scored[w]["accuracy"], scored[w]["auc"], w))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.q2_mix", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path)
    p.add_argument("--dev-limit", type=int, default=50)
    p.add_argument("--a", default="Q2_no_nli")
    p.add_argument("--b", default="overlap")
    o = p.parse_args(argv)
    run = load_run(o.out)
    keys = sorted(run)
    dev = dev_keys(keys, o.dev_limit)
    dev_k, held = [k for k in keys if k in dev], [k for k in keys if k not in dev]
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
