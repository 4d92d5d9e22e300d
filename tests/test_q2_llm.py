"""Q² with the LLM backend for every role (the 0.5B GGUF model), on Wizard-of-Wikipedia rows.

A response that copies its knowledge must score higher than a twin whose key fact was
changed. About 30 LLM calls, well under a minute on one thread.
"""
from __future__ import annotations

import csv

import pytest

pytestmark = pytest.mark.llm

# (topic of a dodeca_consistent.csv row, grounded response, the same with its key fact altered)
PAIRS = [
    ("Gardening", "gardening is considered to be a relaxing activity .",
     "gardening is considered to be a stressful activity ."),
    ("Penguin Random House", "penguin random house employs more than 10,000 people globally .",
     "penguin random house employs fewer than 50 people in spain ."),
]


@pytest.fixture(scope="module")
def llm_roles(test_llm):
    from fscore_lite.q2.answer import LlmQuestionAnswerer
    from fscore_lite.q2.compare import LlmEntailmentJudge
    from fscore_lite.q2.generate import LlmQuestionGenerator
    from fscore_lite.q2.roles import Q2Roles

    return Q2Roles(LlmQuestionGenerator(test_llm), LlmQuestionAnswerer(test_llm), LlmEntailmentJudge(test_llm))


def _knowledge(data_dir, topic: str) -> str:
    with open(data_dir / "q2-wow" / "dodeca_consistent.csv", newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row["topic"] == topic:
                return row["knowledge"]
    raise AssertionError(f"no {topic} row")


def test_answer_token_spelling(test_llm):
    """After the entailment prompt the model answers with the space-prefixed " Yes"/" No" tokens."""
    from fscore_lite.q2.prompts import entailment_prompt

    assert len(test_llm.tokenize(" Yes", add_bos=False)) == 1 and len(test_llm.tokenize(" No", add_bos=False)) == 1
    lp = test_llm.next_token_logprobs(entailment_prompt("the sky is blue.", "the sky is blue."),
                                      ["Yes", " Yes", "No", " No"])
    assert max(lp[" Yes"], lp[" No"]) > max(lp["Yes"], lp["No"])


@pytest.mark.parametrize("topic,grounded,twin", PAIRS)
def test_grounded_response_beats_contradicted_twin(data_dir, llm_roles, topic, grounded, twin):
    from fscore_lite.q2.score import score_response
    from fscore_lite.q2.spans import load_nlp

    knowledge = _knowledge(data_dir, topic)
    nlp = load_nlp()
    good = score_response(grounded, knowledge, llm_roles, nlp)
    bad = score_response(twin, knowledge, llm_roles, nlp)
    assert good["Q2"] > bad["Q2"], (good, bad)
    for out in (good, bad):
        assert out["no_valid_question"] == (out["fallback"] is not None)
        for q in out["questions"]:
            assert 0.0 <= q["f1"] <= 1.0 and q["nli_label"] in (None, "entailment", "neutral")
