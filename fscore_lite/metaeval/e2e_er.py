"""``meta-eval factscore-er --facts generated``: the number a user gets, end to end.

Each annotated bio's ``output`` goes through ``score``'s own fact generation (the local LLM,
every call in the call cache, so an interrupted run resumes where it stopped), its facts are
verified, and the bio's estimate is compared with the human FActScore of the same bio. The
paper's facts of the same bios are scored beside them, so the own − paper difference is
paired by bio.

With ``--cv K`` (trained verifier) every bio is scored by the fold combiner that never saw
its topic — fitted, as today, on the human facts and the paper's facts of the other folds'
topics (calibration on the own facts of the training bios is not part of it: the summary
says ``calibrated_on: paper facts``).

Estimates per subject follow ``score``'s aggregate (:func:`fscore_lite.factscore.score.adjusted_aggregate`):
the PACC correction applied once to the subject's mean, not to each bio; the per-bio mean
absolute error is of each bio's readable score (its facts' mean probability).
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import FscoreError
from ..factscore.fact_filters import degenerate_counts
from ..training.labeled import SUBJECTS, AnnotatedBio


def generate_own_facts(bios: list[AnnotatedBio], generator, progress: bool = True) -> list[list[str]]:
    """Each bio's facts from ``score``'s generator (cached LLM calls: a rerun costs no decoding)."""
    from ..progress import Progress

    bar = Progress(len(bios), "own facts", enabled=progress)
    out = []
    for b in bios:
        out.append([f for s in generator.run(b.output) for f in s.facts])
        bar.advance(note=b.topic[:30])
    bar.close()
    return out


def human_fact_count(bio: AnnotatedBio) -> int:
    return sum(len(s.human_facts) for s in bio.sentences or ())


def degenerate_share(fact_lists: list[list[str]]) -> tuple[float | None, dict[str, int]]:
    """The share of facts that are loops, fragments, duplicates or keep citations, and the counts by kind."""
    kinds: dict[str, int] = {}
    for facts in fact_lists:
        for k, n in degenerate_counts(facts).items():
            kinds[k] = kinds.get(k, 0) + n
    total = sum(len(f) for f in fact_lists)
    return (sum(kinds.values()) / total if total else None), dict(sorted(kinds.items()))


def bio_scores(comb, probs: np.ndarray) -> dict:
    """One bio's scores from its facts' probabilities under ``comb``: readable (mean probability),
    decisions (share above the threshold), PACC unclipped (what the aggregate averages) and clipped."""
    from ..factscore.score import pacc_unclipped

    probs = np.asarray(probs, dtype=np.float64)
    mean_p = float(probs.mean())
    raw = pacc_unclipped(mean_p, comb.p_supported, comb.p_not_supported) if comb.adjusts else None
    decided = float(np.mean(probs > comb.threshold))
    return {"readable": mean_p, "decisions": decided, "pacc": raw if raw is not None else decided,
            "pacc_clipped": min(1.0, max(0.0, raw)) if raw is not None else decided}


def subject_rows(bios: list[AnnotatedBio], human: list[float], own: list[dict], paper: list[dict],
                 own_facts: list[list[str]]) -> list[dict]:
    """Per subject: human, estimates (own and paper facts), ER, per-bio MAE, facts per response,
    degenerate shares, the paired own − paper difference with its interval over topics."""
    from ..stats import signed_error_ci

    rows = []
    for subject in dict.fromkeys(b.subject for b in bios):
        idx = [i for i, b in enumerate(bios) if b.subject == subject and own[i] is not None]
        if not idx:
            continue
        topics = [bios[i].topic for i in idx]
        h = [human[i] for i in idx]
        row = {"subject": subject, "n_bios": len(idx),
               "n_no_own_facts": sum(1 for i, b in enumerate(bios) if b.subject == subject and own[i] is None),
               "human": 100 * float(np.mean(h))}
        for kind, res in (("own", own), ("paper", paper)):
            raw = [res[i]["pacc"] for i in idx]
            est = 100 * min(1.0, max(0.0, float(np.mean(raw))))
            row[kind] = {"estimated": est, "error_rate": abs(est - row["human"]),
                         "signed_error_ci95": signed_error_ci(raw, h, topics),
                         "per_bio_mae": 100 * float(np.mean([abs(res[i]["readable"] - hh) for i, hh in zip(idx, h)])),
                         "per_bio_mae_pacc_clipped": 100 * float(np.mean([abs(res[i]["pacc_clipped"] - hh)
                                                                          for i, hh in zip(idx, h)])),
                         "estimated_by_decisions": 100 * float(np.mean([res[i]["decisions"] for i in idx])),
                         "mean_readable": 100 * float(np.mean([res[i]["readable"] for i in idx]))}
        own_lists = [own_facts[i] for i in idx]
        paper_lists = [bios[i].model_facts() for i in idx]
        row["facts_per_response"] = {"own": float(np.mean([len(f) for f in own_lists])),
                                     "paper": float(np.mean([len(f) for f in paper_lists])),
                                     "human": float(np.mean([human_fact_count(bios[i]) for i in idx]))}
        row["degenerate_share"], row["degenerate_kinds"] = degenerate_share(own_lists)
        row["paper_degenerate_share"], _ = degenerate_share(paper_lists)
        row["own_minus_paper"] = {
            "difference": 100 * float(np.mean([own[i]["pacc"] - paper[i]["pacc"] for i in idx])),
            "ci95": signed_error_ci([own[i]["pacc"] for i in idx], [paper[i]["pacc"] for i in idx], topics)}
        rows.append(row)
    return rows


def run_e2e_cv(data, settings, folds: int = 5, limit: int | None = None, subjects=SUBJECTS,
               decomposer: str = "default", progress: bool = True, llm=None) -> dict:
    """Held-out end-to-end ER: own facts of a fixed sample of bios per subject, each verified by
    the trained verifier's fold combiner that never saw its topic; the paper's facts beside them."""
    from ..backends.llm import load_llm
    from ..cache import CallCache
    from ..factscore.atomic_facts import AtomicFactGenerator, describe_settings
    from ..factscore.combiner import Combiner
    from ..manifest import Bundle
    from ..store import open_store
    from .factscore_er import ensure_store, ranking_preserved
    from ..training.labeled import wiki_pages
    from .stack_er import fold_combiners, held_out_bios
    from ..training.combiner_cv import cross_validate
    from ..training.examples import Examples, Fact, featurise, load_examples, use_recorded_scores, worker_pool

    if folds < 2:
        raise FscoreError(f"--cv needs at least 2 folds, not {folds}")
    t0 = time.monotonic()
    pages, files = wiki_pages(data)
    ex = load_examples(data, pages, subjects)
    if len(ex.topics) < folds:
        raise FscoreError(f"{len(ex.topics)} topics with pages and labels under {data}: too few for {folds} folds")
    cache = CallCache(settings.cache_path if settings.use_cache else None)
    chosen = held_out_bios(ex, limit, subjects)
    llm = llm if llm is not None else load_llm(settings, Bundle(settings.models_dir), cache)
    generator = AtomicFactGenerator(llm, decomposer=decomposer)
    t_gen = time.monotonic()
    # first, so that the slow part is in the call cache even when the verifier is still missing
    own_lists = generate_own_facts([ex.bios[i] for i in chosen], generator, progress)
    gen_s = time.monotonic() - t_gen

    store_path = ensure_store(files, settings, None)
    bundle = Bundle(settings.models_dir)
    entry = bundle.first_for_role("verifier")
    if entry is None or "combiner" not in entry.extra:
        raise FscoreError(f"no trained verifier in {bundle.manifest_path}: run `fscore-lite models train verifier` first")
    store = open_store(store_path)
    pool = worker_pool(bundle, store, entry, cache, settings.threads, int(entry.extra.get("k", 5)),
                       int(entry.extra.get("window_tokens", 64)), int(entry.extra.get("ce_passages", 2)))
    own_ex = Examples(ex.bios, [], [Fact(ex.bios[i].topic, f, i, None) for i, fs in zip(chosen, own_lists) for f in fs],
                      ex.human_share)
    featurise(ex, *pool[0], None, more=pool[1:])
    featurise(own_ex, *pool[0], None, more=pool[1:])
    use_recorded_scores(ex, bundle, entry)
    use_recorded_scores(own_ex, bundle, entry)  # refuses own facts of topics its cross-encoder trained on
    names = tuple(entry.extra["combiner"]["features"])
    l2 = float(entry.extra.get("training", {}).get("config", {}).get("l2", 1.0))
    adjust = Combiner.from_json(entry.extra["combiner"]).adjusts
    oof = cross_validate(ex, names, folds, l2, adjust=adjust)
    by_fold = fold_combiners(oof)

    own_rows: dict[int, list[dict]] = {}
    for f, row in zip(own_ex.model, own_ex.features["model"]):
        own_rows.setdefault(f.bio, []).append(row)
    paper_rows: dict[int, list[dict]] = {}
    for f, row in zip(ex.model, ex.features["model"]):
        paper_rows.setdefault(f.bio, []).append(row)
    bios = [ex.bios[i] for i in chosen]
    own, paper = [], []
    for i in chosen:
        comb = by_fold[oof.folds[ex.bios[i].topic]]
        rows = own_rows.get(i)
        own.append(bio_scores(comb, comb.probability(comb.matrix(rows))) if rows else None)
        paper.append(bio_scores(comb, comb.probability(comb.matrix(paper_rows[i]))))
    table = subject_rows(bios, [ex.human_share[i] for i in chosen], own, paper, own_lists)
    return {"folds": folds, "facts": "generated", "decomposer": decomposer,
            "atomic_facts": describe_settings(False, decomposer), "llm": llm.name, "llm_sha256": llm.sha256,
            "verifier": entry.name, "verifier_sha256": entry.sha256, "calibrated_on": "paper facts",
            "limit": limit, "topics": len(ex.topics), "bios": len(chosen), "threads": settings.threads,
            "subjects": table,
            "ranking_preserved": {k: ranking_preserved({r["subject"]: r[k]["estimated"] for r in table})
                                  for k in ("own", "paper")},
            "per_bio": [{"subject": b.subject, "topic": b.topic, "line": b.line, "human": 100 * ex.human_share[i],
                         "own_facts": fs, "own": o, "paper": p}
                        for i, b, fs, o, p in zip(chosen, bios, own_lists, own, paper)],
            "generation_s": round(gen_s, 1), "llm_calls": llm.stats.__dict__,
            "total_s": round(time.monotonic() - t0, 1)}


def _ci(ci) -> str:
    return f"[{ci[0]:+.1f}, {ci[1]:+.1f}]" if ci else "[-]"


def format_e2e_report(report: dict) -> str:
    sample = f"a fixed sample of {report['limit']} bios per subject" if report["limit"] else "every bio"
    head = (f"held-out topics: {report['folds']}-fold topic-grouped CV over {report['topics']} topics"
            if report.get("folds") else "no cross-validation (the installed verifier, or the LM judge fitted on no topic)")
    lines = ([report["note"]] if report.get("note") else []) + [
             f"{head}; own facts by {report['llm']} ({report['llm_sha256'][:12]}), decomposer {report['decomposer']}; "
             f"verifier {report['verifier']}, calibrated on {report['calibrated_on']}; {sample}: {report['bios']} bios",
             "estimate = the aggregate PACC (the mean of per-bio unclipped PACC, clipped once); "
             "MAE = per-bio mean |readable score (mean probability) − human|",
             f"{'subject':<13}{'bios':>5}{'human':>7} | {'own':>6}{'ER':>6}{'MAE':>6} | {'paper':>6}{'ER':>6}{'MAE':>6} | "
             f"{'facts own/paper/human':>22} | {'degen own/paper':>16}"]
    for r in report["subjects"]:
        o, p, n = r["own"], r["paper"], r["facts_per_response"]
        dg = lambda x: f"{100 * x:.1f}%" if x is not None else "-"  # noqa: E731
        lines.append(f"{r['subject']:<13}{r['n_bios']:>5}{r['human']:>7.1f} | {o['estimated']:>6.1f}{o['error_rate']:>6.1f}"
                     f"{o['per_bio_mae']:>6.1f} | {p['estimated']:>6.1f}{p['error_rate']:>6.1f}{p['per_bio_mae']:>6.1f} | "
                     f"{n['own']:>8.1f}/{n['paper']:.1f}/{n['human']:.1f}{'':>4} | "
                     f"{dg(r['degenerate_share']):>7}/{dg(r['paper_degenerate_share'])}")
    lines.append("own − human, 95% interval over resampled topics: " + " · ".join(
        f"{r['subject']} {r['own']['estimated'] - r['human']:+.1f} {_ci(r['own']['signed_error_ci95'])}"
        for r in report["subjects"]))
    lines.append("own − paper on the same bios, 95% interval over resampled topics: " + " · ".join(
        f"{r['subject']} {r['own_minus_paper']['difference']:+.1f} {_ci(r['own_minus_paper']['ci95'])}"
        for r in report["subjects"]))
    kinds = {k: sum(r["degenerate_kinds"].get(k, 0) for r in report["subjects"])
             for k in ("loop", "fragment", "duplicate", "citation")}
    lines.append("degenerate own facts by kind: " + ", ".join(f"{k} {v}" for k, v in kinds.items()))
    skipped = sum(r["n_no_own_facts"] for r in report["subjects"])
    if skipped:
        lines.append(f"{skipped} bios got no own facts (status no_facts in score) and are left out of both columns")
    rp = report["ranking_preserved"]
    lines.append(f"ranking InstructGPT < ChatGPT < PerplexityAI preserved: own {rp['own']}, paper {rp['paper']}")
    lines.append(f"fact generation {report['generation_s']:.0f} s at {report['threads']} thread(s); total "
                 f"{report['total_s']:.0f} s")
    return "\n".join(lines)


def record_scores(rec: dict) -> dict | None:
    """A scored record's per-bio scores (as :func:`bio_scores`); None when it got no facts."""
    if rec.get("status") != "ok":
        return None
    readable = float(rec["init_score"])
    raw = rec.get("pacc_share_unclipped")
    decided = float(np.mean([d["is_supported"] for d in rec["decisions"]]))
    pacc = float(raw) if raw is not None else readable
    return {"readable": readable, "decisions": decided, "pacc": pacc, "pacc_clipped": min(1.0, max(0.0, pacc))}


def run_e2e(data, settings, subjects=None, limit=None, store=None, out="out/meta-eval", verifier: str = "trained",
            decomposer: str = "default", mode: str = "parity", chat_template: bool = False,
            context_budget: int = 2048, progress: bool = True, llm=None) -> dict:
    """End-to-end ER with the installed verifier (no CV): each subject's sampled bios scored by
    ``score`` twice, from their ``output`` (own facts) and from the paper's facts, no length penalty;
    both runs resume (``score --resume``) and every LLM call is cached."""
    import json
    from pathlib import Path

    from ..factscore.pipeline import FactScorer, ScoreOptions, score_file
    from ..io import atomic_write_text
    from .factscore_er import ensure_store, ranking_preserved, sample, trained_topics_note
    from ..training.labeled import wiki_pages
    from .factscore_human import human_score
    from ..training.labeled import load_subject

    t0 = time.monotonic()
    pages, files = wiki_pages(data)
    store_path = ensure_store(files, settings, Path(store) if store else None)
    settings = settings.with_(store=store_path)
    options = ScoreOptions(mode=mode, gamma=0, chat_template=chat_template, context_budget=context_budget,
                           progress=progress, verifier=verifier, decomposer=decomposer)
    scorer = FactScorer(settings, options, llm=llm)
    note = trained_topics_note(scorer, set(pages))
    out = Path(out)
    bios, own, paper, own_lists, human = [], [], [], [], []
    t_gen = 0.0
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
            score_file(inp, inp.with_name(inp.name.replace(".input", "")), settings, options, resume=True, scorer=scorer)
            t_gen += scorer.timings.atomic_facts - before
            runs[kind] = [json.loads(x) for x in inp.with_name(inp.name.replace(".input", "")).read_text().splitlines()]
        for b, o, p in zip(chosen, runs["own"], runs["paper"]):
            if p.get("status") != "ok":
                continue
            bios.append(b)
            own.append(record_scores(o))
            paper.append(record_scores(p))
            own_lists.append([d["atom"] for d in o.get("decisions") or []])
            human.append(human_score(b))
    table = subject_rows(bios, human, own, paper, own_lists)
    llm = scorer.llm
    return {"folds": None, "facts": "generated", "decomposer": decomposer, "note": note,
            "atomic_facts": scorer.describe()["settings"]["atomic_facts"], "llm": llm.name, "llm_sha256": llm.sha256,
            "verifier": scorer.verifier.name if scorer.verifier.name is not None else f"llm judge ({mode})",
            "calibrated_on": "paper facts" if scorer.verifier.name is not None else "nothing (LM judge)",
            "limit": limit, "topics": len({b.topic for b in bios}), "bios": len(bios), "threads": settings.threads,
            "subjects": table,
            "ranking_preserved": {k: ranking_preserved({r["subject"]: r[k]["estimated"] for r in table})
                                  for k in ("own", "paper")},
            "generation_s": round(t_gen, 1), "llm_calls": llm.stats.__dict__, "total_s": round(time.monotonic() - t0, 1)}
