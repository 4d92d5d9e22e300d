"""Q² steps 3b and 4: answering a question on a text, normalisation, self-consistency.

Both backends implement :class:`QuestionAnswerer`: ``answer(question, text)`` returns an
:class:`Answer`. The ONNX backend is the reference's extractive SQuAD-2 reader (argmax
span, CLS = no answer); the LLM backend is a few-shot prompt with an explicit
"unanswerable".
"""
from __future__ import annotations

import re
import string
from dataclasses import asdict, dataclass
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
    """QA by a few-shot prompt: copy the shortest answering span, or "unanswerable"."""

    backend = "llm"

    def __init__(self, llm):
        self.llm = llm
        self.name, self.sha256 = llm.name, llm.sha256

    def answer(self, question: str, text: str) -> Answer:
        out = self.llm.generate(prompts.qa_prompt(question, text), prompts.QA_MAX_TOKENS, ("\n",))
        answer, no_answer = prompts.parse_answer(out)
        return Answer(answer, no_answer)

    def answer_many(self, pairs: list[tuple[str, str]]) -> list[Answer]:
        """Answers decoded together (``LlamaRunner.generate_many``: the same as one at a time)."""
        outs = self.llm.generate_many([prompts.qa_prompt(q, t) for q, t in pairs], prompts.QA_MAX_TOKENS, ("\n",))
        return [Answer(*prompts.parse_answer(o)) for o in outs]

    def describe(self) -> dict:
        return {"backend": self.backend, "name": self.name, "sha256": self.sha256,
                "rule": f"few-shot prompt, greedy; '{prompts.NO_ANSWER}' = no answer"}
