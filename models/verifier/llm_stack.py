"""``fscore-lite models train llm-combiner --llm NAME``: fit ``--verifier llm+trained`` for one LLM.

Needs the trained verifier (``models train verifier``) and the LLM installed. Steps:

1. The verifier build's examples and features, recomputed the same way (the call cache makes
   them free after the verifier build), and the trained verifier's topic-grouped CV
   (:func:`fscore_lite.training.fit.fit_verifier` in every fold): every human fact gets an
   out-of-fold combiner logit.
2. A fixed sample of the human facts — every ``every``-th in the examples' fixed order, so it
   spans all topics and subjects — gets the LLM's margin on the short window prompt
   (:func:`fscore_lite.factscore.stacked.llm_margin`), through the call cache: an interrupted
   fit resumes where it stopped. This is the slow part (seconds per fact for the 1.5B model).
3. The stacked combiner (trained logit, margin) is cross-validated with the same folds
   (:mod:`fscore_lite.training.stack`: the report is out of fold on both stages), then
   fitted on the whole sample; its probabilities hold under the sample's labelled share.
4. It is recorded in the verifier's manifest entry under ``llm_combiners[<LLM sha256>]`` with
   the LLM's name, the prompt settings, the sample, the coefficients and the report.

Only topics of the verifier's training data are used, as for the verifier itself.
"""
from __future__ import annotations

import time
from pathlib import Path

from fscore_lite.errors import FscoreError
from fscore_lite.manifest import Bundle, ModelEntry, stamp_decisions

from .sources import shipped_data


def train_llm_combiner(bundle_dir: str | Path, settings, llm=None, every: int = 15, data: str | Path | None = None,
                       log=print, progress: bool = False) -> dict:
    """Fit and record the llm+trained combiner for ``llm`` (default: ``settings.llm``, loaded
    from the bundle); return its record. ``data`` as for the verifier build (default shipped)."""
    from fscore_lite.backends.llm import load_llm
    from fscore_lite.factscore.stacked import LLM_PASSAGES, LLM_WINDOW_TOKENS
    from fscore_lite.training.prepare import installed_verifier, prepare
    from fscore_lite.training.stack import (cross_validate_stack, fit_stack, human_sample_margins, human_stack_rows,
                                            out_of_fold_logits, stack_folds, subject_table)

    from .own_facts import shipped_own_facts

    if every < 1:
        raise FscoreError(f"--every must be 1 or more, not {every}")
    t_start = time.monotonic()
    bundle_dir = Path(bundle_dir)
    bundle = Bundle(bundle_dir)
    ventry = installed_verifier(bundle)
    settings = settings.with_(models_dir=bundle_dir)
    data_dir = Path(data) if data else shipped_data(Path(settings.home) / "build" / "factscore-dev")
    prep = prepare(data_dir, settings, bundle, ventry, shipped_own_facts(data))
    ex, fit, pool, folds_n = prep.ex, prep.fit, prep.pool, prep.folds
    folds = stack_folds(ex, folds_n)
    logits = out_of_fold_logits(ex, fit, folds)
    log(f"trained verifier: out-of-fold logits for {len(logits)} human facts ({folds_n} topic-grouped folds)")

    cache = pool[0][0].cache
    llm = llm if llm is not None else load_llm(settings, bundle, cache)
    t = time.monotonic()
    sample, margins = human_sample_margins(ex, llm, pool[0][0], every, progress)
    llm_s = time.monotonic() - t
    rows = human_stack_rows(ex, logits, sample, margins)
    if len(set(rows.y)) < 2:
        raise FscoreError(f"the sample of {len(sample)} facts has one label only: lower --every")
    table = subject_table(rows, cross_validate_stack(rows, folds, fit.l2))
    comb, cal = fit_stack(rows.x, rows.y, fit.l2)
    record = {
        "llm": llm.name, "llm_sha256": llm.sha256, "chat_template": bool(llm.chat_template),
        "passages": LLM_PASSAGES, "window_tokens": LLM_WINDOW_TOKENS, "combiner": comb.to_json(),
        "calibration": cal.to_json(),
        "training": {"every": every, "sample_facts": len(sample), "folds": folds_n, "l2": fit.l2,
                     "data": str(data) if data else "shipped", "verifier_sha256": ventry.sha256,
                     "threads": settings.threads, "cv": table, "llm_s": round(llm_s, 1),
                     "total_s": round(time.monotonic() - t_start, 1)},
    }
    bundle = Bundle(bundle_dir)  # re-read: nothing else may have changed it meanwhile
    current = bundle.get(ventry.name)
    if current.sha256 != ventry.sha256 or current.extra.get("combiner") != ventry.extra["combiner"]:
        raise FscoreError(f"{ventry.name} changed in {bundle.manifest_path} while the combiner was fitted; run again")
    stacks = {**current.extra.get("llm_combiners", {}), llm.sha256: record}
    # current came through bundle.get, which refuses hand-edited decision settings: restamping blesses nothing
    bundle.add(ModelEntry(**{**current.__dict__, "extra": stamp_decisions({**current.extra, "llm_combiners": stacks})}))
    bundle.save()
    return record

