"""``meta-eval factscore-er --verifier llm+trained --cv K``: the stack's ER on held-out topics.

The bio-level counterpart of the fit's per-fact report (:mod:`fscore_lite.training.stack`). Both stages are
cross-validated with one topic → fold map (:func:`fscore_lite.training.examples.topic_folds`):

1. the trained verifier of fold k (:func:`~fscore_lite.training.fit.fit_verifier` on the other folds'
   topics) gives every fact of a fold-k topic its combiner logit;
2. the stack of fold k is fitted on the human-fact sample of the other folds' topics — the same
   sample ``models train llm-combiner`` uses (every ``every``-th human fact, its margin from the
   call cache when the fit has run), their trained logits out of fold;
3. every paper fact of a held-out bio gets the LLM's margin on the short window prompt and the
   stack's probability; each subject's bios are one run (the run share, each bio's score).

The trained verifier alone (its given-facts calibration) is reported on the same bios, so the
two columns compare like with like. Margins for model facts are the slow part (seconds each
for the 1.5B model): ``--limit N`` takes a fixed sample of N bios per subject
(:func:`.factscore_er.sample`), and the call cache makes an interrupted run resume.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..errors import FscoreError
from ..factscore.calibration import GIVEN, Response
from ..training.examples import held_out_bios
from ..training.labeled import SUBJECTS


def run_stack_er_cv(data, settings, folds: int = 5, limit: int | None = None, subjects=SUBJECTS,
                    chat_template: bool = False, progress: bool = True, llm=None) -> dict:
    """Held-out ER of ``--verifier llm+trained`` beside the trained verifier's, on the same bios
    (``llm``: a loaded runner; default ``settings.llm`` from the bundle)."""
    from ..backends.llm import load_llm
    from ..build_step import shipped_own_facts
    from ..training.prepare import installed_verifier, prepare
    from ..factscore.stacked import llm_margin, require_stack_record
    from ..manifest import Bundle
    from ..progress import Progress
    from ..training.fit import fit_verifier
    from ..training.heldout import subject_rows
    from ..training.stack import (cross_validate_stack, fit_stack, human_sample_margins, human_stack_rows,
                                  llm_prompt_settings, out_of_fold_logits, stack_folds, subject_table)
    from .factscore_er import ranking_preserved

    if folds < 2:
        raise FscoreError(f"--cv needs at least 2 folds, not {folds}")
    t0 = time.monotonic()
    bundle = Bundle(settings.models_dir)
    entry = installed_verifier(bundle)
    prep = prepare(Path(data), settings, bundle, entry, shipped_own_facts(None), subjects)
    ex, fit, pool = prep.ex, prep.fit, prep.pool
    if len(ex.topics) < folds:
        raise FscoreError(f"{len(ex.topics)} topics with pages and labels under {data}: too few for {folds} folds")
    llm = llm if llm is not None else load_llm(settings, bundle, pool[0][0].cache, chat_template=chat_template)
    record = require_stack_record(entry, llm, bundle.manifest_path)
    fold_of = stack_folds(ex, folds)
    logits = out_of_fold_logits(ex, fit, fold_of)
    retriever = pool[0][0]
    every = int(record.get("training", {}).get("every", 15))
    t_llm = time.monotonic()
    sample, margins = human_sample_margins(ex, llm, retriever, every, progress, record)
    rows = human_stack_rows(ex, logits, sample, margins)
    per_fact = subject_table(rows, cross_validate_stack(rows, fold_of, fit.l2))

    bios = [i for i in held_out_bios(ex, limit, subjects) if ex.bios[i].subject in subjects]
    n_facts = sum(1 for f in ex.model if f.bio in set(bios))
    bar = Progress(None, f"{llm.name} margins (model facts)", enabled=progress)
    bar.add_total(n_facts, "facts")
    passages, window = llm_prompt_settings(record)
    trained, stacked = {}, {}
    row_fold = np.asarray([fold_of[t] for t in rows.topics])
    for fold in sorted(set(fold_of.values())):
        held = [i for i in bios if fold_of[ex.bios[i].topic] == fold]
        train = {i for i, b in enumerate(ex.bios) if fold_of[b.topic] != fold}
        if not held:
            continue
        fitted = fit_verifier(ex, train, fit)
        cal = fitted.calibrations[GIVEN]
        keep = np.flatnonzero(row_fold != fold)
        if len(set(rows.y[keep])) < 2:
            raise FscoreError(f"fold {fold}: the human-fact sample of the other folds has one label only")
        scomb, scal = fit_stack(rows.x[keep], rows.y[keep], fit.l2)
        for i in held:
            idx = [j for j, f in enumerate(ex.model) if f.bio == i]
            x = np.asarray([[ex.features["model"][j][n] for n in fit.features] for j in idx], dtype=np.float64)
            z = fitted.combiner.logit(x)
            trained[i] = Response(tuple(map(float, cal.probability(z))), cal.prior)
            m = []
            for j in idx:
                f = ex.model[j]
                m.append(llm_margin(llm, f.topic, f.text, retriever.retrieve(f.topic, f.text), passages, window))
                bar.advance(1, unit="facts")
            stacked[i] = Response(tuple(map(float, scal.probability(scomb.logit(np.column_stack([z, m]))))), scal.prior)
    bar.close()
    llm_s = time.monotonic() - t_llm
    t_rows, s_rows = subject_rows(ex, trained), subject_rows(ex, stacked)
    table = [{"subject": t["subject"], "n_bios": t["n_bios"], "human": t["human"], "trained": t, "stacked": st}
             for t, st in zip(t_rows, s_rows)]
    return {"folds": folds, "verifier": entry.name, "verifier_sha256": entry.sha256, "llm": llm.name,
            "llm_sha256": llm.sha256, "chat_template": bool(llm.chat_template), "limit": limit, "every": every,
            "topics": len(ex.topics), "bios": len(trained), "model_facts": n_facts, "human_sample": len(sample),
            "subjects": table,
            "ranking_preserved": {k: ranking_preserved({r["subject"]: r[k]["estimate"] for r in table})
                                  for k in ("trained", "stacked")},
            "per_fact": per_fact, "llm_s": round(llm_s, 1), "total_s": round(time.monotonic() - t0, 1)}


def format_stack_er_report(report: dict) -> str:
    sample = f"a fixed sample of {report['limit']} bios per subject" if report["limit"] else "every bio"
    lines = [f"held-out topics: {report['folds']}-fold topic-grouped cross-validation of both stages over "
             f"{report['topics']} topics; llm+trained = verifier {report['verifier']} ({report['verifier_sha256'][:12]}) "
             f"+ {report['llm']} ({report['llm_sha256'][:12]}); {sample}: {report['bios']} bios, "
             f"{report['model_facts']} model facts",
             f"{'subject':<14}{'bios':>5}{'human':>7} | {'trained':>7}{'ER':>6}{'MAE':>6} | {'llm+trained':>11}{'ER':>6}"
             f"{'MAE':>6}"]
    for r in report["subjects"]:
        t, s = r["trained"], r["stacked"]
        lines.append(f"{r['subject']:<14}{r['n_bios']:>5}{r['human']:>7.1f} | {t['estimate']:>7.1f}{t['er']:>6.1f}"
                     f"{t['per_bio_mae']:>6.1f} | {s['estimate']:>11.1f}{s['er']:>6.1f}{s['per_bio_mae']:>6.1f}")
    rp = report["ranking_preserved"]
    lines.append(f"ranking InstructGPT < ChatGPT < PerplexityAI preserved: trained {rp['trained']}, "
                 f"llm+trained {rp['stacked']}")
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
