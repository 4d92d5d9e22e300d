"""bench.q2_unanswered: rescoring only the questions the knowledge side left unanswered."""
from __future__ import annotations

from bench.q2_unanswered import RULES, rescored, unanswered_pairs


def _record():
    return {"response": "She was born in Warsaw.", "knowledge": "Marie Curie was Born in WARSAW.",
            "Q2": 0.5, "e2e_nli": 0.5,
            "questions": [
                {"question": "She was born where?", "candidate": "Warsaw", "knowledge_no_answer": True, "score": 0.0},
                {"question": "Who was born?", "candidate": "She", "knowledge_no_answer": False, "score": 1.0},
            ]}


def test_only_unanswered_questions_get_a_pair_and_the_premise_is_the_lower_cased_knowledge():
    assert unanswered_pairs(_record()) == [("marie curie was born in warsaw.", "She was born where? Warsaw.")]


def test_each_rule_rescores_the_unanswered_question_and_keeps_the_others():
    r = _record()
    assert rescored(r, ["entailment"], RULES["zero"]) == 0.5  # the paper's rule: the run's own score
    assert rescored(r, ["entailment"], RULES["nli"]) == 1.0
    assert rescored(r, ["neutral"], RULES["nli"]) == 0.5
    assert rescored(r, ["neutral"], RULES["nli-graded"]) == 0.75
    assert rescored(r, ["entailment"], RULES["nli-half"]) == 0.75
    assert rescored(r, ["contradiction"], RULES["e2e"]) == 0.75  # the response's end-to-end score, 0.5


def test_a_response_without_a_valid_question_keeps_its_fallback_score():
    r = {**_record(), "questions": [], "Q2": 0.5}
    assert unanswered_pairs(r) == [] and rescored(r, [], RULES["nli"]) == 0.5
