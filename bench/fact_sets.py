"""``python -m bench.fact_sets``: do the same bios' scores from different fact sets err alike?

Each LM's bios are scored as one run by verifier fits that saw neither that LM nor the bio's topic fold
(what ``meta-eval factscore-er --cv K --hold-out lm`` scores, each response at its own share), once per
set of facts: the paper's (``paper``) and each shipped decomposer's own facts. For each LM this prints
each set's per-bio MAE and ER, the same for the mean of every pair of sets (a bio scored from two fact
sets, its two scores averaged), the correlation of every pair's per-bio errors (score − human), and the
difference of every pair's scores on the same bios (second − first, ×100) with a bootstrap interval over
the topics (:func:`fscore_lite.stats.bootstrap.signed_error_ci`, as ``meta-eval`` pairs two runs).
Errors that correlate near 1 come from what the sets share — the verifier, the evidence, the page —
and averaging the sets cannot remove them; errors that do not correlate are the decomposers' own, and
an average halves part of them.

::

    python -m bench.fact_sets --data ../shared/data [--sets paper,default,tuned] [--json OUT]
"""
from __future__ import annotations

import json
from itertools import combinations

import numpy as np

from bench.response_prior import agreement, facts_kind, held_out_parser, held_out_runs
from fscore_lite.stats.bootstrap import signed_error_ci


def compare(sets: dict[str, dict], human: dict, topics: dict | None = None) -> dict:
    """``sets``: name → bio → score, one LM's bios. Judged on the bios every set scores: each set
    (:func:`~bench.response_prior.agreement`), the mean of each pair, the correlation of each pair's errors
    (None where an error does not vary) and the paired difference of its scores (second − first, ×100) with
    its interval over resampled topics (``topics``: bio → topic; each bio its own without it)."""
    common = sorted(set.intersection(*(set(s) for s in sets.values())))
    groups = [topics[i] if topics else i for i in common]
    errors = {n: np.asarray([s[i] - human[i] for i in common]) for n, s in sets.items()}
    out: dict = {"bios": len(common), "sets": {}, "pairs": {}}
    for n, s in sets.items():
        out["sets"][n] = agreement({i: s[i] for i in common}, human)
    for a, b in combinations(sets, 2):
        ea, eb = errors[a], errors[b]
        corr = float(np.corrcoef(ea, eb)[0, 1]) if len(common) > 1 and np.ptp(ea) > 0 and np.ptp(eb) > 0 else None
        mean = agreement({i: (sets[a][i] + sets[b][i]) / 2 for i in common}, human)
        diff = None
        if common:
            ci = signed_error_ci([sets[b][i] for i in common], [sets[a][i] for i in common], groups)
            diff = {"mean": 100 * float(np.mean(eb - ea)), "ci95": ci}
        out["pairs"][f"{a}+{b}"] = {**mean, "error_corr": corr, "difference": diff}
    return out


def main(argv=None) -> None:
    from fscore_lite.training.heldout import bio_scores

    p = held_out_parser("python -m bench.fact_sets", __doc__, facts=False)
    p.add_argument("--sets", default="paper,default,tuned", help="comma-separated: paper and/or decomposer names")
    a = p.parse_args(argv)
    names = [n.strip() for n in a.sets.split(",") if n.strip()]
    if len(names) < 2:
        raise SystemExit("--sets needs two or more fact sets")
    prep, runs = held_out_runs(a, names)
    ex = prep.ex
    human = {i: ex.human_share[i] for i in range(len(ex.bios))}
    topics = {i: b.topic for i, b in enumerate(ex.bios)}
    scores = {n: bio_scores(ex, runs[facts_kind(n)]) for n in names}
    table = {}
    for subject in dict.fromkeys(b.subject for b in ex.bios):
        sets = {n: {i: v for i, v in s.items() if ex.bios[i].subject == subject} for n, s in scores.items()}
        table[subject] = compare(sets, human, topics)
    print("LM and topic held out, each response at its own share; per-bio MAE / ER:")
    for subject, t in table.items():
        cells = [f"{n} {v['per_bio_mae']:.1f} / {v['er']:.1f}" for n, v in t["sets"].items()]
        cells += [f"mean({n}) {v['per_bio_mae']:.1f} / {v['er']:.1f}" for n, v in t["pairs"].items()]
        print(f"  {subject:<13} ({t['bios']} bios)  " + ";  ".join(cells))
    print("correlation of the per-bio errors:")
    for subject, t in table.items():
        print(f"  {subject:<13} " + ";  ".join(f"{n} {v['error_corr']:+.2f}" if v["error_corr"] is not None else f"{n} —"
                                            for n, v in t["pairs"].items()))
    print("difference of the scores on the same bios (second − first) [95%]:")
    for subject, t in table.items():
        print(f"  {subject:<13} " + ";  ".join(
            f"{n.split('+')[1]} − {n.split('+')[0]} {v['difference']['mean']:+.2f} "
            f"[{v['difference']['ci95'][0]:+.2f}, {v['difference']['ci95'][1]:+.2f}]" for n, v in t["pairs"].items()))
    if a.json:
        a.json.write_text(json.dumps({"sets": names, "table": table}, indent=1))


if __name__ == "__main__":
    main()
