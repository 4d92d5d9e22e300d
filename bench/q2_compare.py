"""``python -m bench.q2_compare OUT_A [OUT_B] [--dev-limit N]``: Q² runs on q2-wow side by side.

Reads the per-response files that ``fscore-lite meta-eval q2 --out OUT`` writes
(``OUT/q2-wow/*.q2.jsonl``; the gold label comes from the file's name) and prints, for every run,
each method's accuracy at the paper's threshold and ROC AUC with 95% intervals and the share of
responses without a valid question. With ``--dev-limit N`` the responses are split into the fixed
sample that ``meta-eval q2 --limit N`` draws (the N smallest row hashes of each file: what a rule
was developed on) and the rest (held out from that development). With two runs, run B minus run A
is paired response by response: accuracy by :func:`fscore_lite.stats.paired_difference`, AUC by a
paired bootstrap (1,000 resamples, seed 0). Only responses both runs scored are compared.
Each run's wrong Q² verdicts are counted by cause (:func:`error_cause`).
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from fscore_lite.metaeval.q2_wow import THRESHOLD, is_inconsistent, row_hash
from fscore_lite.stats import auc, auc_ci, bootstrap_ci
from fscore_lite.stats.bootstrap import paired_difference

METHODS = ("Q2", "Q2_no_nli", "e2e_nli", "overlap")


def load_run(out_dir: Path) -> dict:
    """{(file stem, row hash, occurrence): (truly consistent, record)} of one run's output (a row
    that repeats in its file is told apart by its occurrence: 0 for the first, 1 for the next, ...)."""
    run = {}
    files = sorted((Path(out_dir) / "q2-wow").glob("*.q2.jsonl"))
    if not files:
        raise SystemExit(f"{out_dir}: no q2-wow/*.q2.jsonl (the --out of `fscore-lite meta-eval q2`)")
    for path in files:
        stem = path.name.split(".")[0]
        consistent = "inconsistent" not in stem
        seen: dict = {}
        for text in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(text)
            h = row_hash(record["response"], record["knowledge"])
            seen[h] = seen.get(h, -1) + 1
            run[(stem, h, seen[h])] = (consistent, record)
    return run


def dev_keys(keys: list, limit: int) -> set:
    """The keys ``--limit limit`` samples: per file, the ``limit`` smallest (row hash, occurrence)."""
    by_file: dict = {}
    for key in keys:
        by_file.setdefault(key[0], []).append(key)
    return {k for ks in by_file.values() for k in sorted(ks, key=lambda k: (k[1], k[2]))[:limit]}


def judged(scores: list[float], consistent: list[bool]) -> dict:
    """Accuracy at the paper's threshold (consistent iff the score is above it) and ROC AUC of ``scores``."""
    right = sum(is_inconsistent(s, THRESHOLD) != c for s, c in zip(scores, consistent))
    return {"accuracy": right / len(scores), "auc": auc(scores, consistent)}


def correct(run: dict, key, method: str) -> float:
    consistent, record = run[key]
    return float(is_inconsistent(record[method], THRESHOLD) != consistent)


def error_cause(consistent: bool, record: dict) -> str:
    """Why a response's Q² verdict is wrong, from its questions: the fallback ran; a consistent
    response with a question the knowledge gave no answer to, or only differing answers; an
    inconsistent one with a question whose answers match (token F1 1), or that NLI called entailed."""
    if record["no_valid_question"]:
        return "no valid question (end-to-end NLI fallback)"
    questions = record["questions"]
    if consistent:
        if any(q["knowledge_no_answer"] for q in questions):
            return "consistent: the knowledge gave no answer to a question"
        return "consistent: the answers differ"
    if any(not q["knowledge_no_answer"] and q["f1"] == 1.0 for q in questions):
        return "inconsistent: the same answer on both sides"
    if any(q.get("nli_label") == "entailment" for q in questions):
        return "inconsistent: NLI calls differing answers entailed"
    return "inconsistent: other"


def summary(run: dict, keys: list) -> dict:
    labels = [run[k][0] for k in keys]
    out = {"n": len(keys), "no_valid_question": sum(bool(run[k][1]["no_valid_question"]) for k in keys) / len(keys)}
    causes: dict = {}
    for k in keys:
        if not correct(run, k, "Q2"):
            cause = error_cause(*run[k])
            causes[cause] = causes.get(cause, 0) + 1
    out["Q2_errors"] = dict(sorted(causes.items(), key=lambda kv: (-kv[1], kv[0])))
    for m in METHODS:
        right = [correct(run, k, m) for k in keys]
        scores = [run[k][1][m] for k in keys]
        out[m] = {"accuracy": sum(right) / len(right), "accuracy_ci95": list(bootstrap_ci(right)),
                  "auc": auc(scores, labels), "auc_ci95": auc_ci(scores, labels)}
    return out


def paired(a: dict, b: dict, keys: list, method: str, n_boot: int = 1000, seed: int = 0) -> dict:
    """Run ``b`` minus run ``a`` on ``keys``: accuracy (paired_difference) and AUC (paired bootstrap)."""
    acc = paired_difference({k: correct(b, k, method) for k in keys}, {k: correct(a, k, method) for k in keys})
    labels = [a[k][0] for k in keys]
    diff = auc([b[k][1][method] for k in keys], labels) - auc([a[k][1][method] for k in keys], labels)
    rnd = random.Random(seed)
    draws = []
    for _ in range(n_boot):
        sample = [keys[int(rnd.random() * len(keys))] for _ in keys]
        ys = [a[k][0] for k in sample]
        x1, x0 = auc([b[k][1][method] for k in sample], ys), auc([a[k][1][method] for k in sample], ys)
        if x1 is not None and x0 is not None:
            draws.append(x1 - x0)
    draws.sort()
    lo, hi = draws[int(0.025 * len(draws))], draws[min(len(draws) - 1, int(0.975 * len(draws)))]
    return {"accuracy": acc, "auc": diff, "auc_ci95": [lo, hi]}


def compare(out_dirs: list, dev_limit: int | None = None) -> dict:
    runs = [load_run(Path(d)) for d in out_dirs]
    keys = sorted(set.intersection(*(set(r) for r in runs)))
    parts = {"all": keys}
    if dev_limit:
        dev = dev_keys(keys, dev_limit)
        parts["dev"] = [k for k in keys if k in dev]
        parts["held_out"] = [k for k in keys if k not in dev]
    report = {}
    for name, ks in parts.items():
        if not ks:
            continue
        report[name] = {"runs": [summary(r, ks) for r in runs]}
        if len(runs) == 2:
            report[name]["b_minus_a"] = {m: paired(runs[0], runs[1], ks, m) for m in ("Q2", "Q2_no_nli")}
    return report


def _pct(x) -> str:
    return f"{100 * x:.1f}%"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dirs", nargs="+", metavar="OUT", help="the --out folders of `fscore-lite meta-eval q2` (one or two)")
    ap.add_argument("--dev-limit", type=int, default=None, help="split off the sample of `meta-eval q2 --limit N`")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if len(args.out_dirs) > 2:
        raise SystemExit("give one or two runs")
    report = compare(args.out_dirs, args.dev_limit)
    if args.json:
        print(json.dumps(report, indent=1))
        return
    for name, part in report.items():
        print(f"== {name}: {part['runs'][0]['n']} responses")
        for i, s in enumerate(part["runs"]):
            cells = [f"{m} {_pct(s[m]['accuracy'])} ({_pct(s[m]['accuracy_ci95'][0])}-{_pct(s[m]['accuracy_ci95'][1])}) "
                     f"AUC {s[m]['auc']:.3f}" for m in METHODS]
            print(f"  {'AB'[i]}: " + " | ".join(cells) + f" | no valid question {_pct(s['no_valid_question'])}")
            print("     Q2 errors: " + "; ".join(f"{n} {cause}" for cause, n in s["Q2_errors"].items()))
        for m, d in part.get("b_minus_a", {}).items():
            acc = d["accuracy"]
            print(f"  {m} B - A: accuracy {100 * acc['mean']:+.1f} ({100 * acc['ci'][0]:+.1f} to {100 * acc['ci'][1]:+.1f}), "
                  f"AUC {d['auc']:+.3f} ({d['auc_ci95'][0]:+.3f} to {d['auc_ci95'][1]:+.3f})")


if __name__ == "__main__":
    main()
