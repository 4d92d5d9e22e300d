"""Unit tests for every Q² rule of SPEC.md, without model files (spaCy only where the rule uses it)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from fscore_lite.q2.answer import Answer, is_self_consistent, normalise_answer
from fscore_lite.q2.compare import (
    e2e_pair,
    e2e_score,
    knowledge_f1,
    needs_nli,
    nli_pair,
    question_score,
    token_f1,
)
from fscore_lite.q2.generate import qg_input, strip_question_prefix
from fscore_lite.q2.prompts import parse_answer, parse_question
from fscore_lite.q2.roles import Q2Roles
from fscore_lite.q2.score import Q2Options, score_response


@pytest.fixture(scope="module")
def nlp():
    from fscore_lite.q2.spans import load_nlp

    return load_nlp()


# --- step 1: answer candidates -------------------------------------------------------------
def test_candidates_entities_then_noun_chunks_without_i(nlp):
    from fscore_lite.q2.spans import answer_candidates

    doc = nlp("I think Bob Ross painted in the United States in 1983 and I liked his show.")
    ents = [e.text for e in doc.ents]
    cands = answer_candidates(doc)
    assert cands[: len(ents)] == ents  # entities first, in order
    assert "1983" in cands and "Bob Ross" in cands
    assert "I" not in cands and "i" not in [c.lower() for c in cands]
    assert "his show" in cands  # a noun chunk that is no entity
    assert all(c.lower() not in [e.lower() for e in ents] for c in cands[len(ents):])


def test_candidates_chunk_equal_to_entity_is_dropped_case_insensitively():
    from fscore_lite.q2.spans import answer_candidates

    class Span:
        def __init__(self, text):
            self.text = text

    class Doc:
        ents = [Span("Paris"), Span("Paris")]  # repeated entities are all kept
        noun_chunks = [Span("paris"), Span("i"), Span("the tower"), Span("The Tower"), Span("I")]

    assert answer_candidates(Doc()) == ["Paris", "Paris", "the tower"]


# --- step 2: question generation input and output ------------------------------------------
def test_qg_input_has_two_spaces_before_context():
    assert qg_input("1983", "it aired in 1983 .") == "answer: 1983  context: it aired in 1983 . </s>"


def test_question_prefix_strip():
    assert strip_question_prefix("question: Where is it?") == "Where is it?"
    assert strip_question_prefix("Where is it?") == "Where is it?"
    assert strip_question_prefix("question: question: x") == "question: x"  # only the first one


# --- step 3: filters ------------------------------------------------------------------------
@pytest.mark.parametrize("question,personal", [
    ("What do you like to paint?", True),  # subject you
    ("What did I see in 1983?", True),  # subject I
    ("What is your favourite show?", True),  # possessive your
    ("Where is my house?", True),  # possessive my
    ("Where did Bob Ross paint?", False),
    ("Who painted the picture for you?", False),  # "you" is no subject here
])
def test_personal_question_filter(nlp, question, personal):
    from fscore_lite.q2.spans import is_personal_question

    assert is_personal_question(nlp(question)) is personal


def test_normalisation():
    assert normalise_answer("The  Eiffel Tower!") == "eiffel tower"
    assert normalise_answer("in our house, an apple") == "house apple"
    assert normalise_answer("A") == ""
    assert normalise_answer("Theatre in Paris") == "theatre paris"  # whole words only
    assert normalise_answer("10,000 people.") == "10000 people"


def test_self_consistency():
    assert is_self_consistent("the Eiffel Tower", Answer("eiffel tower.", False))
    assert not is_self_consistent("the Eiffel Tower", Answer("tower", False))
    assert not is_self_consistent("[CLS]", Answer("[CLS]", True))  # no answer never matches


# --- steps 4-5: F1, NLI, score mapping ------------------------------------------------------
def test_token_f1():
    assert token_f1("the eiffel tower", "Eiffel Tower") == 1.0
    assert token_f1("eiffel tower", "tower in paris") == pytest.approx(2 * 0.5 * 0.5 / 1.0)
    assert token_f1("paris", "") == 0.0
    assert token_f1("paris", "london") == 0.0
    assert token_f1("a a b", "a b b") == pytest.approx(2 / 3)  # multiset overlap


def test_knowledge_f1_no_answer_is_zero():
    assert knowledge_f1("paris", Answer("[CLS]", True)) == 0.0
    assert knowledge_f1("paris", Answer("paris", False)) == 1.0


def test_needs_nli():
    assert needs_nli(0.5, Answer("paris france", False))
    assert needs_nli(0.0, Answer("london", False))
    assert not needs_nli(1.0, Answer("paris", False))
    assert not needs_nli(0.0, Answer("[CLS]", True))
    assert not needs_nli(0.0, Answer("[CLS] where is", False, cls_in_span=True))
    assert not needs_nli(0.0, Answer("", False))


def test_nli_pair_prepends_question():
    assert nli_pair("Where is it?", "paris", "france") == ("Where is it? france.", "Where is it? paris.")


def test_question_score_mapping():
    assert question_score(0.4, "entailment") == 1.0
    assert question_score(0.4, "contradiction") == 0.0
    assert question_score(0.4, "neutral") == 0.4
    assert question_score(0.4, None) == 0.4


def test_e2e_fallback_mapping_and_input():
    assert [e2e_score(x) for x in ("entailment", "neutral", "contradiction")] == [1.0, 0.5, 0.0]
    assert e2e_pair("It aired IN 1983", "The Show Aired in 1983.") == ("the show aired in 1983.", "It aired IN 1983")


# --- step 6: the response score, with fake roles ---------------------------------------------
class FakeRole:
    backend, name, sha256 = "fake", "fake", "0" * 64

    def __init__(self, fn):
        self.fn = fn
        self.calls = []

    def questions(self, answer, context):
        self.calls.append((answer, context))
        return self.fn(answer, context)

    def questions_many(self, answers, context):
        return [self.questions(a, context) for a in answers]

    def answer(self, question, text):
        self.calls.append((question, text))
        return self.fn(question, text)

    def label(self, premise, hypothesis):
        self.calls.append((premise, hypothesis))
        return self.fn(premise, hypothesis)

    def describe(self):
        return {"backend": "fake", "name": "fake", "sha256": self.sha256}


RESPONSE = "bob ross painted in 1983 ."
KNOWLEDGE = "Bob Ross painted in 1985."


def _roles(questions, answers, labels):
    return Q2Roles(FakeRole(lambda a, c: list(questions.get(a, []))),
                   FakeRole(lambda q, t: answers.get((q, t), Answer("[CLS]", True))),
                   FakeRole(lambda p, h: labels.get((p, h), "neutral")))


def _fake_nlp(candidates):
    """spaCy stand-in: the response has the given candidates; questions are never personal."""

    class Span:
        def __init__(self, t):
            self.text, self.dep_ = t, ""

    class Doc(list):
        ents = [Span(c) for c in candidates]
        noun_chunks = []

    return lambda text: Doc([Span(w) for w in text.split()])


def test_single_mode_keeps_first_valid_beam_and_nli_rules():
    qs = {"1983": ["Q bad?", "Q ok?", "Q later?"]}
    answers = {("Q bad?", RESPONSE): Answer("bob ross", False), ("Q ok?", RESPONSE): Answer("1983", False),
               ("Q ok?", KNOWLEDGE): Answer("1985", False)}
    labels = {("Q ok? 1985.", "Q ok? 1983."): "contradiction"}
    roles = _roles(qs, answers, labels)
    out = score_response(RESPONSE, KNOWLEDGE, roles, _fake_nlp(["1983"]))
    assert [c["question"] for c in out["candidates"][0]["checked"]] == ["Q bad?", "Q ok?"]  # "Q later?" unchecked
    (q,) = out["questions"]
    assert (q["question"], q["f1"], q["nli_label"], q["score"]) == ("Q ok?", 0.0, "contradiction", 0.0)
    assert out["Q2"] == 0.0 and out["Q2_no_nli"] == 0.0 and out["fallback"] is None


def test_multi_mode_and_means():
    qs = {"1983": ["Q1?", "Q2?"]}
    answers = {("Q1?", RESPONSE): Answer("1983", False), ("Q2?", RESPONSE): Answer("1983", False),
               ("Q1?", KNOWLEDGE): Answer("1983", False), ("Q2?", KNOWLEDGE): Answer("in 1983 or 1985", False)}
    labels = {("Q2? in 1983 or 1985.", "Q2? 1983."): "neutral"}
    out = score_response(RESPONSE, KNOWLEDGE, _roles(qs, answers, labels), _fake_nlp(["1983"]),
                         Q2Options(questions="multi"))
    f1s = [q["f1"] for q in out["questions"]]
    assert f1s[0] == 1.0 and f1s[1] == pytest.approx(2 * (1 / 3) * 1 / (1 / 3 + 1))
    assert out["questions"][0]["nli_label"] is None  # F1 = 1: no NLI
    assert out["Q2"] == pytest.approx(sum(f1s) / 2) and out["Q2_no_nli"] == pytest.approx(sum(f1s) / 2)


def test_no_valid_question_uses_e2e_fallback():
    labels = {(KNOWLEDGE.lower(), RESPONSE): "neutral"}
    roles = _roles({"1983": ["Q?"]}, {}, labels)  # QA gives no answer on the response
    out = score_response(RESPONSE, KNOWLEDGE, roles, _fake_nlp(["1983"]))
    assert out["no_valid_question"] and out["questions"] == []
    assert out["fallback"] == {"label": "neutral", "score": 0.5}
    assert out["Q2"] == 0.5 and out["Q2_no_nli"] == 0.5  # the reference gives Q2_no_nli the fallback too
    pure = score_response(RESPONSE, KNOWLEDGE, roles, _fake_nlp(["1983"]), Q2Options(no_nli_gets_fallback=False))
    assert pure["Q2"] == 0.5 and pure["Q2_no_nli"] is None


def test_knowledge_no_answer_scores_zero_without_nli():
    answers = {("Q?", RESPONSE): Answer("1983", False), ("Q?", KNOWLEDGE): Answer("[CLS]", True)}
    roles = _roles({"1983": ["Q?"]}, answers, {})
    out = score_response(RESPONSE, KNOWLEDGE, roles, _fake_nlp(["1983"]))
    assert out["questions"][0]["score"] == 0.0 and out["questions"][0]["nli_label"] is None
    assert roles.nli.calls == []


def test_personal_questions_are_not_answered(nlp):
    answers = {("What do you like?", RESPONSE): Answer("1983", False)}
    roles = _roles({"1983": ["What do you like?"]}, answers, {})

    def doc(text):  # real parse for questions, fixed candidates for the response
        return _fake_nlp(["1983"])(text) if text == RESPONSE else nlp(text)

    out = score_response(RESPONSE, KNOWLEDGE, roles, doc)
    assert out["candidates"][0]["checked"][0]["personal"] is True
    assert ("What do you like?", RESPONSE) not in roles.qa.calls
    kept = score_response(RESPONSE, KNOWLEDGE, roles, doc, Q2Options(remove_personal=False))
    assert kept["candidates"][0]["checked"][0]["consistent"] is True


# --- LLM prompt parsing, beam-search helpers, meta-evaluation arithmetic ------------------------
def test_llm_answer_parsing():
    assert parse_answer(" unanswerable\nmore") == ("unanswerable", True)
    assert parse_answer(' "Unanswerable."') == ('"Unanswerable."', True)
    assert parse_answer(" 1983\n") == ("1983", False)
    assert parse_question(" when was it built?\nText:") == "when was it built?"


def test_no_repeat_ngram_ban():
    from fscore_lite.backends.onnx_seq2seq import banned_ngram_tokens

    assert banned_ngram_tokens(np.array([0, 5, 6, 7, 5, 6]), 3) == [7]
    assert banned_ngram_tokens(np.array([0, 5]), 3) == []


def test_beam_search_on_a_fixed_distribution():
    """A step function that prefers token 3, then EOS (1): the best beam is [3, 1]."""
    from fscore_lite.backends.onnx_seq2seq import beam_search

    def step(last, source):
        logits = np.full((len(last), 6), -5.0, dtype=np.float32)
        logits[:, 3] = 0.0
        logits[last == 3, 1] = 2.0
        return logits

    hyps = beam_search(step, start_id=0, eos_id=1, num_beams=3, num_return=3, max_length=8)
    assert hyps[0][0] == [3, 1]
    assert all(h[0][-1] == 1 or len(h[0]) == 7 for h in hyps)
    assert [h[1] for h in hyps] == sorted([h[1] for h in hyps], reverse=True)
    assert math.isfinite(hyps[0][1])


def test_classification_threshold_and_sample():
    from fscore_lite.io import Record
    from fscore_lite.metaeval.q2_wow import classification, sample_records

    c = classification([(0.9, True), (0.5, True), (0.2, False), (0.7, False)])
    assert c["accuracy"] == 50.0 and c["grounded_precision"] == 50.0 and c["grounded_recall"] == 50.0
    assert c["ungrounded_precision"] == 50.0 and c["ungrounded_recall"] == 50.0
    lo, hi = c["accuracy_ci95"]  # a bootstrap over the 4 responses: right or wrong, 2 of each
    assert 0.0 <= lo < 50.0 < hi <= 100.0 and c == classification([(0.9, True), (0.5, True), (0.2, False), (0.7, False)])
    assert classification([(0.9, True)] * 30)["accuracy_ci95"] == [100.0, 100.0]
    assert classification([])["accuracy_ci95"] is None
    recs = [Record(i, {"response": f"r{i}", "knowledge": "k"}) for i in range(2, 30)]
    a, b = sample_records(recs, 5), sample_records(list(reversed(recs)), 5)
    assert [r.line for r in a] == [r.line for r in b] and len(a) == 5
    assert [r.line for r in a] == sorted(r.line for r in a)


def test_beam_top_k_is_the_stable_sort_order_over_a_whole_vocabulary_row():
    """The partition-based top k picks exactly what a full stable sort does: ties keep the lower
    index first, -inf and equal rows included (beam search's order depends on it)."""
    from fscore_lite.backends.onnx_seq2seq import _topk

    rng = np.random.default_rng(3)
    for t in range(400):
        n, k = int(rng.integers(1, 40000)), int(rng.integers(1, 16))
        x = rng.normal(size=n).astype(np.float32)
        if t % 3 == 0:
            x = np.round(x, 1)  # many ties, some of them at the k-th value
        if t % 5 == 0:
            x[rng.integers(0, n, n // 2)] = -np.inf
        if t % 7 == 0:
            x[:] = np.float32(-1e9)
        assert _topk(x, k).tolist() == np.argsort(-x, kind="stable")[:k].tolist(), (t, n, k)
