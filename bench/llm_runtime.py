"""Section ``llm_runtime``: FActScore verification, llama.cpp Q4_K_M vs transformers fp32.

The same GGUF file runs on both sides: through :class:`fscore_lite.backends.llm.LlamaRunner`
(what ``fscore-lite score`` uses) and dequantized to fp32 by transformers
(``AutoModelForCausalLM.from_pretrained(folder, gguf_file=...)``). The prompts are real
verification prompts (:func:`fscore_lite.factscore.verify.build_prompt`, k = 2 passages
retrieved from a store of wiki-factscore-dev pages, facts = the labeled bios'
``model-atomic-facts`` of those topics). Both sides get the same token ids (llama.cpp's
tokenization) and evaluate every prompt from scratch (no KV prefix reuse); transformers
computes only the last position's logits (``logits_to_keep=1``), as llama.cpp does.

Decision = logsumexp of the first-token log-probabilities of "True"/" True" vs
"False"/" False" (the runtime's rule); the table gives the share of identical decisions.
"""
from __future__ import annotations

import math
import time

import numpy as np

from .common import NoCache, fmt_s, free_memory, labeled_facts, log, md_table, pinned, timed, wiki_pages, wiki_store

WORDS = ["True", " True", "False", " False"]
ALIASES = {"0.5b": "qwen2.5-coder-0.5b-instruct-q4_k_m", "1.5b": "qwen2.5-coder-1.5b-instruct-q4_k_m"}
K = 2
DECODE_TOKENS = 16  # greedy steps after the prompt, for the decode-speed columns
DECODE_PROMPTS = 2


def _lse(xs) -> float:
    m = max(xs)
    return m + math.log(sum(math.exp(x - m) for x in xs))


def margin(lp: dict) -> float:
    return _lse([lp["True"], lp[" True"]]) - _lse([lp["False"], lp[" False"]])


def build_prompts(data, n: int, threads: int) -> list[dict]:
    """``n`` verification prompts over 2 wiki pages (half the facts from each page)."""
    from fscore_lite.backends.embed import SentenceEmbedder
    from fscore_lite.factscore.retrieve import Retriever
    from fscore_lite.factscore.verify import build_prompt
    from fscore_lite.manifest import Bundle
    from fscore_lite.settings import Settings
    from fscore_lite.store import open_store

    pages = wiki_pages(data, 2)
    facts = labeled_facts(data)
    store = open_store(wiki_store(data, 2, threads))
    embedder = SentenceEmbedder.from_bundle(Bundle(Settings().models_dir), store.embed_model, threads)
    retriever = Retriever(store, embedder, k=K, cache=NoCache())
    out = []
    for i in range(n):
        topic = pages[i % len(pages)]["topic"]
        fact = facts[topic][i // len(pages)]
        out.append({"topic": topic, "fact": fact, "prompt": build_prompt(topic, fact, retriever.retrieve(topic, fact))})
    store.close()
    return out


def _llama(name: str, threads: int):
    from fscore_lite.backends.llm import LlamaRunner
    from fscore_lite.manifest import Bundle
    from fscore_lite.settings import Settings

    bundle = Bundle(Settings().models_dir)
    entry = bundle.get(name)
    path = bundle.verified_path(entry)
    return LlamaRunner(path, entry.sha256, entry.name, threads=threads, n_ctx=4096, cache=NoCache(),
                       reuse_prefix=False), path


def _torch_logprobs(model, ids: list[int], word_ids: dict[str, int]) -> dict:
    import torch

    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([ids]), logits_to_keep=1).logits[0, -1].float()
        lp = torch.log_softmax(logits, dim=-1)
    return {w: float(lp[i]) for w, i in word_ids.items()}


def _llama_decode(runner, ids: list[int], n: int) -> float:
    """Seconds for ``n`` greedy decoding steps after the prompt (one token evaluated per step)."""
    toks = list(ids)
    logits = runner.evaluate(toks)
    t = time.perf_counter()
    for _ in range(n):
        logits = runner.append(int(np.argmax(logits)))  # one token evaluated after the held context
    return time.perf_counter() - t


def _torch_decode(model, ids: list[int], n: int) -> float:
    import torch

    with torch.inference_mode():
        out = model(input_ids=torch.tensor([ids]), use_cache=True, logits_to_keep=1)
        t = time.perf_counter()
        for _ in range(n):
            nxt = out.logits[0, -1].argmax().view(1, 1)
            out = model(input_ids=nxt, past_key_values=out.past_key_values, use_cache=True)
    return time.perf_counter() - t


def bench_model(name: str, prompts: list[dict], threads: list[int]) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    res: dict = {"model": name, "threads": {}}
    runner, path = _llama(name, threads[0])
    ids = [runner.tokenize(p["prompt"]) for p in prompts]
    word_ids = {w: runner.first_token(w) for w in WORDS}
    res["prompt_tokens"] = [len(x) for x in ids]
    del runner
    log(f"llm_runtime: loading {name} into transformers fp32 (dequantizing the GGUF)")
    with pinned(max(threads)):
        model, load_s = timed(AutoModelForCausalLM.from_pretrained, str(path.parent), gguf_file=path.name,
                              dtype=torch.float32)
    model.eval()
    res["load_s"] = {"transformers_fp32": load_s}
    res["weights_gb"] = {"llama_cpp": path.stat().st_size / 1e9,
                         "transformers_fp32": sum(p.numel() * p.element_size() for p in model.parameters()) / 1e9}
    for t in threads:
        log(f"llm_runtime: {name}, {t} thread(s), {len(prompts)} prompts")
        with pinned(t):
            runner, secs = timed(_llama, name, t)
            runner = runner[0]
            res["load_s"].setdefault("llama_cpp", secs)
            runner.next_token_logprobs(prompts[0]["prompt"], WORDS)  # warm-up, both sides
            _torch_logprobs(model, ids[0], word_ids)
            rows = []
            for p, x in zip(prompts, ids):
                a, s1 = timed(runner.next_token_logprobs, p["prompt"], WORDS)
                b, s2 = timed(_torch_logprobs, model, x, word_ids)
                rows.append({"llama_s": s1, "torch_s": s2, "llama_margin": margin(a), "torch_margin": margin(b)})
            n_dec = min(DECODE_PROMPTS, len(ids))
            dec_l = sum(_llama_decode(runner, x, DECODE_TOKENS) for x in ids[:n_dec])
            dec_t = sum(_torch_decode(model, x, DECODE_TOKENS) for x in ids[:n_dec])
            del runner
        tokens = sum(res["prompt_tokens"])
        ls, ts = sum(r["llama_s"] for r in rows), sum(r["torch_s"] for r in rows)
        same = sum((r["llama_margin"] > 0) == (r["torch_margin"] > 0) for r in rows)
        res["threads"][t] = {
            "rows": rows, "llama_tok_s": tokens / ls, "torch_tok_s": tokens / ts, "speedup": ts / ls,
            "same_decisions": same, "n": len(rows),
            "decode_llama_tok_s": n_dec * DECODE_TOKENS / dec_l, "decode_torch_tok_s": n_dec * DECODE_TOKENS / dec_t,
            "margin_abs_diff_mean": float(np.mean([abs(r["llama_margin"] - r["torch_margin"]) for r in rows])),
            "supported_llama": sum(r["llama_margin"] > 0 for r in rows),
            "supported_torch": sum(r["torch_margin"] > 0 for r in rows),
        }
    del model
    free_memory()
    return res


def run(args) -> tuple[str, dict]:
    n = 3 if args.quick else args.prompts
    models = [ALIASES.get(m, m) for m in (args.llm_models or (["0.5b"] if args.quick else ["0.5b", "1.5b"]))]
    prompts = build_prompts(args.data, n, max(args.threads))
    result = {"prompts": [{k: p[k] for k in ("topic", "fact")} for p in prompts], "k": K, "models": []}
    for name in models:
        result["models"].append(bench_model(name, prompts, args.threads))
    return _markdown(result), result


def _markdown(r: dict) -> str:
    rows = []
    for m in r["models"]:
        mean_tokens = sum(m["prompt_tokens"]) / len(m["prompt_tokens"])
        for t, x in m["threads"].items():
            rows.append([m["model"].replace("-instruct-q4_k_m", ""), t, x["n"], f"{mean_tokens:.0f}",
                         f"{x['llama_tok_s']:.0f}", f"{x['torch_tok_s']:.0f}", f"**{x['speedup']:.2f}×**",
                         f"{x['same_decisions']}/{x['n']} ({100 * x['same_decisions'] / x['n']:.0f}%)",
                         f"{x['margin_abs_diff_mean']:.2f}", f"{x['decode_llama_tok_s']:.1f}",
                         f"{x['decode_torch_tok_s']:.1f}",
                         f"**{x['decode_llama_tok_s'] / x['decode_torch_tok_s']:.2f}×**"])
    table = md_table(["model (GGUF Q4_K_M)", "threads", "prompts", "tokens/prompt", "prompt tok/s llama.cpp",
                      "prompt tok/s transformers fp32", "llama.cpp ÷ transformers (prompt)",
                      "same True/False decision", "mean |Δ margin|", "decode tok/s llama.cpp",
                      "decode tok/s transformers", "llama.cpp ÷ transformers (decode)"], rows)
    loads = "; ".join(f"{m['model']}: transformers {fmt_s(m['load_s']['transformers_fp32'])} (dequantize + build), "
                      f"llama.cpp {fmt_s(m['load_s'].get('llama_cpp', float('nan')))}" for m in r["models"])
    weights = "; ".join(f"{m['model']}: {m['weights_gb']['llama_cpp']:.2f} GB (GGUF, memory-mapped) vs "
                        f"{m['weights_gb']['transformers_fp32']:.2f} GB fp32" for m in r["models"])
    topics = sorted({p["topic"] for p in r["prompts"]})
    return f"""Verification prompts: {len(r['prompts'])} facts (`model-atomic-facts` of {', '.join(topics)}), each with
its k = {r['k']} best passages from a 2-page wiki-factscore-dev store. Tokens/s = prompt tokens evaluated per
second (the next-token log-probabilities need one forward pass over the prompt). Margin = log P(True) −
log P(False) of the first token; a decision is "supported" when it is positive.

{table}

Decode = {DECODE_TOKENS} greedy steps after each of the first {DECODE_PROMPTS} prompts (one new token per forward pass
with the KV cache: the atomic-fact generation workload). Ratios above 1 mean llama.cpp is faster.

- Load time: {loads}.
- Weights in memory: {weights}.
- The difference in decisions is the Q4_K_M quantization (transformers runs the dequantized weights in fp32),
  not the runtime: both sides read the same GGUF file.
"""
