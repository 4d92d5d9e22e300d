"""``meta-eval factscore-er --facts generated``: the number a user gets, end to end.

Each annotated bio's ``output`` goes through ``score``'s own fact generation (the local LLM,
every call in the call cache, so an interrupted run resumes where it stopped), its facts are
verified, and the bio's estimate is compared with the human FActScore of the same bio. The
paper's facts of the same bios are scored beside them, so the own − paper difference is
paired by bio.

With ``--cv K`` (trained verifier) every bio is scored by the fold combiner that never saw
its topic — fitted, as today, on the human facts and the paper's facts of the other folds'
topics (``calibrated_on: paper facts``) — and, beside it, by the same combiner with the
own-facts calibration (:mod:`fscore_lite.training.own_calibration`) fitted on the other folds'
bios only, their probabilities out of fold within those topics (nested: no held-out topic
informs it). When the shipped own-facts file was made with the run's fact settings, the facts
are read from it (every training bio's, so the nested fit sees all of them) instead of generated.

Estimates per subject follow ``score``'s aggregate (:func:`fscore_lite.factscore.score.adjusted_aggregate`):
the PACC correction applied once to the subject's mean, not to each bio; the per-bio mean
absolute error is of each bio's readable score (its facts' mean probability).
"""
from __future__ import annotations

import time
from pathlib import Path

from ..errors import FscoreError
from ..training.labeled import SUBJECTS
from ..training.own_facts import generate_own_facts  # noqa: F401  (re-exported)
from .e2e_table import (bio_scores, degenerate_share, format_e2e_report, human_fact_count,  # noqa: F401  (re-exported)
                        record_scores, subject_holdout, subject_rows)


def run_e2e_cv(data, settings, folds: int = 5, limit: int | None = None, subjects=SUBJECTS,
               decomposer: str = "default", progress: bool = True, llm=None, own_facts_file=None) -> dict:
    """Held-out end-to-end ER: own facts of a fixed sample of bios per subject, each verified by
    the trained verifier's fold combiner that never saw its topic (paper calibration, and the
    own-facts calibration fitted on the other folds' bios); the paper's facts beside them.
    ``own_facts_file``: the own-facts file to read facts from when its settings are the run's
    (default: the shipped one, when present)."""
    from ..backends.llm import load_llm
    from ..build_step import shipped_own_facts
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
    from ..training.own_calibration import nested_calibrations, own_rows_by_bio

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
    shipped, source = shipped_facts(ex, own_facts_file or shipped_own_facts(None), llm, generator)
    t_gen = time.monotonic()
    # first, so that the slow part is in the call cache even when the verifier is still missing
    todo = [i for i in chosen if i not in shipped]
    made = dict(zip(todo, generate_own_facts([ex.bios[i] for i in todo], generator, progress)))
    own_lists = [shipped[i] if i in shipped else made[i] for i in chosen]
    gen_s = time.monotonic() - t_gen

    store_path = ensure_store(files, settings, None)
    bundle = Bundle(settings.models_dir)
    entry = bundle.first_for_role("verifier")
    if entry is None or "combiner" not in entry.extra:
        raise FscoreError(f"no trained verifier in {bundle.manifest_path}: run `fscore-lite models train verifier` first")
    store = open_store(store_path)
    pool = worker_pool(bundle, store, entry, cache, settings.threads, int(entry.extra.get("k", 5)),
                       int(entry.extra.get("window_tokens", 64)), int(entry.extra.get("ce_passages", 2)))
    # the own facts of every bio known: the chosen ones and, from the shipped file, the other training bios'
    known = {**shipped, **dict(zip(chosen, own_lists))}
    own_ex = Examples(ex.bios, [], [Fact(ex.bios[i].topic, f, i, None) for i in sorted(known) for f in known[i]],
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
    own_rows = own_rows_by_bio(own_ex)
    nested = nested_calibrations(ex, oof.folds, own_rows, names, by_fold, l2, adjust)

    paper_rows = own_rows_by_bio(ex)  # the same grouping: bio -> its model facts' rows
    bios = [ex.bios[i] for i in chosen]
    own, paper, own_cal = [], [], []
    for i in chosen:
        fold = oof.folds[ex.bios[i].topic]
        comb = by_fold[fold]
        rows = own_rows.get(i)
        probs = comb.probability(comb.matrix(rows)) if rows else None
        own.append(bio_scores(comb, probs) if rows else None)
        own_cal.append(bio_scores(comb.with_calibration(nested[fold]), probs) if rows and nested[fold] else None)
        paper.append(bio_scores(comb, comb.probability(comb.matrix(paper_rows[i]))))
    table = subject_rows(bios, [ex.human_share[i] for i in chosen], own, paper, own_lists, own_cal)
    per_bio = [{"subject": b.subject, "topic": b.topic, "line": b.line, "human": 100 * ex.human_share[i],
                "fold": oof.folds[b.topic], "own_facts": fs, "own": o, "own_calibrated": oc, "paper": p}
               for i, b, fs, o, oc, p in zip(chosen, bios, own_lists, own, own_cal, paper)]
    return {"folds": folds, "facts": "generated", "decomposer": decomposer,
            "atomic_facts": describe_settings(False, decomposer), "llm": llm.name, "llm_sha256": llm.sha256,
            "verifier": entry.name, "verifier_sha256": entry.sha256, "calibrated_on": "paper facts",
            "facts_source": source,
            "own_calibration": {str(k): None if c is None else {
                **{key: c[key] for key in ("threshold", "p_supported", "p_not_supported", "line", "n_bios",
                                           "n_facts")},
                "fit_topics": sorted({ex.bios[i].topic for i in c["bios"]})} for k, c in nested.items()},
            "limit": limit, "topics": len(ex.topics), "bios": len(chosen), "threads": settings.threads,
            "subjects": table,
            "ranking_preserved": {k: ranking_preserved({r["subject"]: r[k]["estimated"] for r in table})
                                  for k in ("own", "paper")}
                                 | ({"own_calibrated": ranking_preserved({r["subject"]: r["own_calibrated"]["estimated"]
                                                                          for r in table})}
                                    if table and all(r.get("own_calibrated") for r in table) else {}),
            "per_bio": per_bio, "subject_holdout": subject_holdout(per_bio),
            "subject_holdout_between_subjects": subject_holdout(per_bio, between_subjects=True),
            "generation_s": round(gen_s, 1), "llm_calls": llm.stats.__dict__,
            "total_s": round(time.monotonic() - t0, 1)}


def shipped_facts(ex, path, llm, generator) -> tuple[dict[int, list[str]], str]:
    """Bio index → its facts from the own-facts file at ``path`` when that file was made with this run's
    fact settings (the LLM's sha256 and the atomic-fact settings), else {}; and where the facts came from."""
    from ..training.own_facts import read_own_facts, same_facts

    if path is None:
        return {}, "generated by this run (no own-facts file)"
    path = Path(path)
    own = read_own_facts(path)
    run = {"llm_sha256": llm.sha256, "atomic_facts": generator.describe()}
    if not same_facts(own.settings(), run):
        return {}, f"generated by this run ({path.name} was made with other fact settings)"
    found = {i: own.facts_of(b) for i, b in enumerate(ex.bios)}
    found = {i: f for i, f in found.items() if f is not None}
    return found, (f"read from {path.name} ({own.sha256[:12]}, made with these fact settings) for {len(found)} bios; "
                   "the others generated")


def own_calibration_applied(scorer) -> str:
    """Which calibration ``score`` applies to the facts it generates with this scorer's settings."""
    from ..factscore.score import calibration_note

    note = calibration_note(scorer.bundle.get(scorer.verifier.name).extra, 1, scorer.options.decomposer,
                            scorer.run_fact_settings(), own_usable=scorer.verifier.kind == "trained")
    return ("own facts (the own-facts calibration fitted for these fact settings)"
            if "own_facts" in note and note["fitted_for_these_facts"] else "paper facts")


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
            "calibrated_on": own_calibration_applied(scorer) if scorer.verifier.name is not None else "nothing (LM judge)",
            "limit": limit, "topics": len({b.topic for b in bios}), "bios": len(bios), "threads": settings.threads,
            "subjects": table,
            "ranking_preserved": {k: ranking_preserved({r["subject"]: r[k]["estimated"] for r in table})
                                  for k in ("own", "paper")},
            "generation_s": round(t_gen, 1), "llm_calls": llm.stats.__dict__, "total_s": round(time.monotonic() - t0, 1)}
