"""Abstention detection (SPEC FActScore §1): ``none`` (default), ``generic``, ``perplexity_ai``."""
from __future__ import annotations

import re

MODES = ("none", "generic", "perplexity_ai")

PERPLEXITY_REFUSALS = (
    "I could not find any information",
    "The search results do not provide",
    "There is no information",
    "There are no search results",
    "there are no provided search results",
    "not provided in the search results",
    "is not mentioned in the provided search results",
    "There seems to be a mistake in the question",
    "Not sources found",
    "No sources found",
    "Try a more general question",
)


def remove_citation(text: str) -> str:
    text = re.sub(r"\s*\[\d+\]\s*", "", text)
    if text.startswith("According to , "):
        text = text.replace("According to , ", "According to the search results, ")
    return text


def _generic(generation: str) -> bool:
    """SPEC §1 generic: starts with "I'm sorry" or contains "provide more"."""
    return generation.startswith("I'm sorry") or "provide more" in generation


def _perplexity_ai(generation: str) -> bool:
    """SPEC §1 perplexity_ai: a refusal phrase opens the answer, or no valid paragraph precedes one."""
    output = remove_citation(generation)
    lowered = [m.lower() for m in PERPLEXITY_REFUSALS]
    if any(output.lower().startswith(m) for m in lowered):
        return True
    valid = []
    for para in output.split("\n\n"):
        if len(para.strip()) == 0 or any(m in para.lower() for m in lowered):
            break
        valid.append(para.strip())
    return len(valid) == 0


def is_abstained(generation: str, mode: str) -> bool:
    if mode == "generic":
        return _generic(generation)
    if mode == "perplexity_ai":
        return _perplexity_ai(generation)
    if mode in ("none", "", None):
        return False
    raise ValueError(f"unknown abstention mode {mode!r} (choose from {', '.join(MODES)})")
