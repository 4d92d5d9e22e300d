"""Q² steps 5 and 6: comparing the candidate with the knowledge answer, and the NLI judges.

Both NLI backends implement :class:`EntailmentJudge`: ``label(premise, hypothesis)``
returns "entailment", "neutral" or "contradiction".

* ONNX: the reference's kind of model, a 3-label NLI cross-encoder (label order from its
  config).
* LLM: one yes/no question ("Does the premise support the hypothesis?") decided by the
  log-probabilities of the first answer token, summed over the spellings "Yes"/" Yes" and
  "No"/" No". Yes maps to entailment, no to neutral: a yes/no question cannot tell neutral
  from contradiction (prompted three-way NLI was tried and is unreliable). Consequences:
  per question, "no" keeps the F1 (the neutral rule); in the end-to-end fallback, "no"
  scores 0.5 (neutral), which the meta-evaluation's threshold (inconsistent iff
  score <= 0.5) treats exactly like a contradiction.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Protocol

from ..stopwords import STOPWORDS
from . import prompts
from .answer import Answer, normalise_answer

ENTAILMENT, NEUTRAL, CONTRADICTION = "entailment", "neutral", "contradiction"
E2E_SCORES = {ENTAILMENT: 1.0, NEUTRAL: 0.5, CONTRADICTION: 0.0}


def token_f1(candidate: str, answer: str) -> float:
    """SPEC Q² step 5: token F1 between the candidate and the knowledge answer over
    :func:`normalise_answer` tokens; an empty answer scores 0."""
    if answer == "":
        return 0.0
    gold = normalise_answer(candidate).split()
    pred = normalise_answer(answer).split()
    same = sum((Counter(gold) & Counter(pred)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def knowledge_f1(candidate: str, knowledge_answer: Answer) -> float:
    """SPEC Q² step 5: no answer on the knowledge scores 0, otherwise :func:`token_f1`."""
    return 0.0 if knowledge_answer.no_answer else token_f1(candidate, knowledge_answer.text)


def needs_nli(f1: float, knowledge_answer: Answer) -> bool:
    """SPEC Q² step 5: NLI runs when 0 <= F1 < 1 and there is an answer (not the no-answer
    marker, not a span that contains it, not empty)."""
    return (0 <= f1 < 1 and not knowledge_answer.no_answer and not knowledge_answer.cls_in_span
            and knowledge_answer.text != "")


def nli_pair(question: str, candidate: str, knowledge_answer: str) -> tuple[str, str]:
    """SPEC Q² step 5: premise ``q + " " + knowledge_answer + "."``, hypothesis ``q + " " + candidate + "."``."""
    return f"{question} {knowledge_answer}.", f"{question} {candidate}."


def question_score(f1: float, nli_label: str | None) -> float:
    """SPEC Q² step 5 mapping: entailment → 1, contradiction → 0, neutral (or no NLI) → F1."""
    if nli_label == ENTAILMENT:
        return 1.0
    if nli_label == CONTRADICTION:
        return 0.0
    return f1


# words that carry no claim: the FActScore content-word stop list, plus chit-chat pronouns and
# contractions as normalise_answer spells them
OVERLAP_STOPWORDS = STOPWORDS | frozenset("i me my mine you your yours we us im ive id youre dont".split())


def content_tokens(text: str) -> list[str]:
    """The :func:`normalise_answer` tokens of ``text`` that are not in :data:`OVERLAP_STOPWORDS`."""
    return [t for t in normalise_answer(text).split() if t not in OVERLAP_STOPWORDS]


def token_overlap(response: str, knowledge: str) -> float:
    """The model-free baseline: the share of the response's content tokens (with repeats) that
    occur among the knowledge's :func:`normalise_answer` tokens; 1.0 for a response without
    a content token (it claims nothing)."""
    tokens = content_tokens(response)
    if not tokens:
        return 1.0
    known = set(normalise_answer(knowledge).split())
    return sum(t in known for t in tokens) / len(tokens)


def e2e_pair(response: str, knowledge: str) -> tuple[str, str]:
    """SPEC Q² step 6 fallback input: premise = the knowledge lower-cased, hypothesis = the response."""
    return knowledge.lower(), response


def e2e_score(label: str) -> float:
    """SPEC Q² step 6 fallback mapping: entailment 1, neutral 0.5, contradiction 0."""
    return E2E_SCORES[label]


class EntailmentJudge(Protocol):
    backend: str
    name: str
    sha256: str

    def label(self, premise: str, hypothesis: str) -> str: ...

    # optional: ``labels_many(pairs) -> list[str]``, the same labels in one batch


class OnnxEntailmentJudge:
    """The reference NLI: a 3-label cross-encoder on onnxruntime (argmax label)."""

    backend = "onnx"

    def __init__(self, model):
        self.model = model  # fscore_lite.backends.onnx_nli.NliCrossEncoder
        self.name, self.sha256 = model.name, model.sha256

    def label(self, premise: str, hypothesis: str) -> str:
        return self.model.predict(premise, hypothesis)["label"]

    def labels_many(self, pairs: list[tuple[str, str]]) -> list[str]:
        """:meth:`label` for several (premise, hypothesis) pairs in one model call (one batch)."""
        return [r["label"] for r in self.model.predict_batch(pairs)]

    def describe(self) -> dict:
        return {"backend": self.backend, "name": self.name, "sha256": self.sha256,
                "labels": list(self.model.labels)}


def _logsumexp(values) -> float:
    m = max(values)
    return m + math.log(sum(math.exp(v - m) for v in values))


class LlmEntailmentJudge:
    """Yes/no entailment question to the local LLM, decided by next-token log-probabilities."""

    backend = "llm"

    def __init__(self, llm):
        self.llm = llm
        self.name, self.sha256 = llm.name, llm.sha256

    def yes_margin(self, premise: str, hypothesis: str) -> float:
        """log P(yes) - log P(no) for the first answer token (spelling variants summed)."""
        words = [*prompts.YES_WORDS, *prompts.NO_WORDS]
        lp = self.llm.next_token_logprobs(prompts.entailment_prompt(premise, hypothesis), words)
        return _logsumexp([lp[w] for w in prompts.YES_WORDS]) - _logsumexp([lp[w] for w in prompts.NO_WORDS])

    def label(self, premise: str, hypothesis: str) -> str:
        return ENTAILMENT if self.yes_margin(premise, hypothesis) > 0 else NEUTRAL

    def labels_many(self, pairs: list[tuple[str, str]]) -> list[str]:
        return [self.label(p, h) for p, h in pairs]

    def describe(self) -> dict:
        return {"backend": self.backend, "name": self.name, "sha256": self.sha256,
                "rule": "yes/no question by log-probabilities; yes = entailment, no = neutral "
                        "(contradiction is never predicted; the fallback scores no as 0.5)"}
