"""``fscore-lite models train llm-combiner --llm NAME``: fit ``--verifier llm+trained`` for one LLM.

Needs the trained verifier (``models train verifier``) and the LLM installed. Steps:

1. The verifier build's examples and features, recomputed the same way (the call cache makes
   them free after the verifier build), and the trained combiner's topic-grouped CV: every
   human fact gets an out-of-fold trained probability.
2. A fixed sample of the human facts — every ``every``-th in the examples' fixed order, so it
   spans all topics and subjects — gets the LLM's margin on the short window prompt
   (:func:`fscore_lite.factscore.stacked.llm_margin`), through the call cache: an interrupted
   fit resumes where it stopped. This is the slow part (seconds per fact for the 1.5B model).
3. The stacked combiner (trained logit, margin) is cross-validated with the same folds
   (:mod:`fscore_lite.training.stack`: the report is out of fold on both stages), then
   fitted on the whole sample, with the share-matching threshold and PACC means from the
   out-of-fold probabilities.
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
    from fscore_lite.cache import CallCache
    from fscore_lite.factscore.stacked import LLM_PASSAGES, LLM_WINDOW_TOKENS
    from fscore_lite.store import open_store
    from fscore_lite.training.combiner_cv import cross_validate
    from fscore_lite.training.examples import featurise, load_examples, use_recorded_scores, worker_pool
    from fscore_lite.training.labeled import wiki_pages
    from fscore_lite.training.stack import (cross_validate_stack, fit_stack, human_sample_margins, human_stack_rows,
                                            subject_table, with_pacc_means)
    from fscore_lite_index.wiki import ensure_store

    if every < 1:
        raise FscoreError(f"--every must be 1 or more, not {every}")
    t_start = time.monotonic()
    bundle_dir = Path(bundle_dir)
    bundle = Bundle(bundle_dir)
    ventry = bundle.first_for_role("verifier")
    if ventry is None or "combiner" not in ventry.extra:
        raise FscoreError(f"no trained verifier in {bundle.manifest_path}: run `fscore-lite models train verifier` first")
    training = ventry.extra.get("training", {})
    cfg = training.get("config", {})
    folds_n, l2 = int(training.get("cv_folds", 5)), float(cfg.get("l2", 1.0))
    settings = settings.with_(models_dir=bundle_dir)
    cache = CallCache(settings.cache_path if settings.use_cache else None)
    data_dir = Path(data) if data else shipped_data(Path(settings.home) / "build" / "factscore-dev")
    pages, page_files = wiki_pages(data_dir)
    store = open_store(ensure_store(page_files, settings, None))
    pool = worker_pool(bundle, store, ventry, cache, settings.threads, int(ventry.extra.get("k", 5)),
                       int(ventry.extra.get("window_tokens", 64)), int(ventry.extra.get("ce_passages", 2)))
    ex = load_examples(data_dir, pages)
    featurise(ex, *pool[0], None, more=pool[1:])
    use_recorded_scores(ex, bundle, ventry)
    names = tuple(ventry.extra["combiner"]["features"])
    oof = cross_validate(ex, names, folds_n, l2, adjust=True)
    log(f"trained verifier: out-of-fold probabilities for {len(ex.human)} human facts ({folds_n} topic-grouped folds)")

    llm = llm if llm is not None else load_llm(settings, bundle, cache)
    t = time.monotonic()
    sample, margins = human_sample_margins(ex, llm, pool[0][0], every, progress)
    llm_s = time.monotonic() - t
    rows = human_stack_rows(ex, oof, sample, margins)
    if len(set(rows.y)) < 2:
        raise FscoreError(f"the sample of {len(sample)} facts has one label only: lower --every")
    cv = cross_validate_stack(rows, oof.folds, l2)
    table = subject_table(rows, cv)
    comb = with_pacc_means(fit_stack(rows.x, rows.y, l2), cv.prob, rows.y)
    record = {
        "llm": llm.name, "llm_sha256": llm.sha256, "chat_template": bool(llm.chat_template),
        "passages": LLM_PASSAGES, "window_tokens": LLM_WINDOW_TOKENS, "combiner": comb.to_json(),
        "training": {"every": every, "sample_facts": len(sample), "folds": folds_n, "l2": l2,
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
