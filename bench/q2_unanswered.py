"""``python -m bench.q2_unanswered OUT [--dev-limit 50]``: what a question the knowledge side leaves unanswered
should score.

Q² (SPEC step 5) scores a question 0 when QA on the knowledge gives no answer. This rescores a finished
``fscore-lite meta-eval q2 --out OUT`` run with other rules for those questions only, every other question
and the no-question fallback as the run has them, and judges each rule at the paper's threshold and by ROC
AUC on the ``--limit N`` sample (development) and on the other responses (held out):

* ``zero``: the paper's rule (the run's own Q²);
* ``nli``: the NLI model of the bundle's ``nli`` role on premise = the knowledge (lower-cased, as the
  fallback's), hypothesis = ``question + " " + candidate + "."``; entailment 1, neutral 0, contradiction 0;
* ``nli-graded``: the same pair, scored as the fallback maps labels (1 / 0.5 / 0);
* ``nli-half``: 0.5 on entailment, else 0;
* ``e2e``: the response's end-to-end NLI score (the whole response against the knowledge).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from bench.q2_compare import dev_keys, judged, load_run
from fscore_lite.q2.compare import ENTAILMENT, e2e_pair, e2e_score, nli_pair

RULES = {
    "zero": lambda label, record: 0.0,
    "nli": lambda label, record: 1.0 if label == ENTAILMENT else 0.0,
    "nli-graded": lambda label, record: e2e_score(label),
    "nli-half": lambda label, record: 0.5 if label == ENTAILMENT else 0.0,
    "e2e": lambda label, record: record["e2e_nli"],
}


def unanswered_pairs(record: dict) -> list[tuple[str, str]]:
    """(premise, hypothesis) of each of ``record``'s valid questions that the knowledge side left unanswered."""
    premise = e2e_pair(record["response"], record["knowledge"])[0]
    return [(premise, nli_pair(q["question"], q["candidate"], "")[1])
            for q in record.get("questions", []) if q.get("knowledge_no_answer")]


def rescored(record: dict, labels: list[str], rule) -> float:
    """``record``'s Q² with each unanswered question (in order, ``labels`` their NLI labels) scored by ``rule``."""
    questions = record.get("questions", [])
    if not questions:
        return record["Q2"]
    it = iter(labels)
    scores = [rule(next(it), record) if q.get("knowledge_no_answer") else q["score"] for q in questions]
    return sum(scores) / len(scores)


def judge(run: dict, labels: dict, keys: list, rule) -> dict:
    """Accuracy at the threshold and AUC over ``keys`` with the unanswered questions scored by ``rule``."""
    return judged([rescored(run[k][1], labels[k], rule) for k in keys], [run[k][0] for k in keys])


def nli_labels(run: dict, judge_model) -> dict:
    """key → the NLI labels of its :func:`unanswered_pairs`, in one batch."""
    pairs = {k: unanswered_pairs(rec) for k, (_, rec) in run.items()}
    flat = [p for ps in pairs.values() for p in ps]
    got = iter(judge_model.labels_many(flat) if flat else [])
    return {k: [next(got) for _ in ps] for k, ps in pairs.items()}


def load_judge(threads: int):
    from fscore_lite.cache import CallCache
    from fscore_lite.manifest import Bundle
    from fscore_lite.q2.roles import REGISTRY, RoleContext
    from fscore_lite.settings import Settings

    settings = Settings().with_(threads=threads)
    return REGISTRY[("nli", "onnx")](RoleContext(settings, Bundle(settings.models_dir), CallCache(None), "int8"))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.q2_unanswered", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path)
    p.add_argument("--dev-limit", type=int, default=50)
    p.add_argument("--threads", type=int, default=1)
    o = p.parse_args(argv)
    run = load_run(o.out)
    keys = sorted(run)
    dev = dev_keys(keys, o.dev_limit)
    parts = {"development": [k for k in keys if k in dev], "held out": [k for k in keys if k not in dev]}
    model = load_judge(o.threads)
    labels = nli_labels(run, model)
    n = sum(len(v) for v in labels.values())
    print(f"{n} unanswered questions in {sum(bool(v) for v in labels.values())} of {len(keys)} responses; "
          f"NLI {model.name}; " + ", ".join(f"{p_} {len(ks)}" for p_, ks in parts.items()) + " (accuracy / AUC)")
    for truth, side in ((True, "consistent"), (False, "inconsistent")):
        got = [label for k, ls in labels.items() if run[k][0] == truth for label in ls]
        print(f"  from {side} responses: {len(got)} questions, " + ", ".join(
            f"{sum(label == name for label in got)} {name}" for name in ("entailment", "neutral", "contradiction")))
    for name, rule in RULES.items():
        cells = []
        for part, ks in parts.items():
            j = judge(run, labels, ks, rule)
            cells.append(f"{part} {100 * j['accuracy']:5.1f}% / {j['auc']:.3f}")
        print(f"  {name:<11} " + "   ".join(cells))


if __name__ == "__main__":
    main()
