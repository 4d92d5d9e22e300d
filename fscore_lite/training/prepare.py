"""The training examples as the verifier build made them, for everything that refits it afterwards.

``models train llm-combiner`` and meta-eval's held-out figures refit the trained verifier on the
examples its build fitted it on: the annotated bios with a page, their human facts, the paper's
facts and every own-facts file's facts, featurised by the installed cross-encoder through the
runtime's own retrieval (the call cache makes this cheap after the build) and silver-labelled.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..factscore.calibration import GIVEN
from ..training.labeled import SUBJECTS
from .examples import Examples
from .fit import FitSettings


@dataclass
class Prepared:
    ex: Examples
    fit: FitSettings
    pool: list  # (retriever, verifier) pairs, one per thread
    folds: int  # the build's topic folds
    fitted_for: dict[str, dict]  # calibration name → what made its facts
    own_files: list[dict]  # the own-facts files read
    silver: dict[str, list[dict]]  # kind → the silver labels' agreement with the human FActScores
    extra: dict  # the verifier entry's settings, upgraded (fscore_lite.migrations)


def prepare_examples(data_dir: Path, settings, bundle, ce_entry, own_files: list[Path], k: int, window_tokens: int,
                     passages: int, subjects=SUBJECTS, before_features: Callable[[Examples, dict], None] | None = None,
                     progress: Callable[[], None] | None = None, log=lambda m: None):
    """Examples of ``data_dir`` with the facts of ``own_files``, featurised by ``ce_entry``'s cross-encoder
    (``k`` passages retrieved, the best ``passages`` cut to ``window_tokens``) and silver-labelled;
    ``before_features(ex, fitted_for)`` may add facts first. Returns (examples, worker pool, fitted_for,
    own files read, silver agreement, store)."""
    from ..build_step import ensure_store
    from ..cache import CallCache
    from ..store import open_store
    from .examples import featurise, label_silver, load_examples, use_recorded_scores, worker_pool
    from .labeled import wiki_pages
    from .own_facts import add_own_facts

    pages, page_files = wiki_pages(data_dir)
    ex = load_examples(data_dir, pages, subjects)  # bad labels fail here, before any store is built
    fitted_for = {GIVEN: {"facts": "given in the input: fitted on the paper's InstructGPT facts of the training bios"}}
    read = add_own_facts(ex, own_files, fitted_for, log=log)
    if before_features is not None:
        before_features(ex, fitted_for)
    store = open_store(ensure_store(page_files, settings, None))
    cache = CallCache(settings.cache_path if settings.use_cache else None)
    # one thread per core, each with 1-thread sessions: every fact is still computed alone, as at run time
    pool = worker_pool(bundle, store, ce_entry, cache, settings.threads, k, window_tokens, passages)
    featurise(ex, *pool[0], progress, more=pool[1:])
    use_recorded_scores(ex, bundle, ce_entry)
    silver = label_silver(ex, pool[0][0].embedder, [r.embedder for r, _ in pool[1:]])
    return ex, pool, fitted_for, read, silver, store


def installed_verifier(bundle):
    """The bundle's trained verifier entry, or an error saying how to build one."""
    from ..errors import FscoreError

    entry = bundle.first_for_role("verifier")
    if entry is None or "combiner" not in entry.extra:
        raise FscoreError(f"no trained verifier in {bundle.manifest_path}: run `fscore-lite models train verifier` first")
    return entry


def recorded_own_files(entry, candidates: list[Path]) -> list[Path]:
    """The own-facts files ``entry``'s build fitted on, found among ``candidates`` by their sha256; an error
    naming a file the build recorded and none of the candidates is."""
    from ..errors import FscoreError
    from .own_facts import read_own_facts

    recorded = entry.extra.get("training", {}).get("own_facts", [])
    found = {read_own_facts(p).sha256: p for p in candidates}
    missing = [r for r in recorded if r["sha256"] not in found]
    if missing:
        raise FscoreError(f"the verifier '{entry.name}' was fitted on {missing[0]['file']} (sha256 "
                          f"{missing[0]['sha256'][:12]}…), which is not among {', '.join(map(str, candidates)) or 'no files'}:"
                          " refit it with `fscore-lite models train verifier`, or pass the file it was fitted on")
    return [found[r["sha256"]] for r in recorded]


def prepare(data_dir: Path, settings, bundle, entry, own_files: list[Path], subjects=SUBJECTS,
            before_features: Callable[[Examples, dict], None] | None = None) -> Prepared:
    """:func:`prepare_examples` with an installed verifier ``entry``'s settings and the own-facts files of its
    build, found among ``own_files`` (:func:`recorded_own_files`)."""
    from ..migrations import upgrade_verifier

    extra = upgrade_verifier(entry, bundle.manifest_path)
    own_files = recorded_own_files(entry, own_files)
    ex, pool, fitted_for, read, silver, _ = prepare_examples(
        data_dir, settings, bundle, entry, own_files, int(extra["k"]), int(extra["window_tokens"]),
        int(extra["ce_passages"]), subjects, before_features)
    training = extra.get("training", {})
    fit = FitSettings(tuple(extra["combiner"]["features"]), float(training.get("config", {}).get("l2", 1.0)))
    return Prepared(ex, fit, pool, int(training.get("cv_folds", 5)), fitted_for, read, silver, extra)
