"""Q² steps 3b and 4: answering a question on a text, normalisation, self-consistency.

Both backends implement :class:`QuestionAnswerer`: ``answer(question, text)`` returns an
:class:`Answer`. The ONNX backend is the reference's extractive SQuAD-2 reader (argmax
span, CLS = no answer); the LLM backend is a few-shot prompt with an explicit
"unanswerable", whose answer is snapped to a span of the text (:func:`snap_to_span`) unless
built with ``snap=False`` (backend name ``llm-free``).
"""
from __future__ import annotations

import re
import string
from collections import Counter
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Protocol

from . import prompts

_PUNCT = str.maketrans("", "", string.punctuation)
_DROPPED_WORDS = re.compile(r"\b(a|an|the|in|our)\b")


def normalise_answer(text: str) -> str:
    """SPEC Q² step 3b normalisation: lower-case, strip ASCII punctuation, drop the words
    a/an/the/in/our, collapse runs of spaces, trim (the reference's ``clean_text``)."""
    text = text.lower().translate(_PUNCT)
    text = _DROPPED_WORDS.sub(" ", text)
    return re.sub(" +", " ", text).strip()


def span_tokens(text: str) -> list[tuple[int, int, list[str]]]:
    """The whitespace-separated pieces of ``text`` as ``(start, end, tokens)``: character offsets
    and the piece's :func:`normalise_answer` tokens (none for punctuation or a dropped word)."""
    return [(m.start(), m.end(), normalise_answer(m.group()).split()) for m in re.finditer(r"\S+", text)]


def snap_to_span(answer: str, text: str) -> str | None:
    """The contiguous span of ``text`` with the highest token F1 against ``answer``
    (:func:`normalise_answer` tokens, as :func:`~.compare.token_f1`); ties go to the earliest
    start, then the shortest span. The span runs over whole whitespace-separated pieces and is
    trimmed of surrounding punctuation. None when no token of the answer occurs in the text.

    Only spans that start and end on a piece holding an answer token are tried: dropping a piece
    without one from either end keeps the overlap and shortens the span, so it raises F1.
    """
    gold = Counter(normalise_answer(answer).split())
    if not gold:
        return None
    pieces = span_tokens(text)
    hits = {i for i, (_, _, toks) in enumerate(pieces) if any(t in gold for t in toks)}
    n_gold = sum(gold.values())
    best: tuple | None = None  # (f1, -start, -end)
    for a in sorted(hits):
        seen: Counter = Counter()
        same = length = 0
        for b in range(a, len(pieces)):
            for t in pieces[b][2]:
                length += 1
                seen[t] += 1
                if seen[t] <= gold[t]:
                    same += 1
            if b in hits:
                key = (Fraction(2 * same, length + n_gold), -a, -b)
                if best is None or key > best:
                    best = key
    if best is None:
        return None
    start, end = pieces[-best[1]][0], pieces[-best[2]][1]
    return text[start:end].strip(string.punctuation)


@dataclass(frozen=True)
class Answer:
    """An answer to one question: ``text`` as the backend gave it; ``no_answer`` when the
    model declined (the CLS span, or "unanswerable"); ``cls_in_span`` when an extractive
    span starts at CLS without being only CLS (the reference skips NLI for it)."""

    text: str
    no_answer: bool
    cls_in_span: bool = False

    def to_json(self) -> dict:
        return asdict(self)


def is_self_consistent(candidate: str, answer_on_response: Answer) -> bool:
    """SPEC Q² step 3b: the question, answered on the response, must give back the candidate
    exactly after :func:`normalise_answer`; a no-answer prediction invalidates it."""
    if answer_on_response.no_answer:
        return False
    return normalise_answer(candidate) == normalise_answer(answer_on_response.text)


class QuestionAnswerer(Protocol):
    backend: str
    name: str
    sha256: str

    def answer(self, question: str, text: str) -> Answer: ...

    # optional: ``answer_many(pairs) -> list[Answer]``, the same answers in one batch


class OnnxQuestionAnswerer:
    """The reference QA: an extractive SQuAD-2 model on onnxruntime."""

    backend = "onnx"

    def __init__(self, model):
        self.model = model  # fscore_lite.backends.onnx_qa.ExtractiveQA
        self.name, self.sha256 = model.name, model.sha256

    def answer(self, question: str, text: str) -> Answer:
        r = self.model.answer(question, text)
        return Answer(r.text, r.no_answer, r.cls_in_span and not r.no_answer)

    def answer_many(self, pairs: list[tuple[str, str]]) -> list[Answer]:
        """:meth:`answer` for several (question, text) pairs in one model call (one batch)."""
        return [Answer(r.text, r.no_answer, r.cls_in_span and not r.no_answer)
                for r in self.model.answer_batch(pairs)]

    def describe(self) -> dict:
        return {"backend": self.backend, "name": self.name, "sha256": self.sha256,
                "rule": "argmax start .. argmax end over the pair; CLS span = no answer"}


class LlmQuestionAnswerer:
    """QA by a few-shot prompt: copy the shortest answering span, or "unanswerable".

    ``snap`` (backend "llm"): the answer becomes the span of the text :func:`snap_to_span`
    finds, and an answer sharing no token with the text becomes no answer. Without it
    (backend "llm-free") the answer is the model's text as written."""

    def __init__(self, llm, snap: bool = True):
        self.llm = llm
        self.snap = snap
        self.backend = "llm" if snap else "llm-free"
        self.name, self.sha256 = llm.name, llm.sha256

    def _answer(self, completion: str, text: str) -> Answer:
        answer, no_answer = prompts.parse_answer(completion)
        if no_answer or not self.snap:
            return Answer(answer, no_answer)
        span = snap_to_span(answer, text)
        return Answer("", True) if span is None else Answer(span, False)

    def answer(self, question: str, text: str) -> Answer:
        return self._answer(self.llm.generate(prompts.qa_prompt(question, text), prompts.QA_MAX_TOKENS, ("\n",)), text)

    def answer_many(self, pairs: list[tuple[str, str]]) -> list[Answer]:
        """Answers decoded together (``LlamaRunner.generate_many``: the same as one at a time)."""
        outs = self.llm.generate_many([prompts.qa_prompt(q, t) for q, t in pairs], prompts.QA_MAX_TOKENS, ("\n",))
        return [self._answer(o, t) for o, (_, t) in zip(outs, pairs)]

    def describe(self) -> dict:
        rule = f"few-shot prompt, greedy; '{prompts.NO_ANSWER}' = no answer"
        if self.snap:
            rule += ("; the answer is snapped to the span of the text with the best token F1 (earliest, then "
                     "shortest), an answer sharing no token with the text = no answer")
        return {"backend": self.backend, "name": self.name, "sha256": self.sha256, "rule": rule}
