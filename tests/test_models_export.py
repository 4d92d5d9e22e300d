"""Export of tiny checkpoints for every role: manifest contents and parity with transformers.

The fp32 graphs must match transformers closely; the int8 graphs must run, keep the output
shapes and stay near fp32. Inputs are tokenized with ``tokenizers`` from the bundle's
tokenizer.json, as the runtime does, and checked against the checkpoint's tokenizer.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fscore_lite.backends.llama_kernels import ensure_kernel
from fscore_lite.errors import FscoreError
from fscore_lite.manifest import Bundle, sha256_file

pytestmark = pytest.mark.export

SENTENCE = "Marie Curie won the Nobel Prize in Physics in 1903."
CONTEXT = "She was born in Warsaw on 7 November 1867 and died in 1934. The Eiffel Tower is in Paris."


def _session(path: Path):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])


def _encode(bundle: Bundle, entry, *texts):
    """Tokenize like the runtime: tokenizers.Tokenizer from the bundle; int64 feeds by input name."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(bundle.verified_path(entry, "tokenizer")))
    enc = tok.encode(*texts)
    feeds = {
        "input_ids": np.array([enc.ids], dtype=np.int64),
        "attention_mask": np.array([enc.attention_mask], dtype=np.int64),
        "token_type_ids": np.array([enc.type_ids], dtype=np.int64),
    }
    names = entry.extra["encoder_inputs"] if entry.role == "qg" else entry.extra["inputs"]
    return enc, {k: v for k, v in feeds.items() if k in names}


def _hf_tokenizer(path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def _close(got, want, atol=2e-4):
    np.testing.assert_allclose(got, want, atol=atol, rtol=1e-3)


def _int8_near(got, want, rel=0.1):
    """int8 drift bound: within ``rel`` of the fp32 output's range."""
    assert got.shape == want.shape and np.isfinite(got).all()
    scale = float(np.max(np.abs(want))) or 1.0
    assert float(np.max(np.abs(got - want))) <= rel * scale


# --- tiny checkpoints ---------------------------------------------------------------------


def test_tiny_checkpoints_are_deterministic(tmp_path):
    from fscore_lite_models.tiny import tiny_albert_qa, tiny_roberta_nli

    a = tiny_albert_qa(tmp_path / "a")
    b = tiny_albert_qa(tmp_path / "b")
    for fname in ("model.safetensors", "tokenizer.json", "config.json"):
        assert sha256_file(a / fname) == sha256_file(b / fname)
    c = tiny_roberta_nli(tmp_path / "c")
    d = tiny_roberta_nli(tmp_path / "d", seed=1)
    assert sha256_file(c / "tokenizer.json") == sha256_file(d / "tokenizer.json")
    assert sha256_file(c / "model.safetensors") != sha256_file(d / "model.safetensors")


def test_tiny_tokenizers(tiny_checkpoints):
    t5 = _hf_tokenizer(tiny_checkpoints["qg"])
    enc = t5("answer: Paris  context: The Eiffel Tower is in Paris.")
    assert "token_type_ids" not in enc
    assert enc["input_ids"][-1] == t5.eos_token_id == 1 and t5.pad_token_id == 0
    assert t5.unk_token_id not in enc["input_ids"]
    qa = _hf_tokenizer(tiny_checkpoints["qa"])
    pair = qa("Where was she born?", CONTEXT)
    assert pair["input_ids"][0] == qa.cls_token_id and set(pair["token_type_ids"]) == {0, 1}
    assert {"[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]"} <= set(qa.all_special_tokens)
    mlm = _hf_tokenizer(tiny_checkpoints["mlm"])
    assert mlm.mask_token == "<mask>" and mlm.decode(mlm(SENTENCE)["input_ids"], skip_special_tokens=True) == SENTENCE
    cfg = json.loads((tiny_checkpoints["nli"] / "config.json").read_text())
    assert cfg["id2label"] == {"0": "CONTRADICTION", "1": "NEUTRAL", "2": "ENTAILMENT"}


# --- manifest -------------------------------------------------------------------------------

EXPECTED_KINDS = {
    "qg": {"encoder", "decoder", "decoder_with_past", "encoder_fp32", "decoder_fp32", "decoder_with_past_fp32"},
    "qa": {"weights", "weights_fp32"},
    "nli": {"weights", "weights_fp32"},
    "embed": {"weights", "weights_fp32"},
    "mlm": {"weights", "weights_fp32"},
}


@pytest.mark.parametrize("role", sorted(EXPECTED_KINDS))
def test_manifest_entry(tiny_bundle, role):
    bundle = Bundle(tiny_bundle)
    entry = bundle.get(f"tiny-{role}")
    assert entry.role == role and entry.quantization == "int8"
    assert entry.license == "MIT (random test weights)" and entry.source == "models.tiny"
    kinds = {f.kind for f in entry.files}
    assert EXPECTED_KINDS[role] | {"tokenizer", "tokenizer_config", "config"} <= kinds
    assert len(kinds) == len(entry.files)
    for f in entry.files:
        assert f.path.startswith(f"tiny-{role}/")
        p = tiny_bundle / f.path
        assert p.stat().st_size == f.size and sha256_file(p) == f.sha256
    bundle.verify(entry)
    assert len(entry.sha256) == 64
    assert entry.extra["max_length"] == 512 and entry.extra["model_type"]


def test_qg_identity_covers_all_graphs(tiny_bundle):
    entry = Bundle(tiny_bundle).get("tiny-qg")
    assert entry.sha256 not in {f.sha256 for f in entry.files}
    assert entry.extra["decoder_start_token_id"] == 0 and entry.extra["eos_token_id"] == 1
    assert entry.extra["pad_token_id"] == 0 and entry.extra["num_decoder_layers"] == 2


def test_reexport_replaces_entry(tiny_checkpoints, tmp_path):
    from fscore_lite_models.export import export_model

    first = export_model("nli", tiny_checkpoints["nli"], tmp_path, name="m", quantize=False, threads=1, log=lambda *a: None)
    assert first.quantization == "fp32" and {f.kind for f in first.files} >= {"weights"}
    assert "weights_fp32" not in {f.kind for f in first.files}
    second = export_model("nli", tiny_checkpoints["nli"], tmp_path, name="m", threads=1, log=lambda *a: None)
    bundle = Bundle(tmp_path)
    assert list(bundle.entries) == ["m"] and bundle.get("m").quantization == "int8"
    assert second.file("weights").sha256 != first.file("weights").sha256
    bundle.verify(bundle.get("m"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m", "manifest.json"]  # no work folders left


# --- parity per role --------------------------------------------------------------------------


def test_qa_parity(tiny_bundle, tiny_checkpoints):
    import torch
    from transformers import AutoModelForQuestionAnswering

    bundle = Bundle(tiny_bundle)
    entry = bundle.get("tiny-qa")
    enc, feeds = _encode(bundle, entry, "Where was she born?", CONTEXT)
    hf = _hf_tokenizer(tiny_checkpoints["qa"])("Where was she born?", CONTEXT)
    assert enc.ids == hf["input_ids"] and enc.type_ids == hf["token_type_ids"]
    assert entry.extra["cls_token_id"] == enc.ids[0]
    assert set(feeds) == {"input_ids", "attention_mask", "token_type_ids"}
    model = AutoModelForQuestionAnswering.from_pretrained(str(tiny_checkpoints["qa"]), local_files_only=True).eval()
    with torch.no_grad():
        out = model(**{k: torch.from_numpy(v) for k, v in feeds.items()})
    want = [out.start_logits.numpy(), out.end_logits.numpy()]
    fp32 = _session(bundle.verified_path(entry, "weights_fp32")).run(["start_logits", "end_logits"], feeds)
    int8 = _session(bundle.verified_path(entry, "weights")).run(["start_logits", "end_logits"], feeds)
    for g, q, w in zip(fp32, int8, want):
        _close(g, w)
        _int8_near(q, w)


def test_nli_parity_and_labels(tiny_bundle, tiny_checkpoints):
    import torch
    from transformers import AutoModelForSequenceClassification

    bundle = Bundle(tiny_bundle)
    entry = bundle.get("tiny-nli")
    assert entry.extra["labels"] == ["CONTRADICTION", "NEUTRAL", "ENTAILMENT"]
    assert entry.extra["id2label"] == {"0": "CONTRADICTION", "1": "NEUTRAL", "2": "ENTAILMENT"}
    premise, hypothesis = "Where was she born? Warsaw.", "Where was she born? Paris."
    enc, feeds = _encode(bundle, entry, premise, hypothesis)
    assert enc.ids == _hf_tokenizer(tiny_checkpoints["nli"])(premise, hypothesis)["input_ids"]
    assert set(feeds) == {"input_ids", "attention_mask"}
    model = AutoModelForSequenceClassification.from_pretrained(str(tiny_checkpoints["nli"]), local_files_only=True).eval()
    with torch.no_grad():
        want = model(**{k: torch.from_numpy(v) for k, v in feeds.items()}).logits.numpy()
    assert want.shape == (1, 3)
    _close(_session(bundle.verified_path(entry, "weights_fp32")).run(["logits"], feeds)[0], want)
    _int8_near(_session(bundle.verified_path(entry, "weights")).run(["logits"], feeds)[0], want)


def test_embed_parity(tiny_bundle, tiny_checkpoints):
    import torch
    from transformers import AutoModel

    bundle = Bundle(tiny_bundle)
    entry = bundle.get("tiny-embed")
    assert entry.extra["pooling"] == "mean" and entry.extra["normalize"] is True and entry.extra["hidden_size"] == 32
    enc, feeds = _encode(bundle, entry, SENTENCE)
    assert enc.ids == _hf_tokenizer(tiny_checkpoints["embed"])(SENTENCE)["input_ids"]
    model = AutoModel.from_pretrained(str(tiny_checkpoints["embed"]), local_files_only=True).eval()
    with torch.no_grad():
        want = model(**{k: torch.from_numpy(v) for k, v in feeds.items()}).last_hidden_state.numpy()
    _close(_session(bundle.verified_path(entry, "weights_fp32")).run(["last_hidden_state"], feeds)[0], want)
    _int8_near(_session(bundle.verified_path(entry, "weights")).run(["last_hidden_state"], feeds)[0], want)


def test_mlm_outputs_logits_and_last_hidden_state(tiny_bundle, tiny_checkpoints):
    import torch
    from transformers import AutoModelForMaskedLM

    bundle = Bundle(tiny_bundle)
    entry = bundle.get("tiny-mlm")
    assert entry.extra["outputs"] == ["logits", "last_hidden_state"]
    assert entry.extra["mask_token_id"] == 4 and entry.extra["hidden_size"] == 32
    text = "Fact: Marie Curie won the <mask> Prize."
    enc, feeds = _encode(bundle, entry, text)
    assert entry.extra["mask_token_id"] in enc.ids
    assert enc.ids == _hf_tokenizer(tiny_checkpoints["mlm"])(text)["input_ids"]
    model = AutoModelForMaskedLM.from_pretrained(str(tiny_checkpoints["mlm"]), local_files_only=True).eval()
    with torch.no_grad():
        out = model(**{k: torch.from_numpy(v) for k, v in feeds.items()}, output_hidden_states=True)
    want = [out.logits.numpy(), out.hidden_states[-1].numpy()]
    assert want[1].shape == (1, len(enc.ids), 32)
    fp32 = _session(bundle.verified_path(entry, "weights_fp32")).run(["logits", "last_hidden_state"], feeds)
    int8 = _session(bundle.verified_path(entry, "weights")).run(["logits", "last_hidden_state"], feeds)
    for g, q, w in zip(fp32, int8, want):
        _close(g, w)
        _int8_near(q, w)
    # Batched, padded input (dynamic batch and sequence axes).
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(bundle.path(entry, "tokenizer")))
    tok.enable_padding(pad_id=entry.extra["pad_token_id"], pad_token="<pad>")
    batch = tok.encode_batch([text, "Paris."])
    feeds2 = {
        "input_ids": np.array([e.ids for e in batch], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in batch], dtype=np.int64),
    }
    logits, hidden = _session(bundle.path(entry, "weights_fp32")).run(None, feeds2)
    _close(logits[0], want[0][0])
    assert hidden.shape == (2, len(enc.ids), 32)


def _hf_greedy(model, feeds, steps):
    """Greedy decoding without a cache: the logits of the last position at each step."""
    import torch

    ids = torch.from_numpy(feeds["input_ids"])
    mask = torch.from_numpy(feeds["attention_mask"])
    seq = [model.config.decoder_start_token_id]
    all_logits = []
    with torch.no_grad():
        for _ in range(steps):
            out = model(input_ids=ids, attention_mask=mask, decoder_input_ids=torch.tensor([seq]))
            last = out.logits[0, -1].numpy()
            all_logits.append(last)
            seq.append(int(last.argmax()))
    return seq, all_logits


def _onnx_greedy(bundle, entry, feeds, steps, suffix=""):
    """The decoding protocol documented in models/export.py: encoder, decoder, decoder_with_past."""
    enc = _session(bundle.verified_path(entry, "encoder" + suffix))
    dec = _session(bundle.path(entry, "decoder" + suffix))
    past_dec = _session(bundle.path(entry, "decoder_with_past" + suffix))
    hidden = enc.run(["last_hidden_state"], feeds)[0]
    seq = [entry.extra["decoder_start_token_id"]]
    names = [o.name for o in dec.get_outputs()]
    out = dec.run(None, {"input_ids": np.array([seq], dtype=np.int64), "encoder_attention_mask": feeds["attention_mask"],
                         "encoder_hidden_states": hidden})
    past = {n.replace("present.", "past_key_values."): v for n, v in zip(names[1:], out[1:])}
    all_logits = [out[0][0, -1]]
    seq.append(int(out[0][0, -1].argmax()))
    pnames = [o.name for o in past_dec.get_outputs()]
    for _ in range(steps - 1):
        out = past_dec.run(None, {"input_ids": np.array([[seq[-1]]], dtype=np.int64),
                                  "encoder_attention_mask": feeds["attention_mask"], **past})
        past.update({n.replace("present.", "past_key_values."): v for n, v in zip(pnames[1:], out[1:])})
        all_logits.append(out[0][0, -1])
        seq.append(int(out[0][0, -1].argmax()))
    return seq, all_logits


def test_qg_parity_greedy(tiny_bundle, tiny_checkpoints):
    from transformers import AutoModelForSeq2SeqLM

    bundle = Bundle(tiny_bundle)
    entry = bundle.get("tiny-qg")
    text = "answer: Paris  context: The Eiffel Tower is in Paris. </s>"
    enc, feeds = _encode(bundle, entry, text)
    assert set(feeds) == {"input_ids", "attention_mask"}
    assert enc.ids == _hf_tokenizer(tiny_checkpoints["qg"])(text)["input_ids"]
    assert entry.extra["encoder_inputs"] == ["input_ids", "attention_mask"]
    model = AutoModelForSeq2SeqLM.from_pretrained(str(tiny_checkpoints["qg"]), local_files_only=True).eval()
    want_seq, want_logits = _hf_greedy(model, feeds, steps=6)
    seq, logits = _onnx_greedy(bundle, entry, feeds, steps=6, suffix="_fp32")
    assert seq == want_seq
    for g, w in zip(logits, want_logits):
        _close(g, w)
    seq8, logits8 = _onnx_greedy(bundle, entry, feeds, steps=6)
    assert len(seq8) == 7
    _int8_near(np.stack(logits8[:1]), np.stack(want_logits[:1]))


# --- llm: GGUF ----------------------------------------------------------------------------------


def test_llm_gguf_loads_and_round_trips(tiny_llm_bundle, tiny_checkpoints):
    llama_cpp = pytest.importorskip("llama_cpp")
    bundle = Bundle(tiny_llm_bundle)
    entry = bundle.get("tiny-llm")
    assert entry.role == "llm" and entry.quantization == "Q8_0" and entry.architecture == "Qwen2ForCausalLM"
    assert entry.extra["gguf_type"] == "Q8_0" and entry.extra["n_vocab"] == 512 and entry.extra["context_length"] == 512
    assert {f.kind for f in entry.files} == {"weights", "config"}
    ensure_kernel()  # llama.cpp's portable CPU kernel, as the runtime loads it
    llm = llama_cpp.Llama(str(bundle.verified_path(entry)), n_ctx=128, n_threads=1, verbose=False, logits_all=True)
    hf = _hf_tokenizer(tiny_checkpoints["llm"])
    for text in (SENTENCE, "Zyxw 12345 ünïcode — text\n\n  new line's", "<|im_start|>user\nHi<|im_end|>"):
        ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        assert ids == hf(text)["input_ids"], text
        assert llm.detokenize(ids, special=True).decode("utf-8") == text
    assert llm.token_eos() == hf.convert_tokens_to_ids("<|im_end|>")
    ids = llm.tokenize(SENTENCE.encode(), add_bos=True, special=False)
    llm.eval(ids)
    scores = np.array(llm.scores[: len(ids)])
    assert scores.shape == (len(ids), 512) and np.isfinite(scores).all()


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
def test_gguf_f32_matches_transformers(tmp_path, arch):
    """The built-in converter's tensors (incl. llama's q/k row permutation) reproduce HF logits."""
    llama_cpp = pytest.importorskip("llama_cpp")
    import torch
    from transformers import AutoModelForCausalLM

    from fscore_lite_models.gguf import build_gguf
    from fscore_lite_models.tiny import tiny_llama_causal

    ckpt = tiny_llama_causal(tmp_path / arch, arch=arch)
    info = build_gguf(ckpt, tmp_path / "m.gguf", "F32", log=lambda *a: None)
    assert info["architecture"] == arch and info["tokenizer_pre"] == {"qwen2": "qwen2", "llama": "gpt-2"}[arch]
    tok = _hf_tokenizer(ckpt)
    ids = tok(SENTENCE)["input_ids"]
    assert (ids[0] == tok.bos_token_id) == (arch == "llama")
    with torch.no_grad():
        want = AutoModelForCausalLM.from_pretrained(str(ckpt), local_files_only=True)(torch.tensor([ids])).logits[0].numpy()
    ensure_kernel()
    llm = llama_cpp.Llama(str(tmp_path / "m.gguf"), n_ctx=64, n_threads=1, verbose=False, logits_all=True)
    assert llm.tokenize(SENTENCE.encode(), add_bos=True, special=False) == ids
    llm.eval(ids)
    np.testing.assert_allclose(np.array(llm.scores[: len(ids)]), want, atol=2e-3)


def test_gguf_k_quant_falls_back_on_tiny_rows(tiny_checkpoints, tmp_path):
    pytest.importorskip("llama_cpp")
    from fscore_lite_models.gguf import build_gguf, gguf_type

    messages = []
    build_gguf(tiny_checkpoints["llm"], tmp_path / "q4.gguf", "q4_k_m", log=messages.append)
    assert (tmp_path / "q4.gguf").stat().st_size > 0
    assert any("fallback" in m for m in messages)
    with pytest.raises(FscoreError, match="unknown GGUF type"):
        gguf_type("Q3_XL")


def test_gguf_refuses_unsupported_checkpoint(tiny_checkpoints, tmp_path):
    from fscore_lite_models.gguf import UnsupportedCheckpoint, convert_checkpoint

    with pytest.raises(UnsupportedCheckpoint, match="convert-script"):
        convert_checkpoint(tiny_checkpoints["nli"], tmp_path / "x.gguf")


# --- errors ----------------------------------------------------------------------------------------


def test_missing_checkpoint_is_a_clear_error(tmp_path):
    from fscore_lite_models.export import export_model

    with pytest.raises(FscoreError, match="huggingface-cli download"):
        export_model("qa", tmp_path / "nowhere", tmp_path / "bundle")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FscoreError, match="no config.json"):
        export_model("qa", tmp_path / "empty", tmp_path / "bundle")
    with pytest.raises(FscoreError, match="unknown role"):
        export_model("summarise", tmp_path, tmp_path / "bundle")
    assert not (tmp_path / "bundle" / "manifest.json").exists()


def test_bad_name_is_refused(tiny_checkpoints, tmp_path):
    from fscore_lite_models.export import export_model

    with pytest.raises(FscoreError, match="model name"):
        export_model("qa", tiny_checkpoints["qa"], tmp_path, name="../evil")


# --- int8: shared weights and per-channel scales ---------------------------------------------

QA_PAIRS = [
    ("Where was she born?", CONTEXT),
    ("Where is the Eiffel Tower?", "The Eiffel Tower is in Paris, the capital of France."),
    ("Who won the Nobel Prize in Physics?", SENTENCE),
    ("What is the capital of France?", "The Eiffel Tower is in Paris, the capital of France."),
    ("When was she born?", "She was born in Warsaw on 7 November 1867 and died in 1934."),
]


def _identity_fed_matmuls(path: Path) -> int:
    """MatMuls whose weight input is the output of an Identity of an initializer."""
    import onnx

    graph = onnx.load(str(path)).graph
    inits = {i.name for i in graph.initializer}
    fed = {n.output[0] for n in graph.node if n.op_type == "Identity" and n.input[0] in inits}
    return sum(1 for n in graph.node if n.op_type == "MatMul" and any(i in fed for i in n.input))


def test_albert_shared_weights_are_quantized(tiny_bundle):
    from fscore_lite_models.quantize import count_matmuls

    bundle = Bundle(tiny_bundle)
    entry = bundle.get("tiny-qa")
    fp32_path, int8_path = bundle.verified_path(entry, "weights_fp32"), bundle.verified_path(entry, "weights")
    # ALBERT's second layer reads the shared layer weights through Identity nodes ...
    assert _identity_fed_matmuls(fp32_path) >= 6
    fp32, int8 = count_matmuls(fp32_path), count_matmuls(int8_path)
    assert fp32["int8"] == 0 and fp32["fp32_weight"] == 14
    # ... and still every weight MatMul runs in int8; only the attention products stay fp32.
    assert int8["int8"] == fp32["fp32_weight"] and int8["fp32_weight"] == 0
    assert int8["int8"] >= 0.9 * (int8["int8"] + int8["fp32_weight"])
    assert int8["fp32_activation"] == fp32["fp32_activation"] == 4
    assert entry.extra["quantization_scheme"] == "per-channel"


def test_albert_int8_answers_agree_with_fp32(tiny_bundle):
    bundle = Bundle(tiny_bundle)
    entry = bundle.get("tiny-qa")
    fp32 = _session(bundle.verified_path(entry, "weights_fp32"))
    int8 = _session(bundle.verified_path(entry, "weights"))
    for question, context in QA_PAIRS:
        _, feeds = _encode(bundle, entry, question, context)
        want = fp32.run(["start_logits", "end_logits"], feeds)
        got = int8.run(["start_logits", "end_logits"], feeds)
        for g, w in zip(got, want):
            _int8_near(g, w, rel=0.05)
        assert [int(np.argmax(g)) for g in got] == [int(np.argmax(w)) for w in want], question


def test_fold_identities_computes_the_same(tiny_bundle, tmp_path):
    import onnx

    from fscore_lite_models.quantize import fold_identities

    bundle = Bundle(tiny_bundle)
    entry = bundle.get("tiny-qa")
    src = bundle.verified_path(entry, "weights_fp32")
    model = onnx.load(str(src))
    assert fold_identities(model) >= 6
    assert not any(n.op_type == "Identity" and n.input[0] in {i.name for i in model.graph.initializer}
                   for n in model.graph.node)
    onnx.save(model, str(tmp_path / "folded.onnx"))
    assert _identity_fed_matmuls(tmp_path / "folded.onnx") == 0
    _, feeds = _encode(bundle, entry, *QA_PAIRS[0])
    for a, b in zip(_session(src).run(None, feeds), _session(tmp_path / "folded.onnx").run(None, feeds)):
        np.testing.assert_array_equal(a, b)


def _weight_scale_sizes(path: Path) -> set[int]:
    """Element counts of the weight scales the quantizer stored (1 per tensor; columns per channel)."""
    import onnx

    graph = onnx.load(str(path)).graph
    return {int(np.prod(i.dims)) for i in graph.initializer if i.name.endswith("_scale")}


def test_per_channel_is_the_default_and_per_tensor_an_option(tiny_checkpoints, tmp_path):
    from fscore_lite_models.export import export_model

    per_channel = export_model("qa", tiny_checkpoints["qa"], tmp_path, name="pc", threads=1, log=lambda *a: None)
    per_tensor = export_model("qa", tiny_checkpoints["qa"], tmp_path, name="pt", per_channel=False, threads=1,
                              log=lambda *a: None)
    assert per_channel.extra["quantization_scheme"] == "per-channel"
    assert per_tensor.extra["quantization_scheme"] == "per-tensor"
    bundle = Bundle(tmp_path)
    assert bundle.get("pc").extra["quantization_scheme"] == "per-channel"  # saved in the manifest
    assert max(_weight_scale_sizes(bundle.verified_path(per_channel, "weights"))) == 64  # ffn columns
    assert _weight_scale_sizes(bundle.verified_path(per_tensor, "weights")) == {1}
    fp32 = export_model("qa", tiny_checkpoints["qa"], tmp_path, name="fp", quantize=False, threads=1,
                        log=lambda *a: None)
    assert "quantization_scheme" not in fp32.extra
