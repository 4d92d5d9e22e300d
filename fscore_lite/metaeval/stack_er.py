"""``meta-eval factscore-er --verifier llm+trained --cv K``: the stack's ER on held-out topics.

The bio-level counterpart of the fit's per-fact report (:mod:`fscore_lite.training.stack`). Both stages are
cross-validated with one topic → fold map (:func:`fscore_lite.training.examples.topic_folds`):

1. the trained combiner of fold k (fitted on the other folds' topics, PACC means from an inner
   CV) gives every fact of a fold-k topic its trained logit;
2. the stack of fold k is fitted on the human-fact sample of the other folds' topics — the same
   sample ``models train llm-combiner`` uses (every ``every``-th human fact, its margin from the
   call cache when the fit has run), their trained logits out of fold;
3. every model fact of a held-out bio gets the LLM's margin on the short window prompt, and the
   bio's estimate is the stack's PACC share over its facts.

The trained verifier alone is reported on the same bios from its own fold combiners, so the
two columns compare like with like. Margins for model facts are the slow part (seconds each
for the 1.5B model): ``--limit N`` takes a fixed sample of N bios per subject
(:func:`.factscore_er.sample`), and the call cache makes an interrupted run resume.
"""
from __future__ import annotations

import time
from collections import Counter

import numpy as np

from ..errors import FscoreError
from ..training.combiner_cv import CvResult, aggregate_estimate, bio_estimate, bio_probabilities, cross_validate
from ..training.examples import Examples
from ..training.examples import held_out_bios  # noqa: F401  (re-exported)
from ..training.labeled import SUBJECTS
from ..training.stack import (StackRows, cross_validate_stack, fit_stack_adjusted, fold_combiners, human_sample_margins,
                              human_stack_rows, llm_prompt_settings, subject_table)




def stacked_bio_estimates(ex: Examples, oof: CvResult, rows: StackRows, bios: list[int], margin_of,
                          l2: float = 1.0, progress=None) -> dict[int, float]:
    """Bio → the stack's held-out estimate. ``margin_of(topic, fact)`` gives the LLM's margin."""
    from ..factscore.stacked import logit_of

    trained = fold_combiners(oof)
    stacks = {}
    fold_of_row = np.asarray([oof.folds[t] for t in rows.topics])
    out = {}
    for i in bios:
        fold = oof.folds[ex.bios[i].topic]
        if fold not in stacks:
            train = np.flatnonzero(fold_of_row != fold)
            if len(set(rows.y[train])) < 2:
                raise FscoreError(f"fold {fold}: the human-fact sample of the other folds has one label only")
            stacks[fold] = fit_stack_adjusted(rows, train, l2)
        facts = [f for f in ex.model if f.bio == i]
        tprob = bio_probabilities(ex, trained[fold], {i})[i]
        x = []
        for f, p in zip(facts, tprob):
            x.append([logit_of(float(p)), margin_of(f.topic, f.text)])
            if progress:
                progress()
        comb = stacks[fold]
        out[i] = bio_estimate(comb, comb.probability(np.asarray(x, dtype=np.float64).reshape(-1, 2)))
    return out


def run_stack_er_cv(data, settings, folds: int = 5, limit: int | None = None, subjects=SUBJECTS,
                    chat_template: bool = False, progress: bool = True, llm=None) -> dict:
    """Held-out ER of ``--verifier llm+trained`` beside the trained verifier's, on the same bios
    (``llm``: a loaded runner; default ``settings.llm`` from the bundle)."""
    from ..backends.llm import load_llm
    from ..cache import CallCache
    from ..factscore.combiner import Combiner
    from ..factscore.stacked import llm_margin, require_stack_record
    from ..manifest import Bundle
    from ..progress import Progress
    from ..store import open_store
    from ..build_step import ensure_store
    from ..training.examples import featurise, load_examples, use_recorded_scores, worker_pool
    from ..training.labeled import wiki_pages
    from ..stats import signed_error_ci
    from .factscore_er import ranking_preserved

    if folds < 2:
        raise FscoreError(f"--cv needs at least 2 folds, not {folds}")
    t0 = time.monotonic()
    pages, files = wiki_pages(data)
    store_path = ensure_store(files, settings, None)
    bundle = Bundle(settings.models_dir)
    entry = bundle.first_for_role("verifier")
    if entry is None or "combiner" not in entry.extra:
        raise FscoreError(f"no trained verifier in {bundle.manifest_path}: run `fscore-lite models train verifier` first")
    cache = CallCache(settings.cache_path if settings.use_cache else None)
    llm = llm if llm is not None else load_llm(settings, bundle, cache, chat_template=chat_template)
    record = require_stack_record(entry, llm, bundle.manifest_path)
    store = open_store(store_path)
    pool = worker_pool(bundle, store, entry, cache, settings.threads, int(entry.extra.get("k", 5)),
                       int(entry.extra.get("window_tokens", 64)), int(entry.extra.get("ce_passages", 2)))
    ex = load_examples(data, pages, subjects)
    if len(ex.topics) < folds:
        raise FscoreError(f"{len(ex.topics)} topics with pages and labels under {data}: too few for {folds} folds")
    featurise(ex, *pool[0], None, more=pool[1:])
    use_recorded_scores(ex, bundle, entry)
    names = tuple(entry.extra["combiner"]["features"])
    l2 = float(entry.extra.get("training", {}).get("config", {}).get("l2", 1.0))
    adjust = Combiner.from_json(entry.extra["combiner"]).adjusts
    oof = cross_validate(ex, names, folds, l2, adjust=adjust)

    retriever = pool[0][0]
    every = int(record.get("training", {}).get("every", 15))
    t_llm = time.monotonic()
    sample, margins = human_sample_margins(ex, llm, retriever, every, progress, record)
    rows = human_stack_rows(ex, oof, sample, margins)
    per_fact = subject_table(rows, cross_validate_stack(rows, oof.folds, l2))

    bios = held_out_bios(ex, limit, subjects)
    facts_of = Counter(f.bio for f in ex.model)
    n_facts = sum(facts_of[i] for i in bios)
    bar = Progress(None, f"{llm.name} margins (model facts)", enabled=progress)
    bar.add_total(n_facts, "facts")
    passages, window = llm_prompt_settings(record)
    stacked = stacked_bio_estimates(
        ex, oof, rows, bios, lambda topic, fact: llm_margin(llm, topic, fact, retriever.retrieve(topic, fact),
                                                            passages, window),
        l2, lambda: bar.advance(1, unit="facts"))
    bar.close()
    llm_s = time.monotonic() - t_llm

    table = []
    for s in subjects:
        idx = [i for i in bios if ex.bios[i].subject == s]
        if not idx:
            continue
        human = 100 * float(np.mean([ex.human_share[i] for i in idx]))
        t_est = 100 * aggregate_estimate([oof.bio_estimate[i] for i in idx])
        s_est = 100 * aggregate_estimate([stacked[i] for i in idx])
        humans, topics = [ex.human_share[i] for i in idx], [ex.bios[i].topic for i in idx]
        table.append({"subject": s, "n_bios": len(idx), "n_facts": sum(facts_of[i] for i in idx), "human": human,
                      "trained": {"estimated": t_est, "error_rate": abs(t_est - human), "signed_error_ci95":
                                  signed_error_ci([oof.bio_estimate[i] for i in idx], humans, topics)},
                      "stacked": {"estimated": s_est, "error_rate": abs(s_est - human), "signed_error_ci95":
                                  signed_error_ci([stacked[i] for i in idx], humans, topics)}})

    per_bio = [{"subject": ex.bios[i].subject, "topic": ex.bios[i].topic, "human": 100 * ex.human_share[i],
                "trained": 100 * aggregate_estimate([oof.bio_estimate[i]]),
                "stacked": 100 * aggregate_estimate([stacked[i]])} for i in bios]  # each bio's share clipped
    mae = {k: float(np.mean([abs(b[k] - b["human"]) for b in per_bio])) for k in ("trained", "stacked")}
    return {"folds": folds, "verifier": entry.name, "verifier_sha256": entry.sha256, "llm": llm.name,
            "llm_sha256": llm.sha256, "chat_template": bool(llm.chat_template), "limit": limit, "every": every,
            "topics": len(ex.topics), "bios": len(bios), "model_facts": n_facts, "human_sample": len(sample),
            "subjects": table,
            "per_bio": per_bio, "per_bio_mean_abs_error": mae,
            "ranking_preserved": {k: ranking_preserved({r["subject"]: r[k]["estimated"] for r in table})
                                  for k in ("trained", "stacked")},
            "per_fact": per_fact, "llm_s": round(llm_s, 1), "total_s": round(time.monotonic() - t0, 1)}


def format_stack_er_report(report: dict) -> str:
    from .factscore_er import format_error_cis

    sample = f"a fixed sample of {report['limit']} bios per subject" if report["limit"] else "every bio"
    lines = [f"held-out topics: {report['folds']}-fold topic-grouped cross-validation of both stages over "
             f"{report['topics']} topics; llm+trained = verifier {report['verifier']} ({report['verifier_sha256'][:12]}) "
             f"+ {report['llm']} ({report['llm_sha256'][:12]}); {sample}: {report['bios']} bios, "
             f"{report['model_facts']} model facts",
             f"{'subject':<14}{'bios':>5}{'facts':>6}{'human':>7} | {'trained':>7}{'ER':>6} | {'llm+trained':>11}{'ER':>6}"]
    for r in report["subjects"]:
        t, s = r["trained"], r["stacked"]
        lines.append(f"{r['subject']:<14}{r['n_bios']:>5}{r['n_facts']:>6}{r['human']:>7.1f} | {t['estimated']:>7.1f}"
                     f"{t['error_rate']:>6.1f} | {s['estimated']:>11.1f}{s['error_rate']:>6.1f}")
    for kind, label in (("trained", "trained"), ("stacked", "llm+trained")):
        cis = format_error_cis([{"subject": r["subject"], "human": r["human"], **r[kind]} for r in report["subjects"]])
        lines += [f"{label}: {cis}"] if cis else []
    rp = report["ranking_preserved"]
    lines.append(f"ranking InstructGPT < ChatGPT < PerplexityAI preserved: trained {rp['trained']}, "
                 f"llm+trained {rp['stacked']}")
    mae = report["per_bio_mean_abs_error"]
    lines.append(f"per bio, mean |estimate − human|: trained {mae['trained']:.1f}, llm+trained {mae['stacked']:.1f}")
    lines.append(f"per fact, out of fold, on the stack's sample of {report['human_sample']} human facts "
                 f"(every {report['every']}th):")
    lines.append(format_stack_table(report["per_fact"]))
    return "\n".join(lines)


def format_stack_table(table: list[dict]) -> str:
    f = lambda x: "-" if x is None else f"{100 * x:.1f}"  # noqa: E731
    g = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
    lines = [f"{'subject':<14}{'facts':>6}{'human':>7} | {'trained':>7}{'err':>6}{'F1(NS)':>8}{'AUC':>7} | "
             f"{'stacked':>7}{'err':>6}{'F1(NS)':>8}{'AUC':>7}"]
    for r in table:
        t, s = r["trained"], r["stacked"]
        lines.append(f"{r['subject']:<14}{r['n_facts']:>6}{r['human']:>7.1f} | {t['estimated']:>7.1f}{t['error']:>6.1f}"
                     f"{f(t['f1_ns']):>8}{g(t['auc']):>7} | {s['estimated']:>7.1f}{s['error']:>6.1f}{f(s['f1_ns']):>8}"
                     f"{g(s['auc']):>7}")
    return "\n".join(lines)
