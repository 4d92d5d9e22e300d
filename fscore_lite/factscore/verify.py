"""Verification (SPEC FActScore §5–6): the prompt, and the two decision rules.

Parity mode builds the reference's prompt byte for byte for each fact. Its calls are ordered
so that consecutive prompts share the longest possible prefix (same topic definition, same
leading passages); the LLM runner evaluates a shared prefix once. Results are mapped back to
the facts' order, so the ordering changes cost only, never a decision.

Shared-context mode (a named deviation, ``--mode shared-context``) evaluates one context per
response — the definition line plus the union of the passages retrieved for all of its facts,
in page order, capped at a token budget — and verifies each fact as a short suffix.
"""
from __future__ import annotations

import math
import string
from dataclasses import dataclass

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the CLI imports this module for its defaults
    from .retrieve import Evidence

TRUE_WORDS = ("True", " True")
FALSE_WORDS = ("False", " False")
DEFAULT_CONTEXT_BUDGET = 2048


def _definition(topic: str) -> str:
    return "Answer the question about {} based on the given context.\n\n".format(topic)


def _clean(text: str) -> str:
    return text.replace("<s>", "").replace("</s>", "")


def _context(topic: str, passages_in_prompt_order) -> str:
    definition = _definition(topic)
    context = "".join("Title: {}\nText: {}\n\n".format(p.title, _clean(p.text)) for p in passages_in_prompt_order)
    definition += context.strip()
    if definition[-1] not in string.punctuation:
        definition += "."
    return definition.strip()


def fact_suffix(fact: str) -> str:
    return "\n\nInput: {} True or False?\nOutput:".format(fact.strip())


def build_prompt(topic: str, fact: str, evidence: list[Evidence]) -> str:
    """SPEC §5: definition, passages in reversed rank order (best last), <s>/</s> removed,
    stripped, "." added unless the last character is punctuation, then the question."""
    ordered = [e.passage for e in sorted(evidence, key=lambda e: e.rank, reverse=True)]
    return _context(topic, ordered) + fact_suffix(fact)


def _lse(values) -> float:
    m = max(values)
    return m + math.log(sum(math.exp(v - m) for v in values))


def margin_from_logprobs(logprobs: dict[str, float]) -> float:
    """log P(first token spells True) − log P(first token spells False).

    The reference compares the logits of LLaMA's "True"/"False" ids; we map both words through
    the model's own tokenizer, with and without the leading space a completion after
    "Output:" starts with, and compare the summed probabilities.
    """
    return _lse([logprobs[w] for w in TRUE_WORDS]) - _lse([logprobs[w] for w in FALSE_WORDS])


def decide_from_text(answer: str) -> bool:
    """SPEC §6 without logits: "true"/"false" alone decides; both: the later wins; neither:
    supported unless the answer contains not / cannot / unknown / information."""
    a = answer.lower()
    if "true" in a or "false" in a:
        if "true" in a and "false" not in a:
            return True
        if "false" in a and "true" not in a:
            return False
        return a.index("true") > a.index("false")
    words = a.translate(str.maketrans("", "", string.punctuation)).split()
    return all(k not in words for k in ("not", "cannot", "unknown", "information"))


@dataclass(frozen=True)
class Verdict:
    is_supported: bool
    margin: float | None  # log-probability margin True − False (None for the text rule)
    rule: str  # "logprob" | "text"


def logprob_verdict(logprobs: dict[str, float]) -> Verdict:
    """SPEC §6 with logits: supported iff True beats False (:func:`margin_from_logprobs` > 0)."""
    m = margin_from_logprobs(logprobs)
    return Verdict(m > 0, m, "logprob")


class Verifier:
    """Verifies a response's facts with a local LLM, in parity or shared-context mode."""

    def __init__(self, llm, mode: str = "parity", context_budget: int = DEFAULT_CONTEXT_BUDGET,
                 use_logprobs: bool = True):
        if mode not in ("parity", "shared-context"):
            raise ValueError(f"unknown verification mode {mode!r}")
        self.llm = llm
        self.mode = mode
        self.context_budget = context_budget
        self.use_logprobs = use_logprobs

    def _verdict_from_prompt(self, prompt: str) -> Verdict:
        if self.use_logprobs:
            return logprob_verdict(self.llm.next_token_logprobs(prompt, list(TRUE_WORDS + FALSE_WORDS)))
        return Verdict(decide_from_text(self.llm.generate(prompt, 8, ("\n",))), None, "text")

    def verify(self, topic: str, facts: list[str], evidence: list[list[Evidence]]) -> list[Verdict]:
        if self.mode == "shared-context" and self.use_logprobs and facts:
            return self._verify_shared(topic, facts, evidence)
        return self._verify_parity(topic, facts, evidence)

    @staticmethod
    def prefix_order(topic: str, evidence: list[list[Evidence]]) -> list[int]:
        """Fact indices ordered so that consecutive prompts share long prefixes (the passages
        appear worst-first in the prompt, so sort by that passage-id sequence)."""
        def key(i):
            return tuple(e.passage.id for e in sorted(evidence[i], key=lambda e: e.rank, reverse=True))
        return sorted(range(len(evidence)), key=lambda i: (key(i), i))

    def _verify_parity(self, topic, facts, evidence) -> list[Verdict]:
        out: list[Verdict | None] = [None] * len(facts)
        for i in self.prefix_order(topic, evidence):
            out[i] = self._verdict_from_prompt(build_prompt(topic, facts[i], evidence[i]))
        return out  # type: ignore[return-value]

    def shared_passages(self, evidence: list[list[Evidence]]):
        """The union of retrieved passages that fits the budget, in page order.

        Priority: passages retrieved for more facts first, then by best rank, then page order;
        the chosen ones are laid out in page order (ordinal, then id)."""
        seen: dict[int, list] = {}
        for ev in evidence:
            for e in ev:
                rec = seen.setdefault(e.passage.id, [e.passage, 0, e.rank])
                rec[1] += 1
                rec[2] = min(rec[2], e.rank)
        ranked = sorted(seen.values(), key=lambda r: (-r[1], r[2], r[0].title, r[0].ordinal, r[0].id))
        chosen, used = [], 0
        for passage, _, _ in ranked:
            cost = len(self.llm.tokenize("Title: {}\nText: {}\n\n".format(passage.title, _clean(passage.text)),
                                         add_bos=False))
            if used + cost > self.context_budget and chosen:
                continue
            chosen.append(passage)
            used += cost
        return sorted(chosen, key=lambda p: (p.title, p.ordinal, p.id))

    def _verify_shared(self, topic, facts, evidence) -> list[Verdict]:
        context = _context(topic, self.shared_passages(evidence))
        # the prompt is head + fact suffix + tail (tail is non-empty only with a chat template)
        head, tail = self.llm.split_template(context)
        prefix = self.llm.tokenize(head, add_bos=True, special=self.llm.chat_template)
        out = []
        for fact in facts:
            lp = self.llm.suffix_logprobs(prefix, fact_suffix(fact) + tail, list(TRUE_WORDS + FALSE_WORDS))
            out.append(logprob_verdict(lp))
        return out
