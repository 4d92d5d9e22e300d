"""Prompts for the LLM backend of each Q² role (used when no ONNX model for the role is installed).

Completion-style few-shot prompts for the local GGUF model, greedy and cached. The text a
call depends on (the response or the knowledge) comes before the per-call part, so calls on
the same text share a prompt prefix and llama.cpp re-evaluates only the tail.

The demonstrations are written for fscore-lite (not taken from any dataset), lower-cased
like the Wizard-of-Wikipedia responses Q² is evaluated on.
"""
from __future__ import annotations

QG_MAX_TOKENS = 48
QA_MAX_TOKENS = 32
NO_ANSWER = "unanswerable"
YES_WORDS = ("Yes", " Yes")
NO_WORDS = ("No", " No")

QG_PROMPT = """Write a question about the text whose answer is the given answer.

Text: the eiffel tower is in paris , it was built in 1889 .
Answer: 1889
Question: when was the eiffel tower built?

Text: i love dogs , labradors are my favourite breed because they are friendly .
Answer: labradors
Question: which breed is the favourite?

Text: {text}
Answer: {answer}
Question:"""

QA_PROMPT = """Copy the shortest part of the text that answers the question. If the text does not answer it, write "unanswerable".

Text: the eiffel tower is in paris , it was built in 1889 .
Question: when was the eiffel tower built?
Answer: 1889

Text: the eiffel tower is in paris , it was built in 1889 .
Question: who designed the eiffel tower?
Answer: unanswerable

Text: {text}
Question: {question}
Answer:"""

ENTAILMENT_PROMPT = """Premise: the eiffel tower is in paris, the capital of france.
Hypothesis: the tower is in france.
Does the premise support the hypothesis? Yes

Premise: marie curie was born in warsaw in 1867.
Hypothesis: she was born in 1903.
Does the premise support the hypothesis? No

Premise: the band released three albums in the 1990s.
Hypothesis: they released albums.
Does the premise support the hypothesis? Yes

Premise: he is a painter who lives in berlin.
Hypothesis: he is a famous painter from rome.
Does the premise support the hypothesis? No

Premise: {premise}
Hypothesis: {hypothesis}
Does the premise support the hypothesis?"""


def qg_prompt(answer: str, text: str) -> str:
    return QG_PROMPT.format(text=_one_line(text), answer=_one_line(answer))


def qa_prompt(question: str, text: str) -> str:
    return QA_PROMPT.format(text=_one_line(text), question=_one_line(question))


def entailment_prompt(premise: str, hypothesis: str) -> str:
    return ENTAILMENT_PROMPT.format(premise=_one_line(premise), hypothesis=_one_line(hypothesis))


def parse_question(completion: str) -> str:
    """The generated question: first line, stripped."""
    return completion.strip().split("\n", 1)[0].strip()


def parse_answer(completion: str) -> tuple[str, bool]:
    """``(answer, no_answer)``: the first line stripped; "unanswerable" (or nothing) means no answer."""
    text = completion.strip().split("\n", 1)[0].strip()
    bare = text.strip(" .\"'").lower()
    return text, bare in ("", NO_ANSWER, "none", "no answer", "n/a")


def _one_line(text: str) -> str:
    """Keep each field on one line so that the few-shot format holds."""
    return " ".join(text.split())
