"""Token-overlap comparison of generated facts with human facts (no model): the decomposer proxy's measure.

``a`` entails ``b`` when at least 80% of ``b``'s content words occur in ``a``; :func:`compare` gives
facts per sentence, long facts, coverage (human facts some generated fact entails), precision
(generated facts some human fact entails) and the degenerate share. Used by ``meta-eval decomposer``
and by the decomposer's build (its held-out proxy).
"""
from __future__ import annotations

from .fact_filters import content_words, degenerate_counts

LONG_WORDS = 15


def entails(a: str, b: str, threshold: float = 0.8) -> bool:
    """Token-overlap entailment: ≥ ``threshold`` of ``b``'s content words occur in ``a``."""
    want = content_words(b)
    if not want:
        return False
    have = set(content_words(a))
    return sum(w in have for w in want) / len(want) >= threshold


def compare(generated: list[list[str]], human: list[list[str]]) -> dict:
    """Facts per sentence, long facts, coverage, precision and degenerate share over the sample."""
    n_gen, n_hum = sum(map(len, generated)), sum(map(len, human))
    covered = sum(any(entails(g, h) for g in gs) for gs, hs in zip(generated, human) for h in hs)
    entailed = sum(any(entails(h, g) for h in hs) for gs, hs in zip(generated, human) for g in gs)
    degen = sum(sum(degenerate_counts(gs).values()) for gs in generated)
    return {"facts_per_sentence": n_gen / len(generated), "human_facts_per_sentence": n_hum / len(human),
            "long_facts": sum(len(g.split()) > LONG_WORDS for gs in generated for g in gs),
            "human_long_facts": sum(len(h.split()) > LONG_WORDS for hs in human for h in hs),
            "coverage": covered / n_hum if n_hum else None, "precision": entailed / n_gen if n_gen else None,
            "degenerate_share": degen / n_gen if n_gen else None}
