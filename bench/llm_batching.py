"""Section ``llm_batching``: what a llama.cpp decoding step costs with 1–4 sequences, and whether
each sequence's logits stay the bits it gets alone (why ``--parallel`` stops at 3).

For each model and thread count, ``WIDTH_MAX`` real atomic-fact prompts are prefilled into the
streams of a :class:`fscore_lite.backends.llm_parallel.ParallelDecoder` built for 4 (the width
the runtime refuses), and the same greedy continuation is stepped ``STEPS`` times with 1, 2, 3
and 4 sequences a step (each width from the same prefilled state). The logits of every sequence
are compared with ``==`` against width 1; times are per step.
"""
from __future__ import annotations

import time

import numpy as np

from .common import NoCache, free_memory, log, md_table, pinned

ALIASES = {"0.5b": "qwen2.5-coder-0.5b-instruct-q4_k_m", "1.5b": "qwen2.5-coder-1.5b-instruct-q4_k_m"}
SENTENCES = [
    "Marie Curie was a Polish physicist who won two Nobel Prizes.",
    "He was born in 1950 in Lagos, Nigeria, and studied law.",
    "She later moved to Paris, where she taught chemistry.",
    "The band released three albums between 1990 and 1995.",
]
WIDTH_MAX = 4
STEPS = 6


def _measure(name: str, threads: int) -> dict:
    from fscore_lite.backends import llm_parallel
    from fscore_lite.backends.llm import load_llm
    from fscore_lite.factscore import atomic_facts as af
    from fscore_lite.settings import Settings

    runner = load_llm(Settings(threads=threads, llm=name, n_ctx=2048), cache=NoCache())
    demos = af.load_demos()
    sel = af.DemoSelector(demos)
    prompts = [runner.tokenize(runner.format_prompt(af.build_prompt(s, demos, sel))) for s in SENTENCES]
    dec = llm_parallel.ParallelDecoder(runner, WIDTH_MAX, strict=False)  # measurement only: the runtime refuses 4
    first = {s: dec.prefill(s, p) for s, p in enumerate(prompts)}
    held = {s: len(p) for s, p in enumerate(prompts)}
    # the greedy continuation of each prompt, decoded alone (width 1): the reference bits
    ref: dict[int, list[np.ndarray]] = {}
    toks: dict[int, list[int]] = {}
    secs: dict[int, float] = {}
    for s in range(WIDTH_MAX):
        logits, ref[s], toks[s] = first[s], [], []
        t = time.perf_counter()
        for _ in range(STEPS):
            toks[s].append(int(np.argmax(logits)))
            logits = dec.step({s: toks[s][-1]})[s]
            ref[s].append(logits)
        secs.setdefault(1, 0.0)
        secs[1] += time.perf_counter() - t
    secs[1] /= WIDTH_MAX * STEPS
    same: dict[int, bool] = {1: True}
    for width in range(2, WIDTH_MAX + 1):
        for s in range(WIDTH_MAX):
            dec.truncate(s, held[s])
        ok = True
        t = time.perf_counter()
        for k in range(STEPS):
            out = dec.step({s: toks[s][k] for s in range(width)})
            ok &= all(np.array_equal(out[s], ref[s][k]) for s in range(width))
        secs[width] = (time.perf_counter() - t) / STEPS
        same[width] = ok
    dec.close()
    return {"ms_per_step": {w: 1000 * v for w, v in secs.items()}, "identical": same}


def run(args) -> tuple[str, dict]:
    models = args.llm_models or (["0.5b"] if args.quick else ["0.5b", "1.5b"])
    rows, res = [], {}
    for model in models:
        for threads in args.threads:
            with pinned(threads):
                r = _measure(ALIASES.get(model, model), threads)
            free_memory()
            res[f"{model}/{threads}"] = r
            log(f"llm_batching {model} {threads}t: {r}")
            ms = r["ms_per_step"]
            rows.append([model, threads] + [f"{ms[w]:.0f} ms ({w * ms[1] / ms[w]:.2f}×)" for w in range(1, WIDTH_MAX + 1)]
                        + [", ".join(f"{w}: {'yes' if r['identical'][w] else '**no**'}" for w in range(2, WIDTH_MAX + 1))])
    md = (f"One decoding step with 1–{WIDTH_MAX} sequences of real atomic-fact prompts (in brackets: tokens per "
          "second relative to width 1), and whether every sequence's logits equal, bit for bit, those it gets "
          f"decoded alone ({STEPS} greedy steps from the same prefilled state). `--parallel` allows 1–3.\n\n"
          + md_table(["model", "threads"] + [f"width {w}" for w in range(1, WIDTH_MAX + 1)] + ["logits identical"], rows)
          + "\n")
    return md, res
