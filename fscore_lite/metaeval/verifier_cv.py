"""``meta-eval factscore-er --verifier trained --cv K``: the trained verifier's held-out ER.

The combiner is refitted in each topic-grouped fold (:mod:`fscore_lite.training.combiner_cv`)
on the other folds' topics, so every estimate comes from a combiner that never saw its topic.
"""
from __future__ import annotations

import numpy as np

from ..factscore.combiner import Combiner
from ..training.combiner_cv import CvResult, cross_validate, per_subject
from ..training.examples import Examples, featurise, load_examples, use_recorded_scores, worker_pool
from ..training.labeled import SUBJECTS, wiki_pages


def _floor(ex: Examples, pages: dict[str, str]) -> CvResult:
    """The model-free word-overlap floor as predictions (no fitting)."""
    from .factscore_er import overlap_supported

    preds = [overlap_supported(f.text, pages[f.topic]) for f in ex.human]
    by_bio: dict[int, list[bool]] = {}
    for f in ex.model:
        by_bio.setdefault(f.bio, []).append(overlap_supported(f.text, pages[f.topic]))
    return CvResult(preds, [float(np.mean(by_bio[i])) for i in range(len(ex.bios))], {}, [])


def run_er_cv(data, settings, folds: int = 5, subjects=SUBJECTS, progress: bool = True) -> dict:
    """``meta-eval factscore-er --verifier trained --cv K`` on the bios of ``data``.

    The installed verifier's cross-encoder (trained on SNLI only, never on a FActScore topic)
    and its settings featurise every fact; the combiner is refitted in each topic-grouped
    fold on the other folds' topics, so every estimate comes from a combiner that never saw
    its topic. The lexical regression (page features only) is cross-validated the same way;
    the word-overlap floor needs no fitting."""
    import time

    from ..backends.embed import SentenceEmbedder
    from ..cache import CallCache
    from ..errors import FscoreError
    from ..factscore.page_features import FEATURES
    from ..factscore.retrieve import Retriever
    from ..factscore.trained import TrainedVerifier
    from ..manifest import Bundle
    from ..progress import Progress
    from ..store import open_store
    from .cv_report import paired_estimates
    from ..build_step import ensure_store
    from .factscore_er import ranking_preserved

    if folds < 2:
        raise FscoreError(f"--cv needs at least 2 folds, not {folds}")
    pages, files = wiki_pages(data)
    ex = load_examples(data, pages, subjects)  # bad labels fail here, before any store is built
    if len(ex.topics) < folds:
        raise FscoreError(f"{len(ex.topics)} topics with pages and labels under {data}: too few for {folds} folds")
    store_path = ensure_store(files, settings, None)
    bundle = Bundle(settings.models_dir)
    store = open_store(store_path)
    cache = CallCache(settings.cache_path if settings.use_cache else None)
    verifier = TrainedVerifier.from_bundle(bundle, store, threads=settings.threads, cache=cache)
    entry = bundle.get(verifier.name)
    embedder = SentenceEmbedder.from_bundle(bundle, store.embed_model, settings.threads)
    retriever = Retriever(store, embedder, int(entry.extra.get("k", 5)), False, cache)
    t0 = time.monotonic()
    bar = Progress(None, "features", enabled=progress)
    bar.add_total(len(ex.human) + len(ex.model), "facts featurised")
    pool = worker_pool(bundle, store, entry, cache, settings.threads, retriever.k, verifier.builder.window_tokens,
                       verifier.builder.passages)  # one thread per core, 1-thread sessions each
    featurise(ex, *pool[0], lambda: bar.advance(1, unit="facts featurised"), more=pool[1:])
    bar.close()
    recorded = use_recorded_scores(ex, bundle, entry)
    names = tuple(entry.extra["combiner"]["features"])
    l2 = float(entry.extra.get("training", {}).get("config", {}).get("l2", 1.0))
    adjust = Combiner.from_json(entry.extra["combiner"]).adjusts  # the installed verifier's share estimator
    res = {"trained": cross_validate(ex, names, folds, l2, adjust=adjust),
           "lexical": cross_validate(ex, FEATURES, folds, l2, adjust=adjust), "floor": _floor(ex, pages)}
    rows = {k: per_subject(ex, v) for k, v in res.items()}

    return {"folds": folds, "verifier": verifier.name, "share": "adjusted (PACC)" if adjust else "decisions", "verifier_sha256": verifier.sha256, "store": str(store_path),
            "topics": len(ex.topics), "bios": len(ex.bios), "human_facts": len(ex.human), "model_facts": len(ex.model),
            "subjects": rows["trained"], "lexical": rows["lexical"], "floor": rows["floor"],
            "ranking_preserved": {k: ranking_preserved({r["subject"]: r["estimated"] for r in v}) for k, v in rows.items()},
            "trained_minus_lexical": paired_estimates(ex, res["trained"], res["lexical"]),
            "recorded_oof_facts": recorded,
            "features_s": round(time.monotonic() - t0, 1)}
