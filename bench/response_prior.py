"""``python -m bench.response_prior``: how strongly a response's share is held to its run's share.

A response's score is the mean posterior of its facts under its own share, estimated from its facts
under a Beta prior worth ``strength`` facts at the run's share
(:func:`fscore_lite.factscore.calibration.response_prior`; the runtime's constant is
``RESPONSE_PRIOR_FACTS``). This chooses ``strength`` by per-bio mean absolute error against people,
nested inside leave-one-LM-out so that no choice sees the LM it is judged on:

* outer: each LM's bios scored as one run by verifier fits that saw neither that LM nor the bio's topic
  fold (what ``meta-eval factscore-er --cv K --hold-out lm`` scores);
* inner, for held-out LM L: each other LM A's bios scored by fits on the third LM alone (topic folds
  kept), and ``strength`` chosen on those runs; L's outer run is then judged at that choice.

Reads the shipped own-facts files through the installed verifier's build settings (as meta-eval does)::

    python -m bench.response_prior --data ../shared/data [--facts default] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

GRID = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 40.0, 80.0, float("inf"))


def bio_scores(run: dict, strength: float) -> dict:
    """Bio → its score when ``run`` (bio → Response) is one run, responses held to the run share by ``strength``
    (``inf``: every response at the run share)."""
    from fscore_lite.factscore.calibration import posteriors, response_share, run_share

    ids = sorted(run)
    share = run_share([run[i] for i in ids])
    if strength == float("inf"):
        return {i: float(np.mean(posteriors(run[i].probs, run[i].prior, share))) for i in ids}
    return {i: response_share(run[i], share, strength) for i in ids}


def agreement(scores: dict, human: dict) -> dict:
    """Bios, per-bio MAE, estimate (the scores' mean), human mean and the run's error (×100) of ``scores``
    (bio → score) against ``human`` on their bios."""
    ids = sorted(scores)
    x = np.asarray([scores[i] for i in ids])
    y = np.asarray([human[i] for i in ids])
    est, truth = float(x.mean()), float(y.mean())
    return {"bios": len(ids), "per_bio_mae": 100 * float(np.mean(np.abs(x - y))), "estimate": 100 * est,
            "human": 100 * truth, "er": 100 * abs(est - truth)}


def judge(run: dict, human: dict, strength: float) -> dict:
    """:func:`agreement` of ``run`` at ``strength``; ``slope``: the least-squares slope of the bios' human
    scores on their scores (1: as spread as people's), ``corr`` their correlation."""
    got = bio_scores(run, strength)
    ids = sorted(got)
    x = np.asarray([got[i] for i in ids])
    y = np.asarray([human[i] for i in ids])
    slope = float(np.polyfit(x, y, 1)[0]) if len(ids) > 1 and np.ptp(x) > 0 else float("nan")
    corr = float(np.corrcoef(x, y)[0, 1]) if len(ids) > 1 and np.ptp(x) > 0 and np.ptp(y) > 0 else float("nan")
    return {"strength": strength, **agreement(got, human), "slope": slope, "corr": corr}


def choose(runs: list[dict], human: dict, grid=GRID) -> float:
    """The strength of ``grid`` with the least per-bio MAE averaged over ``runs`` (the first on a tie)."""
    return min(grid, key=lambda k: float(np.mean([judge(r, human, k)["per_bio_mae"] for r in runs])))


def nested(ex, kind: str, fit, fitted_for, folds: int = 5) -> dict:
    """Held-out LM → other LM → its bios scored by fits on the remaining LM(s) only, topic folds held out."""
    from fscore_lite.training.examples import topic_folds
    from fscore_lite.training.fit import fit_verifier
    from fscore_lite.training.heldout import scored_bios

    fold_of = topic_folds(ex.topics, folds)
    subjects = list(dict.fromkeys(b.subject for b in ex.bios))
    out: dict = {}
    for held_lm in subjects:
        out[held_lm] = {}
        for other in subjects:
            if other == held_lm:
                continue
            run: dict = {}
            for fold in range(folds):
                held = {i for i, b in enumerate(ex.bios) if fold_of[b.topic] == fold and b.subject == other}
                train = {i for i, b in enumerate(ex.bios)
                         if fold_of[b.topic] != fold and b.subject not in (held_lm, other)}
                if held and train:
                    run.update(scored_bios(ex, fit_verifier(ex, train, fit, fitted_for), kind, held, fit))
            out[held_lm][other] = run
    return out


def held_out_parser(prog: str, doc: str, facts: bool = True) -> argparse.ArgumentParser:
    """The parser of a bench that scores the dev bios held out by LM: ``--data``, ``--facts`` (unless
    ``facts`` is false: a bench that names its fact sets otherwise), ``--cv``, ``--threads``, ``--json``."""
    p = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=Path("../shared/data"))
    if facts:
        p.add_argument("--facts", default="default", help="the decomposer whose shipped own facts are scored, or 'paper'")
    p.add_argument("--cv", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", type=Path, default=None, help="write the table here too")
    return p


def facts_kind(name: str) -> str:
    """The examples' kind of facts of a ``--facts`` name: "paper" → "model", a decomposer → "own:NAME"."""
    from fscore_lite.training.examples import OWN

    return "model" if name == "paper" else OWN + name


def held_out_runs(a: argparse.Namespace, names: list[str]):
    """(prepared examples and fit settings, kind → bio → Response with LM and topic held out) for each
    ``--facts`` name of ``names``: the shipped own facts (or the paper's) through the installed verifier's
    build settings, as meta-eval does."""
    from fscore_lite.build_step import shipped_own_facts
    from fscore_lite.manifest import Bundle
    from fscore_lite.settings import Settings
    from fscore_lite.training.examples import OWN
    from fscore_lite.training.heldout import held_out_responses
    from fscore_lite.training.prepare import installed_verifier, prepare

    settings = Settings().with_(threads=a.threads)
    bundle = Bundle(settings.models_dir)
    prep = prepare(a.data, settings, bundle, installed_verifier(bundle), shipped_own_facts(None))
    kinds = [facts_kind(n) for n in names]
    missing = [n for n, k in zip(names, kinds) if k not in prep.ex.kinds]
    if missing:
        have = ["paper" if k == "model" else k[len(OWN):] for k in prep.ex.kinds if k == "model" or k.startswith(OWN)]
        raise SystemExit(f"no shipped facts for {', '.join(missing)}; there are facts for {', '.join(have)}")
    return prep, held_out_responses(prep.ex, kinds, prep.fit, "lm", a.cv, prep.fitted_for)


def held_out_run(a: argparse.Namespace):
    """(prepared examples and fit settings, the facts' kind, bio → Response with LM and topic held out) of
    ``--facts``: :func:`held_out_runs` of one name."""
    prep, runs = held_out_runs(a, [a.facts])
    kind = facts_kind(a.facts)
    return prep, kind, runs[kind]


def main(argv=None) -> None:
    a = held_out_parser("python -m bench.response_prior", __doc__).parse_args(argv)
    prep, kind, outer = held_out_run(a)
    ex = prep.ex
    human = {i: ex.human_share[i] for i in range(len(ex.bios))}
    inner = nested(ex, kind, prep.fit, prep.fitted_for, a.cv)
    rows = []
    for lm, others in inner.items():
        run = {i: r for i, r in outer.items() if ex.bios[i].subject == lm}
        chosen = choose(list(others.values()), human)
        rows.append({"subject": lm, "chosen": chosen, "at_chosen": judge(run, human, chosen),
                     "grid": [judge(run, human, k) for k in GRID]})
    print(f"facts {kind}; strength chosen for each held-out LM on the other LMs' runs (fits that saw neither):")
    for r in rows:
        c = r["at_chosen"]
        print(f"  {r['subject']:<13} strength {r['chosen']:g}: per-bio MAE {c['per_bio_mae']:.1f}, "
              f"estimate {c['estimate']:.1f} (human {c['human']:.1f}, ER {c['er']:.1f})")
    print("per-bio MAE / ER / slope / correlation of each held-out LM at every strength (inf: each response at the "
          "run share); " + ", ".join(r["subject"] for r in rows) + ":")
    for i, k in enumerate(GRID):
        print(f"  {k:>5g}  " + "   ".join(f"{g['per_bio_mae']:5.1f} / {g['er']:4.1f} / {g['slope']:.2f} / {g['corr']:.2f}"
                                        for g in (r["grid"][i] for r in rows)))
    if a.json:
        a.json.write_text(json.dumps({"facts": kind, "rows": rows}, indent=1, default=str))


if __name__ == "__main__":
    main()
