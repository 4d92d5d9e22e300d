"""The default decomposer's own facts of the training bios: made once, then fitted on.

* :func:`make_own_facts` (``fscore-lite models own-facts``): every annotated development bio's
  ``output`` (the bios the verifier trains on: responded, with a page and the paper's facts)
  through ``score``'s own :class:`~fscore_lite.factscore.atomic_facts.AtomicFactGenerator` with
  the default decomposer — every LLM call in the call cache, so an interrupted run resumes —
  written to ``models/data/own-facts-dev.jsonl.gz`` with the settings that made them and its
  sha256 beside it (:mod:`fscore_lite.training.own_facts`).
* :func:`add_own_facts` (``models train verifier``): every shipped own-facts file's facts, which the
  combiner learns from (with their silver labels) and which give their decomposer a calibration.
"""
from __future__ import annotations

import time
from pathlib import Path

from fscore_lite.training.labeled import SUBJECTS
from fscore_lite.training.own_facts import FILE_NAME, read_own_facts

from .sources import SHIPPED, shipped_data

SHIPPED_OWN_FACTS = SHIPPED / FILE_NAME


def shipped_path(decomposer: str) -> Path:
    """Where a decomposer's shipped own-facts file lives: ``own-facts-dev.jsonl.gz`` for the default,
    ``own-facts-dev.NAME.jsonl.gz`` for another."""
    return SHIPPED_OWN_FACTS if decomposer == "default" else SHIPPED / f"own-facts-dev.{decomposer}.jsonl.gz"


def shipped_own_facts(data: str | Path | None = None) -> list[Path]:
    """The own-facts files a build on ``data`` uses: every one shipped (``own-facts-dev*.jsonl.gz``, one per
    decomposer) for the shipped data; none for other data."""
    return sorted(SHIPPED.glob("own-facts-dev*.jsonl.gz")) if data is None else []


def make_own_facts(settings, out: Path | None = None, data: Path | None = None, limit: int | None = None,
                   subjects=SUBJECTS, log=print, progress: bool = True, llm=None, decomposer: str = "default") -> dict:
    """Generate and write the own facts; return the header written (with ``path`` and ``sha256``)."""
    from fscore_lite.backends.llm import load_llm
    from fscore_lite.cache import CallCache
    from fscore_lite.errors import FscoreError
    from fscore_lite.factscore.decomposers import Models, check_decomposer, fact_source, make_decomposer
    from fscore_lite.training.examples import held_out_bios, load_examples
    from fscore_lite.training.labeled import wiki_pages
    from fscore_lite.training.own_facts import fact_settings, generate_own_facts, write_own_facts

    unknown = [s for s in subjects if s not in SUBJECTS]
    if unknown:
        raise FscoreError(f"unknown subject(s) {', '.join(unknown)}; choose from {', '.join(SUBJECTS)}")
    t0 = time.monotonic()
    data_dir = Path(data) if data else shipped_data(Path(settings.home) / "build" / "factscore-dev")
    pages, _ = wiki_pages(data_dir)
    ex = load_examples(data_dir, pages, tuple(subjects))
    bios = [ex.bios[i] for i in held_out_bios(ex, limit, tuple(subjects))]
    check_decomposer(decomposer)
    loaded: list = [llm] if llm is not None else []
    models = Models.of(settings, cache=CallCache(settings.cache_path if settings.use_cache else None))

    def llm_fn():
        if not loaded:
            loaded.append(load_llm(settings, models.bundle, models.cache))
        return loaded[0]

    generator = make_decomposer(decomposer, llm_fn, models=models)  # as `score --decomposer` makes it
    name, sha = fact_source(decomposer, llm_fn, models)
    log(f"own facts of {len(bios)} bios, decomposer {decomposer}, with {name} ({sha[:12]}), {settings.threads} "
        "thread(s); every LLM call is cached: an interrupted run resumes")
    facts = generate_own_facts(bios, generator, progress)
    out = Path(out) if out else shipped_path(decomposer)
    made = fact_settings(name, sha, generator.describe(), settings.threads)
    extra = {"data": str(data) if data else "shipped", "limit": limit, "subjects": list(subjects)}
    sha = write_own_facts(out, made, bios, facts, extra)
    return {**made, **extra, "n_bios": len(bios), "n_facts": sum(map(len, facts)), "path": str(out), "sha256": sha,
            "total_s": round(time.monotonic() - t0, 1)}


def held_out_report(ex, fit, folds: int, fitted_for: dict) -> dict:
    """The build's held-out agreement (:mod:`fscore_lite.training.heldout`), topics held out and the LM
    held out too, for the paper's facts and each decomposer's own facts; F1(NS) on the human facts."""
    from fscore_lite.training.heldout import fact_f1, held_out_responses, subject_rows

    kinds = [k for k in ex.kinds if k != "human"]
    out = {}
    for hold in ("lm", "topic"):
        responses = held_out_responses(ex, kinds, fit, hold, folds, fitted_for)
        out[hold] = {kind: subject_rows(ex, responses[kind]) for kind in kinds} | {"f1_ns": fact_f1(ex, fit, hold, folds)}
    return out
