"""Section ``q2_runtime``: Q² per response, our int8 ONNX runtime vs a reference-style fp32 pipeline.

Both sides run architecture-matched models with random weights, built here from hand-written
configs (T5-base for QG, ALBERT-xlarge for QA, RoBERTa-large for NLI: the reference models'
shapes), so only the runtime differs:

* reference style: transformers fp32 in torch — T5 ``generate`` with 5 beams / 5 returned /
  ``no_repeat_ngram_size`` 3, the QA model's forward with argmax start/end (what the HF QA
  pipeline runs), the NLI model's forward;
* ours: the int8 graphs exported with :func:`models.export.export_model` (per-channel int8,
  shared ALBERT weights folded so they quantize), run by :mod:`fscore_lite.backends.onnx_seq2seq`
  (its beam search, beams batched), ``onnx_qa`` and ``onnx_nli`` the way the Q² pipeline runs
  them: the questions of one response through QA in one padded call, its answer pairs through
  NLI in one call.

Tokenizers are the tiny made-up ones of :mod:`models.tiny`; the benchmark feeds the SAME
token ids to both sides, with sequence lengths taken from the Q² WoW data (words × 1.3 as
subword tokens). Decoding is forced to a fixed number of decoder steps on both sides
(``min_length = max_length`` for ``generate``, an end-of-sequence id that never occurs for
ours), so the work done is identical. Exported models are cached under
``$FSCORE_LITE_HOME/bench/q2-shapes`` (about 7 GB; the first run spends ~10-20 min exporting).
"""
from __future__ import annotations

import csv
import math
import random
from pathlib import Path

import numpy as np

from .common import NoCache, bench_home, fmt_s, free_memory, log, md_table, pinned, ratio, summarize, timed

DECODE_STEPS = 15  # decoder steps per question (a typical question of ~14 T5 tokens plus EOS)
MAX_LENGTH = DECODE_STEPS + 1  # generate's max_length counts the decoder start token
QUESTIONS_PER_RESPONSE = 3
NUM_BEAMS = 5
SUBWORDS_PER_WORD = 1.3
QUESTION_TOKENS = 12
ANSWER_TOKENS = 3

SHAPES = {
    "qg": ("t5-base-random", "T5-base: d_model 768, 12+12 layers, 12 heads, d_ff 3072, vocab 32128"),
    "qa": ("albert-xlarge-random", "ALBERT-xlarge: hidden 2048, 24 layers, 16 heads, ffn 8192, emb 128, vocab 30000"),
    "nli": ("roberta-large-random", "RoBERTa-large: hidden 1024, 24 layers, 16 heads, ffn 4096, vocab 50265"),
}
NLI_ID2LABEL = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}


# --- the architecture-matched random models ------------------------------------------------
def build_checkpoint(role: str, out_dir: Path, seed: int = 0) -> Path:
    """Write a random-weight checkpoint with the reference model's shape (no download)."""
    import torch
    from transformers import (AlbertConfig, AlbertForQuestionAnswering, RobertaConfig,
                              RobertaForSequenceClassification, T5Config, T5ForConditionalGeneration)

    from fscore_lite_models.tiny import roberta_tokenizer, t5_tokenizer, wordpiece_tokenizer

    torch.manual_seed(seed)
    if role == "qg":
        cfg = T5Config(vocab_size=32128, d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_decoder_layers=12,
                       num_heads=12, relative_attention_num_buckets=32, relative_attention_max_distance=128,
                       dropout_rate=0.0, feed_forward_proj="relu", tie_word_embeddings=True, pad_token_id=0,
                       eos_token_id=1, decoder_start_token_id=0)
        model, tok = T5ForConditionalGeneration(cfg), t5_tokenizer()
    elif role == "qa":
        cfg = AlbertConfig(vocab_size=30000, embedding_size=128, hidden_size=2048, num_hidden_layers=24,
                           num_attention_heads=16, intermediate_size=8192, hidden_act="gelu_new",
                           max_position_embeddings=512, type_vocab_size=2, hidden_dropout_prob=0.0,
                           attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0, pad_token_id=0,
                           bos_token_id=2, eos_token_id=3)
        model, tok = AlbertForQuestionAnswering(cfg), wordpiece_tokenizer()
    elif role == "nli":
        cfg = RobertaConfig(vocab_size=50265, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                            intermediate_size=4096, max_position_embeddings=514, type_vocab_size=1,
                            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=1,
                            bos_token_id=0, eos_token_id=2, num_labels=3, id2label=dict(NLI_ID2LABEL),
                            label2id={v: k for k, v in NLI_ID2LABEL.items()})
        model, tok = RobertaForSequenceClassification(cfg), roberta_tokenizer()
    else:
        raise ValueError(role)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.eval().save_pretrained(out_dir, safe_serialization=True)
    tok.save_pretrained(out_dir)
    return out_dir


def shape_models(threads: int = 2) -> tuple[Path, dict[str, Path]]:
    """(bundle folder, {role: checkpoint folder}) of the three random models, exporting each
    (int8, fp32 graphs kept) the first time."""
    from fscore_lite.manifest import Bundle
    from fscore_lite_models.export import export_model

    root = bench_home() / "q2-shapes"
    bundle_dir = root / "models"
    ckpts: dict[str, Path] = {}
    for role, (name, _) in SHAPES.items():
        ckpt = root / "checkpoints" / name
        if not (ckpt / "config.json").exists() or not list(ckpt.glob("*.safetensors")):
            log(f"building the random {name} checkpoint")
            build_checkpoint(role, ckpt)
        ckpts[role] = ckpt
        bundle = Bundle(bundle_dir)
        entry = bundle.entries.get(name)
        # exports from before the Identity folding / per-channel default lack quantization_scheme
        if (entry is not None and entry.extra.get("quantization_scheme") == "per-channel"
                and all((bundle.root / f.path).exists() for f in entry.files)):
            continue
        log(f"exporting {name} to ONNX int8 (keeping fp32); minutes, once")
        import torch

        torch.set_num_threads(threads)
        export_model(role, ckpt, bundle_dir, name=name, keep_fp32=True, threads=threads,
                     license="random weights, benchmark only", source=f"bench.q2_runtime: {SHAPES[role][1]}",
                     log=lambda m: log("  " + m))
        free_memory()
    return bundle_dir, ckpts


def quantized_matmuls(bundle_dir: Path, role: str) -> tuple[int, int]:
    """(MatMuls running in int8, all MatMuls) over the int8 graphs of a role's entry."""
    import onnx

    from fscore_lite.manifest import Bundle

    bundle = Bundle(bundle_dir)
    entry = bundle.get(SHAPES[role][0])
    q = total = 0
    for f in entry.files:
        if f.kind in ("weights", "encoder", "decoder", "decoder_with_past"):
            ops = [n.op_type for n in onnx.load(str(bundle.root / f.path), load_external_data=False).graph.node]
            q += sum(o in ("MatMulInteger", "DynamicQuantizeMatMul", "QLinearMatMul") for o in ops)
            total += sum(o in ("MatMulInteger", "DynamicQuantizeMatMul", "QLinearMatMul", "MatMul") for o in ops)
    return q, total


def load_onnx(bundle_dir: Path, role: str, threads: int, precision: str = "int8"):
    from fscore_lite.backends.onnx_nli import NliCrossEncoder
    from fscore_lite.backends.onnx_qa import ExtractiveQA
    from fscore_lite.backends.onnx_seq2seq import Seq2SeqGenerator
    from fscore_lite.manifest import Bundle

    bundle = Bundle(bundle_dir)
    entry = bundle.get(SHAPES[role][0])
    cls = {"qg": Seq2SeqGenerator, "qa": ExtractiveQA, "nli": NliCrossEncoder}[role]
    return cls.from_bundle(bundle, entry, threads=threads, cache=NoCache(), precision=precision)


# --- inputs: the same token ids for both sides --------------------------------------------
def _wow_lengths(data: Path | None, n: int) -> list[tuple[int, int]]:
    """(response tokens, knowledge tokens) of the first n WoW rows, estimated from word counts."""
    rows: list[tuple[int, int]] = []
    path = Path(data or "") / "q2-wow" / "dodeca_consistent.csv"
    if path.exists():
        with open(path, newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                rows.append(tuple(max(4, math.ceil(SUBWORDS_PER_WORD * len(r[k].split())))
                                  for k in ("response", "knowledge")))
                if len(rows) == n:
                    break
    while len(rows) < n:  # no data: the WoW means (15 and 20 words)
        rows.append((20, 27))
    return rows


def make_inputs(data: Path | None, n: int, seed: int = 0) -> list[dict]:
    """Per sample (one response): for each of its QUESTIONS_PER_RESPONSE questions the QG input,
    the QA pair on the response and on the knowledge, the NLI pair (lists, one entry a question)."""
    rng = random.Random(seed)

    def ids(k):
        return [rng.randrange(10, 1000) for _ in range(k)]

    types = lambda x: [0] * (QUESTION_TOKENS + 2) + [1] * (len(x) - QUESTION_TOKENS - 2)  # noqa: E731
    out = []
    for resp, know in _wow_lengths(data, n):
        response, knowledge = ids(resp), ids(know)
        sample: dict = {"qg": [], "qa_response": [], "qa_knowledge": [], "nli": []}
        for _ in range(QUESTIONS_PER_RESPONSE):
            q = ids(QUESTION_TOKENS)
            sample["qg"].append(ids(3) + ids(ANSWER_TOKENS) + ids(3) + response + [1])  # "answer: A  context: R </s>"
            qa_resp = [2] + q + [3] + response + [3]  # [CLS] q [SEP] context [SEP]
            qa_know = [2] + q + [3] + knowledge + [3]
            sample["qa_response"].append((qa_resp, types(qa_resp)))
            sample["qa_knowledge"].append((qa_know, types(qa_know)))
            hyp = q + ids(ANSWER_TOKENS) + [4]
            sample["nli"].append([0] + q + ids(ANSWER_TOKENS) + [4] + [2, 2] + hyp + [2])  # <s> p </s></s> h </s>
        out.append(sample)
    return out


# --- the two runtimes ----------------------------------------------------------------------
def torch_qg(model, ids):
    """Reference style: one question at a time (the list is looped by :func:`one_at_a_time`)."""
    import torch

    with torch.inference_mode():
        t = torch.tensor([ids])
        out = model.generate(input_ids=t, attention_mask=torch.ones_like(t), num_beams=NUM_BEAMS,
                             num_return_sequences=NUM_BEAMS, no_repeat_ngram_size=3, min_length=MAX_LENGTH,
                             max_length=MAX_LENGTH, early_stopping=True, do_sample=False)
    return out[0, 1:].tolist()


def onnx_qg(gen, questions):
    """Ours, as ``OnnxQuestionGenerator.questions_many``: the response's inputs in one padded
    encoder call, then one decoder call per step for all their beams; the first beam of each."""
    from fscore_lite.backends.onnx_seq2seq import BeamState, beam_search_many

    hidden, mask = gen.encode_many(questions)
    # eos_id -1 never occurs: exactly DECODE_STEPS steps, like min_length = max_length above.
    states = [BeamState(start_id=gen.start_id, eos_id=-1, num_beams=NUM_BEAMS, max_length=MAX_LENGTH,
                        no_repeat_ngram_size=3, early_stopping=True) for _ in questions]
    beam_search_many(gen.decoder_runner_many(hidden, mask, NUM_BEAMS), states)
    return [st.results(1)[0][0] for st in states]


def torch_qa(model, pair):
    import torch

    ids, types = pair
    with torch.inference_mode():
        t = torch.tensor([ids])
        out = model(input_ids=t, attention_mask=torch.ones_like(t), token_type_ids=torch.tensor([types]))
    return int(out.start_logits[0].argmax()), int(out.end_logits[0].argmax())


def onnx_qa(qa, pairs):
    """Ours: all questions of the response in one padded call."""
    return [(int(np.argmax(s)), int(np.argmax(e))) for s, e in qa.logits_batch(list(pairs))]


def torch_nli(model, ids):
    import torch

    with torch.inference_mode():
        t = torch.tensor([ids])
        return int(model(input_ids=t, attention_mask=torch.ones_like(t)).logits[0].argmax())


def onnx_nli(nli, rows):
    """Ours: all answer pairs of the response in one call, right-padded, attention mask."""
    from fscore_lite.backends.onnx_base import pad_rows

    a, mask = pad_rows(rows, nli.pad_id)
    feeds = {"input_ids": a, "attention_mask": mask}
    return [int(x) for x in np.argmax(nli.session.run(None, feeds)[0], axis=-1)]


def one_at_a_time(fn):
    """The reference style: the response's questions through ``fn`` one by one."""
    def run(model, items):
        return [fn(model, x) for x in items]
    run.__name__ = fn.__name__
    return run


STAGES = (  # (stage, role, input key, torch fn, onnx fn)
    ("QG", "qg", "qg", one_at_a_time(torch_qg), onnx_qg),
    ("QA on the response", "qa", "qa_response", one_at_a_time(torch_qa), onnx_qa),
    ("QA on the knowledge", "qa", "qa_knowledge", one_at_a_time(torch_qa), onnx_qa),
    ("NLI", "nli", "nli", one_at_a_time(torch_nli), onnx_nli),
)


def _length(items) -> float:
    """Mean input tokens per question."""
    return sum(len(x[0]) if isinstance(x, tuple) else len(x) for x in items) / len(items)


def run(args) -> tuple[str, dict]:
    import torch
    from transformers import AlbertForQuestionAnswering, RobertaForSequenceClassification, T5ForConditionalGeneration

    n = 2 if args.quick else 8
    threads = args.threads
    bundle_dir, ckpts = shape_models(max(threads))
    inputs = make_inputs(args.data, n)
    classes = {"qg": T5ForConditionalGeneration, "qa": AlbertForQuestionAnswering,
               "nli": RobertaForSequenceClassification}
    from fscore_lite.backends.onnx_session import session_spin

    result: dict = {"onnx_spin_us": session_spin(2), "samples": n, "decode_steps": DECODE_STEPS, "num_beams": NUM_BEAMS,
                    "questions_per_response": QUESTIONS_PER_RESPONSE, "threads": {}, "load_s": {}, "agreement": {},
                    "sizes_mb": {}}
    ref = {}
    for role, cls in classes.items():
        with pinned(max(threads)):
            ref[role], secs = timed(cls.from_pretrained, str(ckpts[role]), dtype=torch.float32)
        ref[role].eval()
        result["load_s"][role] = {"transformers_fp32": secs}
        result["sizes_mb"][role] = {"fp32_checkpoint": sum(p.stat().st_size for p in ckpts[role].glob("*.safetensors")) / 1e6}
    from fscore_lite.manifest import Bundle

    for role, (name, _) in SHAPES.items():
        entry = Bundle(bundle_dir).get(name)
        result["sizes_mb"][role]["onnx_int8"] = sum(f.size for f in entry.files if "fp32" not in f.kind) / 1e6
        result.setdefault("int8_matmuls", {})[role] = quantized_matmuls(bundle_dir, role)
    for t in threads:
        per_stage: dict = {}
        with pinned(t):
            ours = {}
            for role in SHAPES:
                ours[role], secs = timed(load_onnx, bundle_dir, role, t)
                result["load_s"][role].setdefault("onnx_int8", secs)
            # with workers: the same graphs again with passive waiting, to show what the runtime's
            # bounded spin (fscore_lite/backends/onnx_session.py) buys, in the same interleaving
            passive = {role: _passive(load_onnx, bundle_dir, role, t) for role in SHAPES} if t > 1 else None
            sides = ("transformers_fp32", "onnx_int8") + (("onnx_int8_passive",) if passive else ())
            for stage, role, key, tf, of in STAGES:
                log(f"q2_runtime: {stage}, {t} thread(s), {n} inputs")
                tf(ref[role], inputs[0][key])  # warm-up, every side
                of(ours[role], inputs[0][key])
                if passive:
                    of(passive[role], inputs[0][key])
                times: dict[str, list[float]] = {side: [] for side in sides}
                same = total = 0
                for x in inputs:  # interleaved: every side sees the same machine load
                    a, s1 = timed(tf, ref[role], x[key])
                    b, s2 = timed(of, ours[role], x[key])
                    times["transformers_fp32"].append(s1)
                    times["onnx_int8"].append(s2)
                    if passive:
                        c, s3 = timed(of, passive[role], x[key])
                        times["onnx_int8_passive"].append(s3)
                        assert c == b, f"{stage}: passive waiting changed the output"
                    same += sum(p == q for p, q in zip(a, b))
                    total += len(a)
                per_stage[stage] = {side: summarize(v) for side, v in times.items()}
                per_stage[stage]["tokens"] = sum(_length(x[key]) for x in inputs) / n
                result["agreement"].setdefault(stage, f"{same}/{total}")
            del ours, passive
            free_memory()
        per_resp = {side: sum(per_stage[s][side]["mean"] for s in per_stage) for side in sides}
        result["threads"][t] = {"stages": per_stage, "per_response_s": per_resp}
    del ref
    free_memory()
    return _markdown(result), result


def _passive(load, *args):
    """``load(*args)`` with the runtime's spin turned off (FSCORE_LITE_ONNX_SPIN_US=0)."""
    import os

    from fscore_lite.backends.onnx_session import SPIN_ENV

    saved = os.environ.get(SPIN_ENV)
    os.environ[SPIN_ENV] = "0"
    try:
        return load(*args)
    finally:
        if saved is None:
            os.environ.pop(SPIN_ENV, None)
        else:
            os.environ[SPIN_ENV] = saved


def _markdown(r: dict) -> str:
    rows = []
    for t, res in r["threads"].items():
        for stage, s in res["stages"].items():
            a, b = s["transformers_fp32"]["mean"], s["onnx_int8"]["mean"]
            rows.append([stage, t, f"{s['tokens']:.0f}", fmt_s(a), fmt_s(b), ratio(a, b)])
        a, b = res["per_response_s"]["transformers_fp32"], res["per_response_s"]["onnx_int8"]
        rows.append([f"**per response** ({r['questions_per_response']} questions)", t, "", f"**{fmt_s(a)}**",
                     f"**{fmt_s(b)}**", f"**{ratio(a, b)}**"])
    table = md_table(["stage (per response)", "threads", "input tokens per question",
                      "transformers fp32, one question at a time (reference style)",
                      "ONNX int8, batched (fscore-lite)", "speed-up"], rows)
    sizes = "; ".join(f"{SHAPES[k][0].replace('-random', '')} {v['fp32_checkpoint']:.0f} MB fp32 → "
                      f"{v['onnx_int8']:.0f} MB int8" for k, v in r["sizes_mb"].items())
    loads = "; ".join(f"{k.upper()} {fmt_s(v['transformers_fp32'])} vs {fmt_s(v.get('onnx_int8', float('nan')))}"
                      for k, v in r["load_s"].items())
    agree = ", ".join(f"{k} {v}" for k, v in r["agreement"].items())
    spin = r.get("onnx_spin_us", 0)
    waits = "".join(
        f"\n- {t} threads, same run, interleaved: fscore-lite's sessions let idle workers spin {spin} µs before they "
        f"sleep; with passive waiting (`FSCORE_LITE_ONNX_SPIN_US=0`, same outputs) a response took "
        f"{fmt_s(res['per_response_s']['onnx_int8_passive'])} against {fmt_s(res['per_response_s']['onnx_int8'])} "
        f"({ratio(res['per_response_s']['transformers_fp32'], res['per_response_s']['onnx_int8_passive'])} the "
        f"reference style instead of {ratio(res['per_response_s']['transformers_fp32'], res['per_response_s']['onnx_int8'])}; "
        + ", ".join(f"{stage} {fmt_s(v['onnx_int8_passive']['mean'])}" for stage, v in res["stages"].items()) + ")."
        for t, res in r["threads"].items() if "onnx_int8_passive" in res["per_response_s"])
    mm = "; ".join(f"{k.upper()} {q}/{n}" for k, (q, n) in r.get("int8_matmuls", {}).items())
    shapes = "; ".join(f"{k.upper()}: {v[1]}" for k, v in SHAPES.items())
    return f"""Models: random weights with the reference shapes ({shapes}). Mean seconds per call over
{r['samples']} responses whose lengths follow the first {r['samples']} WoW responses (dodeca, consistent), each with
{r['questions_per_response']} questions; QG runs exactly {r['decode_steps']} decoder steps with {r['num_beams']} beams on both
sides. Per response = QG + QA on the response + QA on the knowledge + NLI for its
{r['questions_per_response']} questions (the work of Q² when each question passes the first beam): the reference style
runs each question alone; fscore-lite runs the response's QA questions in one call and its NLI pairs in one call
(QG: all its questions' beams in one decoder call per step). Tokenization is excluded on both sides (same ids fed to both).

{table}

- Model files: {sizes}.
- MatMuls that run in int8 in the int8 graphs (per-channel weight scales): {mm} (the attention products of
  two activations always stay fp32: 48 of RoBERTa-large's 194, for instance). ALBERT shares one layer's
  weights across its 24 layers and the ONNX export feeds them to the MatMuls through `Identity` nodes;
  the export folds those before quantizing (`models/quantize.py`), so all its weight MatMuls run in int8.
- Load time (transformers `from_pretrained` vs ONNX session creation): {loads}.
- Both libraries are imported before the cores are pinned: onnxruntime imported inside a one-core
  affinity mask ran its int8 kernels 2.2× slower for the whole process (`bench/common.py`), which
  this section's runs before 2026-12-01 18:36 suffered on the ONNX side only.
- QG's beam search takes each step's top 2 × beams of beams × vocabulary scores by partition (a
  full sort was 59% of its time), decodes the first step once per question (its beams are all the
  start token) and leaves the cross-attention keys/values, equal across a question's beams, in
  place; each is tested to give the same bits (`tests/test_q2_onnx.py`, `tests/test_q2_rules.py`).
- int8 batched vs fp32 reference, same decision per question (argmax span / label / first beam; first thread
  count; random weights make logits nearly flat, so this is a worst case for int8 — see `int8_fp32` for the
  real embedder): {agree}.{waits}
"""
