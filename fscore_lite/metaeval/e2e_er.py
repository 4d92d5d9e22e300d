"""``meta-eval factscore-er --facts generated`` (no ``--cv``): the number a user gets, end to end.

Each subject's sampled bios go through ``score`` twice, as two runs: from their ``output`` (the
product's own facts, every LLM call cached, so an interrupted run resumes) and from the paper's
facts, no length penalty. Each run's ``score`` is compared with the human FActScore of the same
bios, and the own − paper difference is paired by bio. With the trained verifier and the
development topics this is in-sample (the verifier was fitted on them): ``--cv K`` holds them out
(:mod:`.heldout`).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from ..errors import FscoreError
from ..factscore.fact_filters import degenerate_counts
from ..training.labeled import SUBJECTS, AnnotatedBio


def human_fact_count(bio: AnnotatedBio) -> int:
    return sum(len(s.human_facts) for s in bio.sentences or ())


def degenerate_share(fact_lists: list[list[str]]) -> tuple[float | None, dict[str, int]]:
    """The share of facts that are loops, fragments, duplicates, echoes of the prompt or keep citations,
    and the counts by kind."""
    kinds: dict[str, int] = {}
    for facts in fact_lists:
        for k, n in degenerate_counts(facts).items():
            kinds[k] = kinds.get(k, 0) + n
    total = sum(len(f) for f in fact_lists)
    return (sum(kinds.values()) / total if total else None), dict(sorted(kinds.items()))


def subject_row(subject: str, bios: list[AnnotatedBio], human: list[float], own: list[dict], paper: list[dict]) -> dict:
    """One subject's runs: human, the own-facts and the paper-facts run's score (×100), per-bio MAE,
    facts per response, degenerate own facts, and own − paper paired by bio with its interval over topics."""
    from ..stats import signed_error_ci

    topics = [b.topic for b in bios]
    row = {"subject": subject, "n_bios": len(bios), "human": 100 * float(np.mean(human))}
    for kind, recs in (("own", own), ("paper", paper)):
        scores = [float(r["init_score"]) for r in recs]
        est = 100 * float(np.mean(scores))
        row[kind] = {"estimate": est, "er": abs(est - row["human"]),
                     "per_bio_mae": 100 * float(np.mean(np.abs(np.subtract(scores, human)))),
                     "error_ci95": signed_error_ci(scores, human, topics)}
    own_lists = [[d["atom"] for d in r["decisions"]] for r in own]
    row["facts_per_response"] = {"own": float(np.mean([len(f) for f in own_lists])),
                                 "paper": float(np.mean([len(b.model_facts()) for b in bios])),
                                 "human": float(np.mean([human_fact_count(b) for b in bios]))}
    row["degenerate_share"], row["degenerate_kinds"] = degenerate_share(own_lists)
    o, p = [float(r["init_score"]) for r in own], [float(r["init_score"]) for r in paper]
    row["own_minus_paper"] = {"difference": 100 * float(np.mean(np.subtract(o, p))),
                              "ci95": signed_error_ci(o, p, topics)}
    return row


def run_e2e(data, settings, subjects=None, limit=None, store=None, out="out/meta-eval", verifier: str = "trained",
            decomposer: str = "default", mode: str = "parity", chat_template: bool = False,
            context_budget: int = 2048, progress: bool = True, llm=None) -> dict:
    """Both runs per subject (see the module docstring); both resume (``score --resume``)."""
    from ..factscore.pipeline import FactScorer, ScoreOptions, score_file
    from ..io import atomic_write_text
    from ..training.labeled import load_subject, wiki_pages
    from .factscore_er import ensure_store, ranking_preserved, sample, trained_topics_note
    from .factscore_human import human_score

    t0 = time.monotonic()
    pages, files = wiki_pages(data)
    store_path = ensure_store(files, settings, Path(store) if store else None)
    settings = settings.with_(store=store_path)
    options = ScoreOptions(mode=mode, gamma=0, chat_template=chat_template, context_budget=context_budget,
                           progress=progress, verifier=verifier, decomposer=decomposer)
    scorer = FactScorer(settings, options, llm=llm)
    note = trained_topics_note(scorer, set(pages))
    out = Path(out)
    table, t_gen, skipped = [], 0.0, 0
    for subject in subjects or SUBJECTS:
        if subject not in SUBJECTS:
            raise FscoreError(f"unknown subject {subject!r}; choose from {', '.join(SUBJECTS)}")
        chosen = sample([b for b in load_subject(data, subject) if b.responded and b.topic in pages
                         and b.model_facts()], limit)
        tag = f"{subject}-{scorer.verifier.kind}" + ("" if scorer.verifier.name is not None else f"-{mode}")
        runs = {}
        for kind, field in (("paper", None), ("own", decomposer)):
            inp = out / (f"e2e-{tag}-{kind}{'-' + field if field else ''}.input.jsonl")
            atomic_write_text(inp, "".join(json.dumps({"topic": b.topic, "bio_line": b.line} | (
                {"facts": b.model_facts()} if kind == "paper" else {"output": b.output})) + "\n" for b in chosen))
            before = scorer.timings.atomic_facts
            result = inp.with_name(inp.name.replace(".input", ""))
            score_file(inp, result, settings, options, resume=True, scorer=scorer)
            t_gen += scorer.timings.atomic_facts - before
            runs[kind] = [json.loads(x) for x in result.read_text().splitlines()]
        keep = [(b, o, p) for b, o, p in zip(chosen, runs["own"], runs["paper"])
                if p.get("status") == "ok" and o.get("status") == "ok"]
        skipped += len(chosen) - len(keep)
        if keep:
            bios, own, paper = map(list, zip(*keep))
            table.append(subject_row(subject, bios, [human_score(b) for b in bios], own, paper))
    return {"folds": None, "facts": "generated", "decomposer": decomposer, "note": note,
            "atomic_facts": scorer.describe()["settings"]["atomic_facts"], "llm": scorer.llm.name,
            "llm_sha256": scorer.llm.sha256,
            "verifier": scorer.verifier.name if scorer.verifier.name is not None else f"llm judge ({mode})",
            "limit": limit, "bios": sum(r["n_bios"] for r in table), "skipped_no_facts": skipped,
            "threads": settings.threads, "subjects": table,
            "ranking_preserved": {k: ranking_preserved({r["subject"]: r[k]["estimate"] for r in table})
                                  for k in ("own", "paper")},
            "generation_s": round(t_gen, 1), "llm_calls": scorer.llm.stats.__dict__,
            "total_s": round(time.monotonic() - t0, 1)}


def _ci(ci) -> str:
    return f"[{ci[0]:+.1f}, {ci[1]:+.1f}]" if ci else "[-]"


def format_e2e_report(report: dict) -> str:
    sample = f"a fixed sample of {report['limit']} bios per subject" if report["limit"] else "every bio"
    lines = ([report["note"]] if report.get("note") else []) + [
        f"no cross-validation (the installed verifier, or the LM judge); own facts by {report['llm']} "
        f"({report['llm_sha256'][:12]}), decomposer {report['decomposer']}; verifier {report['verifier']}; {sample}: "
        f"{report['bios']} bios; each subject's bios one run of score (gamma 0); MAE = per-bio mean |score − human|",
        f"{'subject':<13}{'bios':>5}{'human':>7} | {'own':>6}{'ER':>6}{'MAE':>6} | {'paper':>6}{'ER':>6}{'MAE':>6} | "
        f"{'facts own/paper/human':>22} | {'degenerate':>10}"]
    for r in report["subjects"]:
        o, p, n = r["own"], r["paper"], r["facts_per_response"]
        dg = f"{100 * r['degenerate_share']:.1f}%" if r["degenerate_share"] is not None else "-"
        lines.append(f"{r['subject']:<13}{r['n_bios']:>5}{r['human']:>7.1f} | {o['estimate']:>6.1f}{o['er']:>6.1f}"
                     f"{o['per_bio_mae']:>6.1f} | {p['estimate']:>6.1f}{p['er']:>6.1f}{p['per_bio_mae']:>6.1f} | "
                     f"{n['own']:>8.1f}/{n['paper']:.1f}/{n['human']:.1f}{'':>4} | {dg:>10}")
    lines.append("own − human, 95% interval over resampled topics: " + " · ".join(
        f"{r['subject']} {r['own']['estimate'] - r['human']:+.1f} {_ci(r['own']['error_ci95'])}"
        for r in report["subjects"]))
    lines.append("own − paper on the same bios, 95% interval over resampled topics: " + " · ".join(
        f"{r['subject']} {r['own_minus_paper']['difference']:+.1f} {_ci(r['own_minus_paper']['ci95'])}"
        for r in report["subjects"]))
    if report["skipped_no_facts"]:
        lines.append(f"{report['skipped_no_facts']} bios got no facts in one of the runs and are left out")
    rp = report["ranking_preserved"]
    lines.append(f"ranking InstructGPT < ChatGPT < PerplexityAI preserved: own {rp['own']}, paper {rp['paper']}")
    lines.append(f"fact generation {report['generation_s']:.0f} s at {report['threads']} thread(s); total "
                 f"{report['total_s']:.0f} s")
    return "\n".join(lines)
