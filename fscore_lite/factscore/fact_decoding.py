"""How the atomic-fact prompt is decoded: the reference's way, or the faster default.

``--decomposer reference``: greedy, one token at a time, up to 128 tokens, stopped at a blank line
(the reference's prompts and decoding, byte-faithful; ``--parallel`` decodes up to 3 together).

``--decomposer default`` (named deviations, see :func:`describe`): the same prompt, greedy, with
  * drafts looked up in the prompt (:mod:`fscore_lite.backends.llm_lookup`): facts copy the
    sentence's words, so several tokens are often accepted per decoding step;
  * the KV states of the fixed demos followed by each BM25 demo kept (cost only, same bits);
  * stop rules that end the fact list where the reference's output stops being facts: a line
    that is not a "- " item, a fact that repeats an earlier one (a loop), or a fact past
    ``MAX_FACT_WORDS`` words (a runaway); the text ends before that line.
Its facts are a function of the sentence's prompt, the model, these settings and the thread
count; they need not equal the reference's decoding bit for bit.
"""
from __future__ import annotations


LLM_DECOMPOSERS = ("default", "reference")  # the decomposers decoded here (the registry: .decomposers)
MAX_FACT_WORDS = 40  # the paper's human facts have at most ~30 words; past this it is a loop
STOP_RULE = "v1: blank line | non-item line | repeated fact | fact > 40 words"


def _norm(line: str) -> str:
    return " ".join(line.lstrip("- ").rstrip(" .").lower().split())


def fact_stop(text: str) -> int | None:
    """Where a completion's fact list ends (the text is cut there), or None to go on."""
    blank = text.find("\n\n")
    if blank >= 0:
        return blank
    seen: set[str] = set()
    start = 0
    lines = text.split("\n")
    for n, line in enumerate(lines):
        complete = n < len(lines) - 1
        if n > 0 and line.strip() and not line.lstrip().startswith("-"):
            return start  # a line that is not an item: another prompt block, a comment
        if len(line.split()) > MAX_FACT_WORDS + 1:
            return start  # a runaway fact
        if complete:
            key = _norm(line)
            if key and key in seen:
                return start  # a loop: the same fact again
            seen.add(key)
        start += len(line) + 1
    return None


def cut(text: str) -> str:
    """``text`` ended where :func:`fact_stop` ends it (its last line taken as complete)."""
    end = fact_stop(text + "\n")
    return text if end is None else text[:end]


def describe(decomposer: str) -> dict:
    """The decoding settings that change facts, for the summary (and the resume key)."""
    if decomposer == "reference":
        return {"decomposer": "reference: greedy, one token a step, <= 128 tokens, stop at a blank line"}
    from ..backends.llm_lookup import DRAFT, NGRAM  # numpy: not at import, the CLI lists choices from here
    drafts = f"prompt-lookup drafts ({DRAFT} tokens, n-grams {list(NGRAM)})" if DRAFT else "no drafts"
    return {"decomposer": (f"default (deviation, --decomposer reference for the reference's decoding): greedy, "
                           f"{drafts}, KV states of the fixed demos with each BM25 demo kept, <= 128 tokens, "
                           f"stop rules {STOP_RULE}")}
