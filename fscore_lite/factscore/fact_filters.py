"""Post-processing of generated atomic facts: the decomposer's failure modes, named and removed.

A small local LLM decomposes sentences worse than the paper's InstructGPT: it leaves
fragments ("He."), keeps citation markers ("…prayer books[1]."), loops within a fact
("… that is famous … that is well-known …") and emits chains of facts that each grow by one
phrase, or near-duplicates. Each rule here is a named deviation from the reference (recorded in
the summary under ``atomic_facts``); ``--decomposer reference`` applies none of them.

:func:`degenerate_kind` names what is wrong with a fact (for the meta-eval's share of
degenerate facts); :func:`apply_filters` rewrites a response's facts. Both are pure functions
of the facts given, so a response's facts never depend on other responses.
"""
from __future__ import annotations

import re

from . import spacy_pipeline

# the rules of the default decomposer, in the order they run
FILTERS = ("citations", "echoes", "loops", "fragments", "chains", "conjunctions", "duplicates")
DESCRIPTION = {
    "citations": "citation markers such as [1] removed",
    "echoes": ("a fact that runs on into the prompt's instruction (\"Please breakdown the following …\") "
               "cut before it"),
    "conjunctions": "a fact joining conjuncts with \"and\" split into one fact per conjunct (spaCy parse)",
    "loops": "a fact repeating a 3-word phrase is cut before the repetition",
    "fragments": "facts without a content word (\"He.\", \"She is.\") dropped",
    "chains": "a run of 3 or more facts each extending the previous one kept as its first and last",
    "duplicates": "facts whose content words repeat an earlier fact's of the response dropped",
}

_CITATION = re.compile(r"\s*\[(?:\d+(?:\s*[,–-]\s*\d+)*|citation needed)\]")
_WORD = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?")
# words that carry no fact on their own: a fact made of these only is a fragment
_FUNCTION = set("""a an the of in on at to for and or but nor so is was were are be been being am by with as from
that this these those it its he she they them him her his hers their theirs we us our you your i me my mine who whom
whose which what there here has have had do does did also not no yes very too""".split())


_ECHO = re.compile(r"\s*Please break ?down the following.*$", re.S | re.I)


def cut_echo(fact: str) -> str:
    """``fact`` before the prompt's instruction, when the model ran on into it."""
    head = _ECHO.sub("", fact).strip()
    if head == fact.strip() or not head:
        return head
    head = head.rstrip(" ,;:")
    return head if head.endswith((".", "!", "?")) else head + "."


def strip_citations(fact: str) -> str:
    return _CITATION.sub("", fact).strip()


def _words(fact: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(fact)]


def content_words(fact: str) -> list[str]:
    return [w for w in _words(fact) if w not in _FUNCTION]


def is_fragment(fact: str) -> bool:
    return not content_words(fact)


def loop_start(fact: str) -> int | None:
    """Character offset where a fact starts repeating a 3-word phrase it already said, or None."""
    spans = [(m.start(), m.group().lower()) for m in _WORD.finditer(fact)]
    seen: set[tuple[str, ...]] = set()
    for i in range(len(spans) - 2):
        gram = tuple(w for _, w in spans[i:i + 3])
        if gram in seen:
            return spans[i][0]
        seen.add(gram)
    return None


def cut_loop(fact: str) -> str:
    at = loop_start(fact)
    if at is None:
        return fact
    head = fact[:at].rstrip(" ,;:-")
    for joiner in (" that is", " that", " and", " which is", " which", " who is", " who", " is", " in", " of"):
        if head.lower().endswith(joiner):
            head = head[: -len(joiner)]
            break
    return head.rstrip(" ,;:-") + "."


def _stem(fact: str) -> str:
    """A fact without its final punctuation, lowercased: what a longer fact of a chain starts with."""
    return fact.rstrip(" .!?").lower()


def extends(longer: str, shorter: str) -> bool:
    """Whether ``longer`` is ``shorter`` with words added at its end."""
    s, long_ = _stem(shorter), _stem(longer)
    return bool(s) and (long_.startswith(s + " ") or long_.startswith(s + ","))


def collapse_chains(facts: list[str], min_len: int = 3) -> list[str]:
    """Runs of ``min_len`` or more consecutive facts each extending the previous: keep the first and last."""
    out: list[str] = []
    i = 0
    while i < len(facts):
        j = i
        while j + 1 < len(facts) and extends(facts[j + 1], facts[j]):
            j += 1
        out += [facts[i], facts[j]] if j - i + 1 >= min_len else facts[i:j + 1]
        i = j + 1
    return out


def _key(fact: str) -> tuple[str, ...]:
    return tuple(sorted(set(content_words(strip_citations(fact)))))


def drop_duplicates(facts: list[str], seen: set | None = None) -> list[str]:
    """Facts whose set of content words equals an earlier one's (``seen``: those of earlier sentences)."""
    seen = set() if seen is None else seen
    out = []
    for f in facts:
        k = _key(f)
        if k in seen:
            continue
        seen.add(k)
        out.append(f)
    return out


def degenerate_kind(fact: str, earlier: list[str]) -> str | None:
    """What is wrong with ``fact`` given the facts before it in its response: "fragment", "echo" (runs
    on into the prompt's instruction), "loop"
    (repeats a phrase, or third or later link of a growing chain), "duplicate", "citation", or None."""
    if is_fragment(fact):
        return "fragment"
    if _ECHO.search(fact):
        return "echo"
    if loop_start(fact) is not None:
        return "loop"
    if len(earlier) >= 2 and extends(fact, earlier[-1]) and extends(earlier[-1], earlier[-2]):
        return "loop"
    if _key(fact) in {_key(e) for e in earlier}:
        return "duplicate"
    if _CITATION.search(fact):
        return "citation"
    return None


def degenerate_counts(facts: list[str]) -> dict[str, int]:
    """How many of a response's facts (in order) are of each degenerate kind."""
    counts: dict[str, int] = {}
    for i, f in enumerate(facts):
        kind = degenerate_kind(f, facts[:i])
        if kind:
            counts[kind] = counts.get(kind, 0) + 1
    return counts


def apply_filters(pairs: list[tuple[str, list[str]]], filters=FILTERS, nlp=None) -> list[tuple[str, list[str]]]:
    """A response's (sentence, facts) pairs with ``filters`` applied (duplicates across the response).
    ``conjunctions`` parses with ``nlp`` (default: the clean-up's spaCy pipeline; skipped without one,
    which the summary's ``spacy_cleanup`` records)."""
    from .conjunctions import split_conjunctions

    if "conjunctions" in filters and nlp is None:
        nlp = spacy_pipeline.pipeline()
    seen: set = set()
    out = []
    for sent, facts in pairs:
        if "citations" in filters:
            facts = [strip_citations(f) for f in facts]
        if "echoes" in filters:
            facts = [f for f in map(cut_echo, facts) if f]
        if "loops" in filters:
            facts = [cut_loop(f) for f in facts]
        if "fragments" in filters:
            facts = [f for f in facts if not is_fragment(f)]
        if "chains" in filters:
            facts = collapse_chains(facts)
        if "conjunctions" in filters and nlp is not None:
            facts = split_conjunctions(facts, nlp)
        if "duplicates" in filters:
            facts = drop_duplicates(facts, seen)
        out.append((sent, [f for f in facts if f]))
    return out


def filters_of(decomposer: str):
    """The post-processing step of a decomposer: (sentence, facts) pairs → pairs."""
    if decomposer == "reference":
        return lambda pairs: pairs
    if decomposer == "default":
        return apply_filters
    raise ValueError(f"unknown decomposer {decomposer!r}")


def describe_filters(decomposer: str) -> dict:
    """For the summary: each filter applied (a named deviation), or the reference's none."""
    if decomposer == "reference":
        return {"none": "the reference's post-processing only (--decomposer reference)"}
    return {name: f"{DESCRIPTION[name]} (deviation)" for name in FILTERS}
