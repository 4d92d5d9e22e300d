"""Q² meta-evaluation on the annotated Wizard-of-Wikipedia responses (``q2-wow``).

For each system (dodeca, MemNet) and label (consistent, inconsistent) the responses are
scored by four methods: Q² (with and without NLI), end-to-end NLI alone, and the model-free
token-overlap baseline (:func:`~fscore_lite.q2.compare.token_overlap`). Reported, beside the
paper's figures: mean score per system and label, the share of responses without a valid
question, and response-level classification at threshold 0.5 (a response is judged
inconsistent iff its score <= 0.5): accuracy, precision/recall of the grounded (consistent)
and ungrounded (inconsistent) classes, and the ROC AUC of the score for the consistent
class. Accuracy and AUC each come with a seeded 95% bootstrap interval over the responses
counted: a sample of 60 responses pins an accuracy only to about ±12 points. ``methods``
gives per method its accuracy, AUC and seconds per response (the stages it needs, see
:func:`method_seconds`).

``limit``: a fixed sample per file, the ``limit`` rows with the smallest sha256 of
``response + "\\n" + knowledge`` (stable across runs and machines, independent of file
order), scored in file order.
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from ..errors import FscoreError
from ..io import atomic_write_json, atomic_write_text
from ..stats import auc, auc_ci, bootstrap_ci, mean

SYSTEMS = (("dodeca", "dodeca"), ("memnet", "MemNet"))
LABELS = ("consistent", "inconsistent")
THRESHOLD = 0.5
SCORES = (("Q2", "Q2"), ("Q2_no_nli", "Q2 no NLI"), ("e2e_nli", "E2E NLI"), ("overlap", "overlap"))
# SPEC.md: the paper's figures.
PAPER_MEANS = {("dodeca", "consistent"): 0.696, ("dodeca", "inconsistent"): 0.238,
               ("memnet", "consistent"): 0.756, ("memnet", "inconsistent"): 0.135}
PAPER_ACCURACY = {"Q2": 77.3, "Q2_no_nli": 73.1, "e2e_nli": 65.3, "overlap": None}


def row_hash(response: str, knowledge: str) -> str:
    """What the fixed sample is drawn by: sha256 of the response, a newline and the knowledge."""
    return hashlib.sha256((response + "\n" + knowledge).encode("utf-8")).hexdigest()


def sample_records(records: list, limit: int | None) -> list:
    """The fixed sample: ``limit`` records with the smallest row hash, back in file order."""
    if limit is None or limit >= len(records):
        return list(records)
    chosen = sorted(records, key=lambda r: (row_hash(r.data["response"], r.data["knowledge"]), r.line))[: max(0, limit)]
    return sorted(chosen, key=lambda r: r.line)


def is_inconsistent(score: float, threshold: float = THRESHOLD) -> bool:
    """SPEC Q² step 7: a response is judged inconsistent when its score <= threshold."""
    return score <= threshold


def classification(pairs: list[tuple[float, bool]], threshold: float = THRESHOLD) -> dict:
    """Accuracy and per-class precision/recall for (score, truly_consistent) pairs, in %."""
    tp = fp = tn = fn = 0  # "positive" = predicted grounded (consistent)
    correct = []
    for score, consistent in pairs:
        grounded = not is_inconsistent(score, threshold)
        correct.append(100.0 if grounded == consistent else 0.0)
        if grounded and consistent:
            tp += 1
        elif grounded:
            fp += 1
        elif consistent:
            fn += 1
        else:
            tn += 1

    def pct(a, b):
        return 100.0 * a / b if b else None

    ci = bootstrap_ci(correct)  # seeded, over responses
    scores, labels = [s for s, _ in pairs], [c for _, c in pairs]
    area, area_ci = auc(scores, labels), auc_ci(scores, labels)
    return {"n": len(pairs), "accuracy": pct(tp + tn, len(pairs)),
            "accuracy_ci95": None if ci is None else [round(ci[0], 2), round(ci[1], 2)],
            "auc": None if area is None else round(area, 4),
            "auc_ci95": None if area_ci is None else [round(area_ci[0], 4), round(area_ci[1], 4)],
            "grounded_precision": pct(tp, tp + fp), "grounded_recall": pct(tp, tp + fn),
            "ungrounded_precision": pct(tn, tn + fn), "ungrounded_recall": pct(tn, tn + fp)}


def method_seconds(stages_s: dict, no_nli_gets_fallback: bool = True) -> dict:
    """Seconds each method's stages took in total (:class:`~fscore_lite.q2.score.StageTimer`).

    Q2: the whole pipeline (candidates, qg, qa_response, qa_knowledge, nli, fallback). Q2
    without NLI: the same less the per-question NLI (and less the fallback when it does not
    get the fallback score). End-to-end NLI: its own calls plus the fallback's, which are the
    same call on the same pair (its score is reused). Overlap: its own stage."""
    pipeline = sum(stages_s[s] for s in ("candidates", "qg", "qa_response", "qa_knowledge", "nli", "fallback"))
    no_nli = pipeline - stages_s["nli"] - (0.0 if no_nli_gets_fallback else stages_s["fallback"])
    return {"Q2": pipeline, "Q2_no_nli": no_nli, "e2e_nli": stages_s["e2e_nli"] + stages_s["fallback"],
            "overlap": stages_s["overlap"]}


def run_q2_wow(data_dir, settings=None, *, limit: int | None = None, out_dir=None, backend: str = "auto",
               precision: str = "int8", options=None, progress: bool = True) -> dict:
    """Score the four annotated files; write per-file JSONL and a report; return the report."""
    from ..q2.pipeline import Progress, Q2Scorer, read_q2_rows

    folder = Path(data_dir) / "q2-wow"
    if not folder.is_dir():
        raise FscoreError(f"{folder} not found: pass --data pointing at the shared data folder")
    chosen = {}
    for key, _ in SYSTEMS:
        for label in LABELS:
            path = folder / f"{key}_{label}.csv"
            chosen[(key, label)] = (path, sample_records(read_q2_rows(path), limit))
    scorer = Q2Scorer(settings, options=options, backend=backend, precision=precision)
    out = Path(out_dir) if out_dir else None
    bar = Progress(sum(len(recs) for _, recs in chosen.values()), label="q2 meta-eval", enabled=progress)
    t0 = time.perf_counter()
    items: dict = {}
    try:
        for (key, label), (path, recs) in chosen.items():
            rows = []
            for rec in recs:
                rows.append(scorer.score_item(rec))  # every method's score: Q2, Q2_no_nli, e2e_nli, overlap
                bar.update()
            items[(key, label)] = rows
            if out is not None:
                text = "".join(json.dumps(it, ensure_ascii=False) + "\n" for it in rows)
                atomic_write_text(out / "q2-wow" / f"{key}_{label}.q2.jsonl", text)
    finally:
        bar.close()
    report = _report(items, limit, scorer, time.perf_counter() - t0)
    if out is not None:
        atomic_write_json(out / "q2-wow" / "report.json", report)
        atomic_write_text(out / "q2-wow" / "report.txt", format_report(report))
    return report


def _report(items: dict, limit, scorer, seconds: float) -> dict:
    groups = []
    for (key, label), rows in items.items():
        ok = [r for r in rows if r["status"] == "ok"]
        groups.append({"system": key, "label": label, "n": len(ok),
                       **{s: mean([r.get(s) for r in ok]) for s, _ in SCORES},
                       "no_valid_question_share": mean([1.0 if r["no_valid_question"] else 0.0 for r in ok]),
                       "paper_Q2": PAPER_MEANS[(key, label)]})
    classes = {}
    for scope in ("all", *[k for k, _ in SYSTEMS]):
        rows = [(r, label == "consistent") for (key, label), rs in items.items() for r in rs
                if r["status"] == "ok" and scope in ("all", key)]
        classes[scope] = {s: classification([(r[s], c) for r, c in rows if r.get(s) is not None]) for s, _ in SCORES}
    n = sum(g["n"] for g in groups)
    spent = method_seconds(scorer.timer.seconds, scorer.options.no_nli_gets_fallback)
    methods = {s: {"label": label, "accuracy": classes["all"][s]["accuracy"],
                   "accuracy_ci95": classes["all"][s]["accuracy_ci95"], "auc": classes["all"][s]["auc"],
                   "auc_ci95": classes["all"][s]["auc_ci95"],
                   "seconds_per_response": round(spent[s] / n, 4) if n else None} for s, label in SCORES}
    sample = (f"first {limit} rows per file by sha256 of response+knowledge" if limit is not None
              else "all rows")
    return {"dataset": "q2-wow", "sample": sample, "limit": limit, "n_responses": n, "threshold": THRESHOLD,
            "methods": methods, "groups": groups, "classification": classes, "paper": {"means": {f"{k}/{l}": v for (k, l), v in
                                                                              PAPER_MEANS.items()},
                                                                    "accuracy": PAPER_ACCURACY},
            **scorer.describe(),
            "timings": {"total_s": round(seconds, 3), "responses_per_s": round(n / seconds, 4) if seconds else None,
                        "stages_s": {k: round(v, 3) for k, v in scorer.timer.seconds.items()}},
            "cache": {"hits": scorer.cache.hits, "misses": scorer.cache.misses}}


def _f(v, pct=False) -> str:
    if v is None:
        return "—"
    return f"{v:.1f}%" if pct else f"{v:.3f}"


def _ci(ci, pct=False) -> str:
    if not ci:
        return "—"
    return f"{ci[0]:.1f}–{ci[1]:.1f}%" if pct else f"{ci[0]:.3f}–{ci[1]:.3f}"


def format_report(report: dict) -> str:
    """The report as text, in the paper's layout, our numbers beside the paper's."""
    names = dict(SYSTEMS)
    lines = [f"Q² meta-evaluation on q2-wow — sample: {report['sample']}; {report['n_responses']} responses",
             "Backends: " + ", ".join(f"{r} {d['backend']}:{d['name']}" for r, d in report["backends"].items()),
             "",
             f"Methods, all responses (accuracy at threshold {report['threshold']}; AUC for the consistent class)",
             f"{'method':<10} {'acc':>7} {'95% interval':>14} {'paper':>7} {'AUC':>6} {'95% interval':>13} {'s/resp':>8}"]
    for s, label in SCORES:
        m = report["methods"][s]
        sec = "—" if m["seconds_per_response"] is None else f"{m['seconds_per_response']:.3f}"
        lines.append(f"{label:<10} {_f(m['accuracy'], True):>7} {_ci(m['accuracy_ci95'], True):>14} "
                     f"{_f(PAPER_ACCURACY[s], True):>7} {_f(m['auc']):>6} {_ci(m['auc_ci95']):>13} {sec:>8}")
    lines += ["",
              "Mean score per system and label",
              f"{'system':<8} {'label':<13} {'n':>4} {'Q2':>7} {'paper':>7} {'Q2 noNLI':>9} {'E2E NLI':>8} "
              f"{'overlap':>8} {'no valid Q':>11}"]
    for g in report["groups"]:
        lines.append(f"{names[g['system']]:<8} {g['label']:<13} {g['n']:>4} {_f(g['Q2']):>7} {_f(g['paper_Q2']):>7} "
                     f"{_f(g['Q2_no_nli']):>9} {_f(g['e2e_nli']):>8} {_f(g['overlap']):>8} "
                     f"{_f(None if g['no_valid_question_share'] is None else 100 * g['no_valid_question_share'], True):>11}")
    lines += ["",
              f"Response-level classification at threshold {report['threshold']} (inconsistent iff score <= "
              f"{report['threshold']}); grounded = consistent",
              f"{'scope':<7} {'metric':<10} {'n':>4} {'acc':>7} {'95% interval':>14} {'paper':>7} {'AUC':>6} "
              f"{'grnd P':>7} {'grnd R':>7} {'ungr P':>7} {'ungr R':>7}"]
    for scope, per in report["classification"].items():
        for s, label in SCORES:
            c = per[s]
            paper = PAPER_ACCURACY[s] if scope == "all" else None
            lines.append(f"{names.get(scope, scope):<7} {label:<10} {c['n']:>4} {_f(c['accuracy'], True):>7} "
                         f"{_ci(c.get('accuracy_ci95'), True):>14} {_f(paper, True):>7} {_f(c['auc']):>6} "
                         f"{_f(c['grounded_precision'], True):>7} {_f(c['grounded_recall'], True):>7} "
                         f"{_f(c['ungrounded_precision'], True):>7} {_f(c['ungrounded_recall'], True):>7}")
    t = report["timings"]
    lines += ["", f"{t['total_s']:.0f} s, {t['responses_per_s']} responses/s; cache hits {report['cache']['hits']}, "
                  f"misses {report['cache']['misses']}"]
    return "\n".join(lines)
