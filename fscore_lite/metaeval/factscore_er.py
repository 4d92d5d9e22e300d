"""The estimator's error rate against human FActScores (the paper's ER), and per-fact F1.

Over the annotated bios whose topic has Wikipedia text in ``DATA/wiki-*/pages.jsonl``: build
(or reuse) a store from that text, score each subject's responding bios with the given
``model-atomic-facts`` and no length penalty, and compare with the human FActScore of the same
bios. Per-fact quality: the human atomic facts labelled S or NS are verified too, and F1 of
predicting NS is reported (the paper's F1-micro). A model-free floor — a fact is supported
when ≥ 80% of its content words occur in the page — is printed beside it on request.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..build_step import ensure_store
from ..errors import FscoreError
from ..io import atomic_write_text
from ..settings import Settings
from ..stats import f1_not_supported, f1_ns_ci, signed_error_ci
from ..training.labeled import SUBJECTS, AnnotatedBio, human_fact_labels, load_subject, wiki_pages
from ..training.labeled import fixed_sample as sample  # noqa: F401  (re-exported: meta-eval's fixed sample)

RANKING = ("InstructGPT", "ChatGPT", "PerplexityAI")  # the paper's order, worst to best


def ranking_preserved(estimates: dict[str, float]) -> bool | None:
    """Whether subjects ordered by estimate (``{subject: estimate}``, ties in the given order)
    follow :data:`RANKING`; None with fewer than two of its subjects."""
    order = sorted(estimates, key=lambda s: estimates[s])
    present = [s for s in RANKING if s in order]
    return order == present if len(present) > 1 else None




_WORD = re.compile(r"[A-Za-z0-9]+")
_STOP = set("a an the of in on at to for and or is was were are be been by with as from that this it its "
            "his her he she they their has have had also".split())


def overlap_supported(fact: str, page: str, threshold: float = 0.8) -> bool:
    """The model-free floor: ≥ 80% of the fact's content words occur in the page."""
    words = [w.lower() for w in _WORD.findall(fact) if w.lower() not in _STOP]
    if not words:
        return True
    vocab = {w.lower() for w in _WORD.findall(page)}
    return sum(w in vocab for w in words) / len(words) >= threshold


@dataclass
class SubjectResult:
    subject: str
    n_bios: int
    human: float
    estimated: float
    n_facts: int
    f1_ns: float | None
    n_human_facts: int
    baseline_estimated: float | None = None
    baseline_f1_ns: float | None = None
    signed_error_ci95: list[float] | None = None
    f1_ns_ci95: list[float] | None = None

    @property
    def error_rate(self) -> float:
        return abs(self.estimated - self.human)


def format_f1_cis(rows: list[dict]) -> str | None:
    """One line: each subject's F1(NS) with its 95% interval over resampled topics."""
    parts = [f"{r['subject']} {100 * r['f1_ns']:.1f} [{100 * r['f1_ns_ci95'][0]:.1f}, {100 * r['f1_ns_ci95'][1]:.1f}]"
             for r in rows if r.get("f1_ns_ci95") and r.get("f1_ns") is not None]
    return "F1(NS), with its 95% interval over resampled topics: " + " · ".join(parts) if parts else None


def format_error_cis(rows: list[dict]) -> str | None:
    """One line: each subject's signed error with its 95% interval over resampled topics."""
    parts = [f"{r['subject']} {r['estimated'] - r['human']:+.1f} [{r['signed_error_ci95'][0]:+.1f}, "
             f"{r['signed_error_ci95'][1]:+.1f}]" for r in rows if r.get("signed_error_ci95")]
    if not parts:
        return None
    return "estimate − human, with its 95% interval over resampled topics: " + " · ".join(parts)


def _human_sn_facts(bio: AnnotatedBio) -> list[tuple[str, bool]]:
    return [(f.text, f.label == "S") for s in bio.sentences or () if s.is_relevant
            for f in s.human_facts if f.label in ("S", "NS")]


def run_er(data, settings: Settings, mode: str = "parity", subjects=None, limit=None, store=None,
           out: Path = Path("out/meta-eval"), chat_template=False, context_budget=2048, baseline=False,
           per_fact: bool = True, progress: bool = True, verifier: str = "llm", report: Path | None = None) -> dict:
    """Score each subject's annotated bios; with ``report``, also write the HTML report of the
    estimated runs with the human FActScore of the same bios beside each."""
    from ..factscore.pipeline import FactScorer, ScoreOptions, score_file

    pages, files = wiki_pages(data)
    store_path = ensure_store(files, settings, Path(store) if store else None)
    settings = settings.with_(store=store_path)
    options = ScoreOptions(mode=mode, gamma=0, chat_template=chat_template, context_budget=context_budget,
                           progress=progress, verifier=verifier)
    scorer = FactScorer(settings, options)
    seen = trained_topics_note(scorer, set(pages))
    out = Path(out)
    results: list[SubjectResult] = []
    runs: list[Path] = []  # the estimated runs, for the report
    for subject in subjects or SUBJECTS:
        if subject not in SUBJECTS:
            raise FscoreError(f"unknown subject {subject!r}; choose from {', '.join(SUBJECTS)}")
        bios = [b for b in load_subject(data, subject) if b.responded and b.topic in pages and b.model_facts()]
        bios = sample(bios, limit)
        tag = (f"{subject}-{scorer.verifier.kind}" if scorer.verifier.name is not None else
               f"{subject}-{mode}{'-chat' if chat_template else ''}")
        inp = out / f"er-{tag}.input.jsonl"
        atomic_write_text(inp, "".join(json.dumps({"topic": b.topic, "facts": b.model_facts(), "bio_line": b.line})
                                       + "\n" for b in bios))
        score_file(inp, out / f"er-{tag}.jsonl", settings, options, resume=True, scorer=scorer)
        runs.append(out / f"er-{tag}.jsonl")
        scored = [json.loads(x) for x in (out / f"er-{tag}.jsonl").read_text().splitlines()]
        ok = [(b, r) for b, r in zip(bios, scored) if r["status"] == "ok"]
        human = [sum(human_fact_labels(b)) / len(human_fact_labels(b)) for b, _ in ok]
        est = [r["init_score"] for _, r in ok]
        res = SubjectResult(subject, len(ok), 100 * sum(human) / len(human), 100 * sum(est) / len(est),
                            sum(r["num_facts"] for _, r in ok), None, 0)
        res.signed_error_ci95 = signed_error_ci(est, human, [b.topic for b, _ in ok])
        sn = [(b, _human_sn_facts(b)) for b, _ in ok]
        labels = [lab for _, fs in sn for _, lab in fs]
        res.n_human_facts = len(labels)
        if per_fact and labels:
            inp2 = out / f"er-{tag}.human-facts.input.jsonl"
            atomic_write_text(inp2, "".join(json.dumps({"topic": b.topic, "facts": [t for t, _ in fs]}) + "\n"
                                            for b, fs in sn if fs))
            score_file(inp2, out / f"er-{tag}.human-facts.jsonl", settings, options, resume=True, scorer=scorer)
            preds = [d["is_supported"] for x in (out / f"er-{tag}.human-facts.jsonl").read_text().splitlines()
                     for d in (json.loads(x).get("decisions") or [])]
            if len(preds) == len(labels):
                res.f1_ns = f1_not_supported(preds, labels)
                res.f1_ns_ci95 = f1_ns_ci(preds, labels, [b.topic for b, fs in sn for _ in fs])
        if baseline:
            b_est = [sum(overlap_supported(f, pages[b.topic]) for f in b.model_facts()) / len(b.model_facts())
                     for b, _ in ok]
            res.baseline_estimated = 100 * sum(b_est) / len(b_est)
            b_pred = [overlap_supported(t, pages[b.topic]) for b, fs in sn for t, _ in fs]
            res.baseline_f1_ns = f1_not_supported(b_pred, labels)
        results.append(res)
    report_path = None
    if report is not None:
        from ..report import write_report

        report_path = str(write_report(runs, report, human=data,
                                       title="FActScore estimator vs human annotation"))
    return {
        "note": seen, "verifier": scorer.verifier.kind, "verifier_model": scorer.verifier.name,
        "mode": mode, "limit": limit, "store": str(store_path), "llm": scorer.llm.name if scorer.llm_loaded else None,
        "prompt_style": "chat-template" if chat_template else "completion",
        "subjects": [r.__dict__ | {"error_rate": r.error_rate} for r in results],
        "ranking_preserved": ranking_preserved({r.subject: r.estimated for r in results}),
        "llm_calls": scorer.llm.stats.__dict__ if scorer.llm_loaded else {},
        "verification_s": scorer.timings.verification,
        "facts_verified": scorer.timings.facts_verified,
        **({"report": report_path} if report_path else {}),
    }


def trained_topics_note(scorer, topics: set[str]) -> str | None:
    """With the trained verifier: how many of ``topics`` it was trained on (those estimates are
    in-sample, hence optimistic)."""
    if scorer.verifier.name is None:
        return None
    trained = set(scorer.bundle.get(scorer.verifier.name).extra.get("training", {}).get("topics", []))
    both = len(trained & topics)
    if not both:
        return f"none of these {len(topics)} topics were seen by the installed verifier in training"
    return (f"WARNING: {both} of these {len(topics)} topics are topics the installed verifier was trained on: "
            "these estimates are in-sample (optimistic); use --cv K for held-out topics")


def format_report(report: dict) -> str:
    judge = (f"verifier {report['verifier_model']} (trained)" if report.get("verifier_model") else
             f"mode {report['mode']}, llm {report['llm']}, prompts {report['prompt_style']}")
    lines = ([report["note"]] if report.get("note") else []) + [
             f"FActScore estimator error rate — {judge}, limit {report['limit'] or 'none'} bios/subject",
             f"{'subject':<14}{'bios':>5}{'human':>8}{'est':>8}{'ER':>7}{'F1(NS)':>8}{'facts':>7}{'hfacts':>8}"
             f"{'floor ER':>10}{'floor F1':>10}"]
    for r in report["subjects"]:
        f1 = f"{100 * r['f1_ns']:.1f}" if r["f1_ns"] is not None else "-"
        ber = f"{abs(r['baseline_estimated'] - r['human']):.1f}" if r["baseline_estimated"] is not None else "-"
        bf1 = f"{100 * r['baseline_f1_ns']:.1f}" if r["baseline_f1_ns"] is not None else "-"
        lines.append(f"{r['subject']:<14}{r['n_bios']:>5}{r['human']:>8.1f}{r['estimated']:>8.1f}{r['error_rate']:>7.1f}"
                     f"{f1:>8}{r['n_facts']:>7}{r['n_human_facts']:>8}{ber:>10}{bf1:>10}")
    lines += [x for x in (format_error_cis(report["subjects"]), format_f1_cis(report["subjects"])) if x]
    lines.append(f"ranking InstructGPT < ChatGPT < PerplexityAI preserved: {report['ranking_preserved']}")
    calls = report.get("llm_calls") or {}
    if report["facts_verified"]:
        lines.append(f"verified {report['facts_verified']} facts in {report['verification_s']:.1f} s; "
                     f"{calls.get('cached_calls', 0)} of {calls.get('calls', 0)} LLM calls served from the cache")
    return "\n".join(lines)
