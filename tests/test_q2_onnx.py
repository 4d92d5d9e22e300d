"""The ONNX backends of Q² against transformers, on tiny random T5 / ALBERT-QA / RoBERTa-NLI models.

The models come from the session fixtures ``tiny_checkpoints`` and ``tiny_bundle`` (exported
with models/export.py inside the test run). Parity is checked on the fp32 graphs; the int8
graphs (the default) must run and keep the QA span.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from fscore_lite.manifest import Bundle

pytestmark = pytest.mark.export

QG_TEXTS = [
    "answer: Paris  context: The Eiffel Tower is in Paris. </s>",
    "answer: Marie Curie  context: Marie Curie won the Nobel Prize in Physics in 1903 and she was born in Warsaw. </s>",
    "answer: 1977  context: Kang Ji-hwan is a South Korean actor who was born on March 20, 1977. </s>",
]
# Inputs on which the tiny QA model's fp32 argmax span has clear margins (int8 must keep it).
QA_INPUTS = [
    ("Where was she born?", "She was born in Warsaw on 7 November 1867 and died in 1934."),
    ("Where is the Eiffel Tower?", "The Eiffel Tower is in Paris."),
]
NLI_INPUTS = [
    ("Where is the tower? Paris.", "Where is the tower? France."),
    ("marie curie won the nobel prize in physics in 1903.", "she won it in 1911 ."),
]


@pytest.fixture(scope="module")
def bundle(tiny_bundle):
    return Bundle(tiny_bundle)


@pytest.fixture(scope="module")
def eos_qg(tiny_checkpoints, tmp_path_factory):
    """The tiny T5 with its EOS embedding scaled up, so beams end at different lengths and early
    stopping decides; exported like any checkpoint. Returns (checkpoint dir, Bundle, entry)."""
    import torch
    from transformers import AutoTokenizer, T5ForConditionalGeneration

    from fscore_lite_models.export import export_model

    ckpt = tmp_path_factory.mktemp("tiny-qg-eos")
    model = T5ForConditionalGeneration.from_pretrained(tiny_checkpoints["qg"]).eval()
    with torch.no_grad():
        model.shared.weight[model.config.eos_token_id] *= 4.0
    model.save_pretrained(ckpt)
    AutoTokenizer.from_pretrained(tiny_checkpoints["qg"]).save_pretrained(ckpt)
    root = tmp_path_factory.mktemp("tiny-qg-eos-bundle")
    entry = export_model("qg", ckpt, root, name="tiny-qg-eos", keep_fp32=True, threads=1, log=lambda *a: None)
    return ckpt, Bundle(root), entry


def _hf_beams(model, tok, text, max_length):
    import torch

    enc = tok([text], return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**enc, max_length=max_length, num_beams=5, num_return_sequences=5,
                             no_repeat_ngram_size=3, early_stopping=True, output_scores=True,
                             return_dict_in_generate=True)
    eos = model.config.eos_token_id
    rows = []
    for row in out.sequences.tolist():
        gen = row[1:]  # drop the decoder start token
        rows.append(gen[: gen.index(eos) + 1] if eos in gen else gen)
    return rows, out.sequences_scores.tolist(), enc["input_ids"][0].tolist()


@pytest.mark.parametrize("variant,max_length", [("eos", 128), ("eos", 9), ("plain", 20)])
def test_beam_search_matches_transformers_generate(variant, max_length, eos_qg, tiny_checkpoints, bundle):
    import torch
    from transformers import AutoTokenizer, T5ForConditionalGeneration

    from fscore_lite.backends.onnx_seq2seq import Seq2SeqGenerator

    torch.set_num_threads(1)
    if variant == "eos":
        ckpt, b, entry = eos_qg
    else:
        ckpt, b, entry = tiny_checkpoints["qg"], bundle, bundle.get("tiny-qg")
    model = T5ForConditionalGeneration.from_pretrained(ckpt).eval()
    tok = AutoTokenizer.from_pretrained(ckpt)
    gen = Seq2SeqGenerator.from_bundle(b, entry, precision="fp32")
    lengths = set()
    for text in QG_TEXTS:
        want, want_scores, want_ids = _hf_beams(model, tok, text, max_length)
        assert gen.tokenizer.encode(text).ids == want_ids  # same input tokens, two </s> included
        got = gen.beam_generate(text, max_length=max_length)
        assert [g["ids"] for g in got] == want
        np.testing.assert_allclose([g["score"] for g in got], want_scores, atol=1e-4)
        assert [g["text"] for g in got] == [tok.decode(w, skip_special_tokens=True, clean_up_tokenization_spaces=True) for w in want]
        lengths |= {len(w) for w in want}
    if variant == "eos" and max_length == 128:
        assert len(lengths) > 1 and max(lengths) < max_length - 1  # beams ended by EOS, at various lengths


def test_int8_question_generation_runs(bundle):
    from fscore_lite.backends.onnx_seq2seq import Seq2SeqGenerator
    from fscore_lite.q2.generate import OnnxQuestionGenerator

    qg = OnnxQuestionGenerator(Seq2SeqGenerator.from_bundle(bundle, bundle.get("tiny-qg")))
    questions = qg.questions("Paris", "The Eiffel Tower is in Paris.")
    assert len(questions) == 5 and all(isinstance(q, str) for q in questions)


def test_qa_spans_match_transformers_and_int8_keeps_them(tiny_checkpoints, bundle):
    import torch
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    from fscore_lite.backends.onnx_qa import ExtractiveQA

    model = AutoModelForQuestionAnswering.from_pretrained(tiny_checkpoints["qa"]).eval()
    tok = AutoTokenizer.from_pretrained(tiny_checkpoints["qa"])
    fp32 = ExtractiveQA.from_bundle(bundle, bundle.get("tiny-qa"), precision="fp32")
    int8 = ExtractiveQA.from_bundle(bundle, bundle.get("tiny-qa"))
    assert fp32.sha256 != int8.sha256
    for question, context in QA_INPUTS:
        enc = tok.encode_plus(question, context, return_tensors="pt")
        with torch.no_grad():
            start, end = model(**enc, return_dict=False)
        ids = enc["input_ids"][0].tolist()
        s, e = int(start.argmax()), int(end.argmax()) + 1
        want = tok.convert_tokens_to_string(tok.convert_ids_to_tokens(ids[s:e]))
        got_start, got_end = fp32.logits(ids, enc["token_type_ids"][0].tolist())
        np.testing.assert_allclose(got_start, start[0].numpy(), atol=1e-4)
        np.testing.assert_allclose(got_end, end[0].numpy(), atol=1e-4)
        ans = fp32.answer(question, context)
        assert (ans.start, ans.end, ans.text) == (s, e, want)
        assert ans.no_answer == (s == 0 and e == 1)
        q8 = int8.answer(question, context)
        assert (q8.start, q8.end, q8.text) == (ans.start, ans.end, ans.text)


def test_qa_long_context_uses_windows(bundle):
    from fscore_lite.backends.onnx_qa import ExtractiveQA

    qa = ExtractiveQA.from_bundle(bundle, bundle.get("tiny-qa"))
    context = " ".join(["Marie Curie was a Polish and naturalised-French physicist and chemist."] * 60)
    windows = qa._windows("Where was she born?", context)
    assert len(windows) > 1 and all(len(w.ids) <= qa.max_tokens() for w in windows)
    assert all(w.ids[0] == windows[0].ids[0] for w in windows)  # each window starts with CLS + question
    ans = qa.answer("Where was she born?", context)
    assert 0 <= ans.window < len(windows)


def test_nli_logits_match_transformers_and_labels_come_from_config(tiny_checkpoints, bundle):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from fscore_lite.backends.onnx_nli import NliCrossEncoder

    model = AutoModelForSequenceClassification.from_pretrained(tiny_checkpoints["nli"]).eval()
    tok = AutoTokenizer.from_pretrained(tiny_checkpoints["nli"])
    nli = NliCrossEncoder.from_bundle(bundle, bundle.get("tiny-nli"), precision="fp32")
    assert nli.labels == ["contradiction", "neutral", "entailment"]  # the tiny model's (non-MNLI) order
    for premise, hypothesis in NLI_INPUTS:
        with torch.no_grad():
            want = model(**tok(premise, hypothesis, return_tensors="pt")).logits[0].numpy()
        np.testing.assert_allclose(nli.logits(premise, hypothesis), want, atol=1e-4)
        out = nli.predict(premise, hypothesis)
        assert out["label"] == model.config.id2label[int(want.argmax())].lower()
    int8 = NliCrossEncoder.from_bundle(bundle, bundle.get("tiny-nli"))
    assert int8.predict(*NLI_INPUTS[0])["label"] in ("entailment", "neutral", "contradiction")


def test_onnx_pipeline_is_deterministic_and_cached(bundle, tiny_bundle, tmp_path):
    from fscore_lite.q2.pipeline import run_q2
    from fscore_lite.settings import Settings

    src = tmp_path / "in.jsonl"
    rows = [{"id": 1, "response": "The Eiffel Tower is in Paris.", "knowledge": "The Eiffel Tower is in Paris, France."},
            {"id": 2, "response": "", "knowledge": "x"},
            {"id": 3, "response": "Marie Curie was born in Warsaw.", "knowledge": "She was born in Warsaw in 1867."}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    settings = Settings(home=tmp_path / "home", threads=1, models_dir=tiny_bundle, llm="none")
    s1 = run_q2(src, tmp_path / "a.jsonl", settings, progress=False)
    s2 = run_q2(src, tmp_path / "b.jsonl", settings, progress=False)
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert s1["cache"]["misses"] > 0 and s2["cache"]["misses"] == 0 and s2["cache"]["hits"] > 0
    assert {r: d["backend"] for r, d in s1["backends"].items()} == {"qg": "onnx", "qa": "onnx", "nli": "onnx"}
    assert s1["backends"]["qa"]["name"] == "tiny-qa" and len(s1["backends"]["qa"]["sha256"]) == 64
    items = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert [it["id"] for it in items] == [1, 2, 3]
    assert items[1]["status"] == "empty_response" and items[1]["Q2"] is None
    for it in (items[0], items[2]):
        assert it["status"] == "ok" and 0.0 <= it["Q2"] <= 1.0
        assert all(len(c["generated"]) == 5 for c in it["candidates"])
        assert it["no_valid_question"] == (it["fallback"] is not None)


def test_bench_reports_responses_per_second_per_stage(tiny_bundle, tmp_path):
    from bench.q2_stages import bench_q2
    from fscore_lite.q2.score import STAGES
    from fscore_lite.settings import Settings

    settings = Settings(home=tmp_path / "home", threads=1, models_dir=tiny_bundle, llm="none")
    rows = [{"response": "The Eiffel Tower is in Paris.", "knowledge": "The Eiffel Tower is in Paris, France."}]
    out = bench_q2(settings, rows)
    assert list(out["backends"]) == ["onnx"]  # no LLM in this bundle
    onnx = out["backends"]["onnx"]
    assert set(onnx["stages"]) == set(STAGES) and onnx["responses_per_s"] > 0
    assert onnx["stages"]["qg"]["responses_per_s"] > 0


def test_batched_question_generation_matches_one_input_at_a_time(eos_qg):
    """Several inputs decoded in lockstep (padded encoder call, one decoder call per step, searches
    ending at different steps) give the same beams as each input alone, scores within float rounding."""
    from fscore_lite.backends.onnx_seq2seq import Seq2SeqGenerator

    _, b, entry = eos_qg
    gen = Seq2SeqGenerator.from_bundle(b, entry, precision="fp32")
    texts = list(QG_TEXTS) + [QG_TEXTS[0] + " " + QG_TEXTS[-1]]
    assert len({len(gen.tokenizer.encode(t).ids) for t in texts}) > 1  # padding is exercised
    many = gen.beam_generate_many(texts, max_length=128)
    for text, got in zip(texts, many):
        alone = gen.beam_generate(text, max_length=128)
        assert [g["ids"] for g in got] == [a["ids"] for a in alone]
        np.testing.assert_allclose([g["score"] for g in got], [a["score"] for a in alone], atol=1e-4)
    assert len({len(g[0]["ids"]) for g in many}) > 1  # the searches ended at different steps
    assert gen.beam_generate_many(texts[:1]) == [gen.beam_generate(texts[0])]


@pytest.mark.parametrize("precision", ["int8", "fp32"])
def test_decoder_shortcuts_change_no_bit(eos_qg, precision):
    """The first step decoded once per search and the cross-attention keys/values left
    ungathered give exactly the beams and scores of the plain path (searches ending at
    different steps, so the live set shrinks)."""
    from fscore_lite.backends.onnx_seq2seq import BeamState, Seq2SeqGenerator, beam_search_many

    _, b, entry = eos_qg
    gen = Seq2SeqGenerator.from_bundle(b, entry, precision=precision)
    texts = list(QG_TEXTS) + [QG_TEXTS[0] + " " + QG_TEXTS[-1]]
    ids = [gen.tokenizer.encode(t).ids for t in texts]
    out = {}
    for shortcuts in (False, True):
        hidden, mask = gen.encode_many(ids)
        states = [BeamState(start_id=gen.start_id, eos_id=gen.eos_id, num_beams=5, max_length=128) for _ in ids]
        beam_search_many(gen.decoder_runner_many(hidden, mask, 5, shortcuts=shortcuts), states)
        out[shortcuts] = [st.results(5) for st in states]
        lengths = {st.cur for st in states}
    assert out[True] == out[False]  # token ids and float scores, compared exactly
    assert len(lengths) > 1
