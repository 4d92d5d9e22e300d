"""The default decomposer's own facts of the training bios: made once, then fitted on.

* :func:`make_own_facts` (``fscore-lite models own-facts``): every annotated development bio's
  ``output`` (the bios the verifier trains on: responded, with a page and the paper's facts)
  through ``score``'s own :class:`~fscore_lite.factscore.atomic_facts.AtomicFactGenerator` with
  the default decomposer — every LLM call in the call cache, so an interrupted run resumes —
  written to ``models/data/own-facts-dev.jsonl.gz`` with the settings that made them and its
  sha256 beside it (:mod:`fscore_lite.training.own_facts`).
* :func:`fit_own_calibration` (``models train verifier``, when that file is present): the own
  facts featurised like the paper's, each training bio's probabilities from the fold combiner
  that never saw its topic, and the threshold and the share means' offset fitted on them against
  the human FActScores (:mod:`fscore_lite.training.own_calibration`).
"""
from __future__ import annotations

import time
from pathlib import Path

from fscore_lite.training.labeled import SUBJECTS
from fscore_lite.training.own_facts import FILE_NAME, read_own_facts

from .sources import SHIPPED, shipped_data

SHIPPED_OWN_FACTS = SHIPPED / FILE_NAME


def shipped_own_facts(data: str | Path | None = None) -> Path | None:
    """The own-facts file a build on ``data`` uses: the shipped one for the shipped data, when present."""
    return SHIPPED_OWN_FACTS if data is None and SHIPPED_OWN_FACTS.exists() else None


def make_own_facts(settings, out: Path | None = None, data: Path | None = None, limit: int | None = None,
                   subjects=SUBJECTS, log=print, progress: bool = True, llm=None) -> dict:
    """Generate and write the own facts; return the header written (with ``path`` and ``sha256``)."""
    from fscore_lite.backends.llm import load_llm
    from fscore_lite.cache import CallCache
    from fscore_lite.errors import FscoreError
    from fscore_lite.factscore.atomic_facts import AtomicFactGenerator
    from fscore_lite.manifest import Bundle
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
    cache = CallCache(settings.cache_path if settings.use_cache else None)
    llm = llm if llm is not None else load_llm(settings, Bundle(settings.models_dir), cache)
    generator = AtomicFactGenerator(llm)  # the default decomposer, as `score` makes it
    log(f"own facts of {len(bios)} bios with {llm.name} ({llm.sha256[:12]}), {settings.threads} thread(s); "
        "every call is cached: an interrupted run resumes")
    facts = generate_own_facts(bios, generator, progress)
    out = Path(out) if out else SHIPPED_OWN_FACTS
    made = fact_settings(llm.name, llm.sha256, generator.describe(), settings.threads)
    extra = {"data": str(data) if data else "shipped", "limit": limit, "subjects": list(subjects)}
    sha = write_own_facts(out, made, bios, facts, extra)
    return {**made, **extra, "n_bios": len(bios), "n_facts": sum(map(len, facts)), "path": str(out), "sha256": sha,
            "total_s": round(time.monotonic() - t0, 1)}


def fit_own_calibration(ex, oof, names, pool, path: Path, target, log=print) -> dict:
    """The verifier entry's ``own_facts_calibration`` for the combiner ``target``: fitted on the own
    facts in ``path`` of the training bios, each bio's probabilities from ``oof``'s combiner that never
    saw its topic."""
    from fscore_lite.errors import FscoreError
    from fscore_lite.training.examples import Examples, Fact, featurise
    from fscore_lite.training.own_calibration import calibration_from_cv, own_rows_by_bio

    own = read_own_facts(path)
    facts = []
    for i, b in enumerate(ex.bios):
        facts += [Fact(b.topic, f, i, None) for f in own.facts_of(b) or ()]
    own_ex = Examples(ex.bios, [], facts, ex.human_share)
    found = len({f.bio for f in facts})
    log(f"{path.name}: facts of {found} of the {len(ex.bios)} training bios ({len(own.records)} bios in the file)")
    t = time.monotonic()
    featurise(own_ex, *pool[0], None, more=pool[1:])
    try:
        fitted = calibration_from_cv(ex, oof, own_rows_by_bio(own_ex), target)
    except ValueError as e:
        raise FscoreError(f"{path}: {e}") from None
    fitted.pop("bios")
    log(f"own-facts calibration: {fitted['n_bios']} bios, {fitted['n_facts']} facts ({time.monotonic() - t:.0f} s): "
        f"threshold {fitted['threshold']:.4f}, {fitted['method']} a {fitted['line'][0]:+.4f} b {fitted['line'][1]:.4f}, "
        "share means "
        f"({fitted['p_supported']:.4f}, {fitted['p_not_supported']:.4f})")
    return fitted | {"calibrated_for_facts": own.settings() | {"facts_file_sha256": own.sha256}}
