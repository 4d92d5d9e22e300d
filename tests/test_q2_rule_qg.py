"""Q²'s `rules` question generator and the extractive reader `models train qa` trains from its questions.

The rule tests run the real spaCy model Q² uses; the training test trains a tiny random BERT on the
questions of two pages (seconds), exports it int8 through the runtime's exporter, and runs Q² with
both new backends through the registry.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

spacy = pytest.importorskip("spacy")

from fscore_lite.q2.rule_qg import find_span, question_word, rule_question  # noqa: E402
from fscore_lite.q2.spans import answer_candidates, load_nlp  # noqa: E402


@pytest.fixture(scope="module")
def nlp():
    return load_nlp()


@pytest.mark.parametrize("text, answer, question", [
    ("She was born in Warsaw in 1867.", "Warsaw", "She was born where in 1867?"),
    ("She was born in Warsaw in 1867.", "1867", "She was born in Warsaw when?"),
    ("She was born in Warsaw in 1867.", "She", "Who was born in Warsaw in 1867?"),
    ("Marie Curie won the Nobel Prize in Physics in 1903.", "Marie Curie", "Who won the Nobel Prize in Physics in 1903?"),
    ("Marie Curie won the Nobel Prize in Physics in 1903.", "the Nobel Prize in Physics",
     "Marie Curie won what in 1903?"),
    ("I love dogs. Do you have a dog?", "a dog", "Do you have what?"),
])
def test_the_span_becomes_its_question_word_in_place(nlp, text, answer, question):
    assert rule_question(nlp(text), answer) == question


def test_the_question_comes_from_the_sentence_of_the_span(nlp):
    doc = nlp("The tower is in Paris. It was built in 1889 for the World's Fair.")
    assert rule_question(doc, "1889") == "It was built when for the World's Fair?"
    assert rule_question(doc, "Paris") == "The tower is where?"


@pytest.mark.parametrize("text, answer, question", [
    # a hedge before the fact: the question is the complement clause, its subject no longer "I"
    ("i'm not sure, but i do know that it originated in michigan.", "michigan", "it originated where?"),
    ("I don't know much about it, but the band was formed in 1960.", "1960", "the band was formed when?"),
    # a conjoined clause with a subject of its own is left out of the span's clause
    ("She was born in Warsaw in 1867 and she lived in Paris in 1891.", "Paris", "she lived where in 1891?"),
    ("She was born in Warsaw in 1867 and she lived in Paris in 1891.", "Warsaw", "She was born where in 1867?"),
])
def test_the_question_comes_from_the_clause_of_the_span(nlp, text, answer, question):
    assert rule_question(nlp(text), answer) == question


def test_a_relative_or_wh_clause_is_passed_over_for_the_clause_above_it(nlp):
    from fscore_lite.q2.rule_qg import clause_bounds

    doc = nlp("The man who lives in Berlin wrote three novels.")
    span = find_span(doc, "Berlin")
    start, end = clause_bounds(span)
    assert doc[start:end].text.startswith("The man who lives in Berlin wrote")
    assert rule_question(doc, "three novels").startswith("The man who lives in Berlin wrote")
    doc = nlp("I'm not sure when it aired.")
    start, end = clause_bounds(find_span(doc, "it"))
    assert doc[start:end].text == "I'm not sure when it aired"


def test_a_sentence_without_a_clause_falls_back_to_the_sentence(nlp):
    doc = nlp("The capital of France, Paris.")
    assert rule_question(doc, "Paris") == "The capital of France, what?"


def test_an_answer_that_is_not_a_span_of_the_text_gets_no_question(nlp):
    doc = nlp("She was born in Warsaw in 1867.")
    assert rule_question(doc, "Krakow") is None
    assert find_span(doc, "Wars") is None  # not on token boundaries


def test_every_candidate_of_a_response_gets_a_question_that_keeps_its_context(nlp):
    doc = nlp("Yes, I think the Beatles had 4 members, John Lennon was the leader of the band.")
    for cand in answer_candidates(doc):
        q = rule_question(doc, cand)
        assert q is not None and q.endswith("?"), cand
        word, _ = question_word(find_span(doc, cand))
        assert word.split()[0] in q.lower(), (cand, q)
        assert cand not in q or q.count(cand) < doc.text.count(cand), (cand, q)


def test_generator_backend_is_registered_and_describes_itself():
    from fscore_lite.q2.roles import REGISTRY, backends_for
    from fscore_lite.q2.rule_qg import RuleQuestionGenerator

    assert "rules" in backends_for("qg")
    gen = RuleQuestionGenerator()
    assert gen.questions_many(["Warsaw", "Krakow"], "She was born in Warsaw.") == [["She was born where?"], []]
    d = gen.describe()
    assert d["backend"] == "rules" and len(d["sha256"]) == 64 and "wh-question" in d["decoding"]
    assert REGISTRY[("qg", "rules")] is not None


def test_training_examples_are_deterministic_split_by_topic_and_point_at_their_answers(nlp):
    from fscore_lite_models.qa.data import held_out_topic, make_examples, page_examples

    text = ("== Life ==\nMarie Curie was born in Warsaw in 1867. She studied in Paris at the Sorbonne.\n"
            "She won the Nobel Prize in Physics in 1903 with Pierre Curie. She died in 1934 in Passy.\n"
            "Her daughter Irene Joliot-Curie also won a Nobel Prize.")
    a, b = page_examples(nlp, "Marie Curie", text, 0), page_examples(nlp, "Marie Curie", text, 0)
    assert a == b and len(a) >= 8
    assert page_examples(nlp, "Marie Curie", text, 1) != a  # the seed picks candidates and dropped words
    for e in a:
        assert "==" not in e.context  # section headings are not contexts
        if e.start >= 0:
            assert e.context[e.start:e.start + len(e.answer)] == e.answer and e.question.endswith("?")
        else:
            assert e.answer == ""
    positives = [e for e in a if e.start >= 0]
    assert any(e.start < 0 for e in a) and positives
    train, held = make_examples({"Marie Curie": text, "Other": "Paris is the capital of France."}, nlp, log=lambda m: None)
    assert {e.topic for e in held} == {t for t in ("Marie Curie", "Other") if held_out_topic(t)}
    assert {e.topic for e in train} == {t for t in ("Marie Curie", "Other") if not held_out_topic(t)}


@pytest.mark.export
def test_answer_tokens_are_found_from_character_offsets(tmp_path):
    from tokenizers import Tokenizer

    from fscore_lite_models.qa.build import _encode
    from fscore_lite_models.qa.data import QAExample
    from fscore_lite_models.tiny import tiny_bert_embed

    tok = Tokenizer.from_file(str(tiny_bert_embed(tmp_path / "bert") / "tokenizer.json"))
    tok.no_truncation()
    context = "She won the Nobel Prize in Physics in 1903 and died in 1934."
    ex = QAExample("She won what in 1903?", context, "the Nobel Prize in Physics", context.index("the Nobel"), "t")
    ids, types, start, end = _encode(tok, ex, 128)
    assert tok.decode(ids[start:end + 1]) == "the nobel prize in physics"
    assert set(types[start:end + 1]) == {1}
    assert _encode(tok, QAExample("She won what?", context, "", -1, "t"), 128)[2:] == (0, 0)
    assert _encode(tok, ex, 8) is None  # too long for the model: left out


@pytest.mark.export
def test_tiny_reader_trains_exports_and_serves_q2_with_the_rules_generator(tmp_path, data_dir, minilm_bundle_dir):
    from fscore_lite.manifest import Bundle
    from fscore_lite.settings import Settings
    from fscore_lite_models.qa.build import QAConfig, train_qa, trained_with
    from fscore_lite_models.tiny import tiny_bert_embed

    pages = [json.loads(x) for x in (data_dir / "wiki-factscore-dev" / "pages.jsonl").read_text().splitlines()]
    keep = sorted(pages, key=lambda p: p["topic"])[:3]
    data = tmp_path / "data" / "wiki-factscore-dev"
    data.mkdir(parents=True)
    (data / "pages.jsonl").write_text("".join(json.dumps(p) + "\n" for p in keep), encoding="utf-8")
    bundle_dir = tmp_path / "models"
    settings = Settings(home=tmp_path / "home", threads=1, models_dir=bundle_dir)
    cfg = QAConfig(max_examples=64, batch_size=8, max_length=256, threads=1, bf16=False, eval_examples=16)
    ckpt = tiny_bert_embed(tmp_path / "bert")
    report = train_qa(bundle_dir, settings, cfg, data=tmp_path / "data", log=lambda m: None, checkpoint=ckpt)
    used = report["examples"]["used"]
    assert 0 < used <= 64 and report["examples"]["made"] >= used and report["loop"]["steps"] == -(-used // 8)
    assert set(report["held_out"]) >= {"exact_match", "f1", "no_answer_accuracy"}
    entry = Bundle(bundle_dir).get(cfg.name)
    assert entry.role == "qa" and entry.extra["training"]["weights_sha256"] == report["weights_sha256"]
    assert trained_with(bundle_dir, cfg, tmp_path / "data")
    assert not trained_with(bundle_dir, QAConfig(max_examples=65, batch_size=8, max_length=256, threads=1, bf16=False,
                                                 eval_examples=16), tmp_path / "data")
    # a second build gives the same weights
    again = train_qa(tmp_path / "models2", settings.with_(models_dir=tmp_path / "models2"), cfg,
                     data=tmp_path / "data", log=lambda m: None, checkpoint=ckpt)
    assert again["weights_sha256"] == report["weights_sha256"]
    # the registry serves it by name (`auto` passes over it: its build marks it auto_select false, under
    # the decisions hash); `rules` writes the questions
    from fscore_lite.cache import CallCache
    from fscore_lite.q2.roles import AUTO_NOT_SELECTED, REGISTRY, RoleContext, resolve

    bundle = Bundle(bundle_dir)
    assert entry.extra["auto_select"] is False
    assert bundle.get(cfg.name).decisions_sha256 == bundle.get(cfg.name).recorded_decisions_sha256
    assert resolve("qa", "auto", bundle) == ("llm", AUTO_NOT_SELECTED)
    assert resolve("qa", "auto", bundle, "onnx") == ("onnx", "--qa-backend onnx")
    ctx = RoleContext(settings, bundle, CallCache(None), "int8")
    qg, qa = REGISTRY[("qg", "rules")](ctx), REGISTRY[("qa", "onnx")](ctx)
    assert qa.describe()["name"] == cfg.name
    (question,), = qg.questions_many(["Warsaw"], "She was born in Warsaw.")
    assert question == "She was born where?"
    assert isinstance(qa.answer(question, "She was born in Warsaw.").text, str)
