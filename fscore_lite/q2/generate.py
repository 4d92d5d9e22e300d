"""Q² step 2, question generation: the reference's T5 input and decoding, or an LLM prompt.

Both backends implement :class:`QuestionGenerator`: ``questions(answer, context)`` returns
the candidate questions for one answer candidate, best first, and ``questions_many(answers,
context)`` those of each candidate of a response. The ONNX backend returns the 5 beams of the
reference's beam search; the LLM backend returns its one greedy question (a response's
candidates decoded together, the same strings as one at a time).
"""
from __future__ import annotations

from typing import Protocol

from . import prompts

# The reference's decoding settings (SPEC Q² step 2).
NUM_BEAMS = 5
NUM_RETURN = 5
NO_REPEAT_NGRAM_SIZE = 3
MAX_LENGTH = 128
QUESTION_PREFIX = "question: "


def qg_input(answer: str, context: str) -> str:
    """SPEC Q² step 2: the T5 input ``answer: {cand}  context: {response} </s>`` (two spaces)."""
    return f"answer: {answer}  context: {context} </s>"


def strip_question_prefix(text: str) -> str:
    """SPEC Q² step 2: remove the ``question: `` the QG model writes before its question.

    Like the reference (``replace("question: ", "", 1)``) the first occurrence is removed;
    the model always puts it at the start.
    """
    return text.replace(QUESTION_PREFIX, "", 1)


class QuestionGenerator(Protocol):
    backend: str
    name: str
    sha256: str

    def questions(self, answer: str, context: str) -> list[str]: ...

    def questions_many(self, answers: list[str], context: str) -> list[list[str]]: ...


class OnnxQuestionGenerator:
    """The reference QG: T5 seq2seq on onnxruntime, beam search 5/5, no-repeat 3-grams, length 128."""

    backend = "onnx"

    def __init__(self, model):
        self.model = model  # fscore_lite.backends.onnx_seq2seq.Seq2SeqGenerator
        self.name, self.sha256 = model.name, model.sha256

    SETTINGS = {"num_beams": NUM_BEAMS, "num_return": NUM_RETURN, "max_length": MAX_LENGTH,
                "no_repeat_ngram_size": NO_REPEAT_NGRAM_SIZE, "early_stopping": True}

    def questions(self, answer: str, context: str) -> list[str]:
        beams = self.model.beam_generate(qg_input(answer, context), **self.SETTINGS)
        return [strip_question_prefix(b["text"]) for b in beams]

    def questions_many(self, answers: list[str], context: str) -> list[list[str]]:
        """:meth:`questions` for each answer candidate, all decoded together: one encoder call,
        then one decoder call per step for every candidate's beams (``beam_generate_many``)."""
        outs = self.model.beam_generate_many([qg_input(a, context) for a in answers], **self.SETTINGS)
        return [[strip_question_prefix(b["text"]) for b in beams] for beams in outs]

    def describe(self) -> dict:
        return {"backend": self.backend, "name": self.name, "sha256": self.sha256,
                "decoding": f"beam search: {NUM_BEAMS} beams, {NUM_RETURN} returned, "
                            f"no_repeat_ngram_size {NO_REPEAT_NGRAM_SIZE}, max_length {MAX_LENGTH}, early stopping"}


class LlmQuestionGenerator:
    """QG by a few-shot prompt to the local LLM; one greedy question per candidate."""

    backend = "llm"

    def __init__(self, llm):
        self.llm = llm  # fscore_lite.backends.llm.LlamaRunner
        self.name, self.sha256 = llm.name, llm.sha256

    def questions(self, answer: str, context: str) -> list[str]:
        out = self.llm.generate(prompts.qg_prompt(answer, context), prompts.QG_MAX_TOKENS, ("\n",))
        question = prompts.parse_question(out)
        return [question] if question else []

    def questions_many(self, answers: list[str], context: str) -> list[list[str]]:
        """:meth:`questions` for each candidate, decoded together (``LlamaRunner.generate_many``:
        the same strings as one at a time)."""
        outs = self.llm.generate_many([prompts.qg_prompt(a, context) for a in answers], prompts.QG_MAX_TOKENS, ("\n",))
        return [[q] if (q := prompts.parse_question(o)) else [] for o in outs]

    def describe(self) -> dict:
        return {"backend": self.backend, "name": self.name, "sha256": self.sha256,
                "decoding": "few-shot prompt, one greedy question per candidate"}
