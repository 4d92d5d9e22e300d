"""``python -m bench.fact_sets``: do the same bios' scores from different fact sets err alike?

Each LM's bios are scored as one run by verifier fits that saw neither that LM nor the bio's topic fold
(what ``meta-eval factscore-er --cv K --hold-out lm`` scores, each response at its own share), once per
set of facts: the paper's (``paper``) and each shipped decomposer's own facts. For each LM this prints
each set's per-bio MAE and ER, the same for the mean of every pair of sets (a bio scored from two fact
sets, its two scores averaged), the correlation of every pair's per-bio errors (score − human), and the
difference of every pair's scores on the same bios (second − first, ×100) with a bootstrap interval over
the bios (:func:`fscore_lite.stats.bootstrap.paired_difference`).
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

from bench.response_prior import bio_scores, facts_kind, held_out_parser, held_out_runs
from fscore_lite.factscore.calibration import RESPONSE_PRIOR_FACTS
from fscore_lite.stats.bootstrap import paired_difference


def judge(scores: dict, human: dict) -> dict:
    """Per-bio MAE and ER (×100) of ``scores`` (bio → score) against ``human`` on their bios."""
    ids = sorted(scores)
    x = np.asarray([scores[i] for i in ids])
    y = np.asarray([human[i] for i in ids])
    return {"bios": len(ids), "per_bio_mae": 100 * float(np.mean(np.abs(x - y))), "er": 100 * abs(float(x.mean() - y.mean()))}


def compare(sets: dict[str, dict], human: dict) -> dict:
    """``sets``: name → bio → score, one LM's bios. Judged on the bios every set scores: each set, the mean
    of each pair, the correlation of each pair's errors (None where an error does not vary) and the paired
    difference of its scores (second − first, ×100)."""
    common = sorted(set.intersection(*(set(s) for s in sets.values())))
    errors = {n: np.asarray([s[i] - human[i] for i in common]) for n, s in sets.items()}
    out: dict = {"bios": len(common), "sets": {}, "pairs": {}}
    for n, s in sets.items():
        out["sets"][n] = judge({i: s[i] for i in common}, human)
    for a, b in combinations(sets, 2):
        ea, eb = errors[a], errors[b]
        corr = float(np.corrcoef(ea, eb)[0, 1]) if len(common) > 1 and np.ptp(ea) > 0 and np.ptp(eb) > 0 else None
        mean = judge({i: (sets[a][i] + sets[b][i]) / 2 for i in common}, human)
        d = paired_difference({i: sets[b][i] for i in common}, {i: sets[a][i] for i in common})
        diff = None if d is None else {"mean": 100 * d["mean"], "ci95": [100 * c for c in d["ci"]]}
        out["pairs"][f"{a}+{b}"] = {**mean, "error_corr": corr, "difference": diff}
    return out


def main(argv=None) -> None:
    p = held_out_parser("python -m bench.fact_sets", __doc__, facts=False)
    p.add_argument("--sets", default="paper,default,tuned", help="comma-separated: paper and/or decomposer names")
    a = p.parse_args(argv)
    names = [n.strip() for n in a.sets.split(",") if n.strip()]
    if len(names) < 2:
        raise SystemExit("--sets needs two or more fact sets")
    prep, runs = held_out_runs(a, names)
    ex = prep.ex
    human = {i: ex.human_share[i] for i in range(len(ex.bios))}
    table = {}
    for subject in dict.fromkeys(b.subject for b in ex.bios):
        sets = {}
        for n in names:
            run = {i: r for i, r in runs[facts_kind(n)].items() if ex.bios[i].subject == subject}
            sets[n] = bio_scores(run, RESPONSE_PRIOR_FACTS)
        table[subject] = compare(sets, human)
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
