"""Section ``llm_kernels``: llama.cpp's CPU kernels — prompt and decode tokens/s, and bios/hour of facts.

One build of llama.cpp carries every x86-64 kernel (``fscore_lite/backends/llama_kernels.py``);
``--llm-kernel`` picks one. Sides: ``portable`` (the AVX2 kernel, the default, the same code and
bits as the AVX2-only builds the project used before) and ``auto`` (the best kernel this CPU has),
plus any named with ``--kernels``. A process runs one kernel, so every side runs in a child process
of its own, one after the other, in the order given and then again reversed (load on a shared
machine falls on every side alike); each child is pinned to the same cores, uses no call cache and
measures:

* prompt tokens/s: real atomic-fact prompts (the default decomposer's demos and a bio's sentence),
  each evaluated from scratch;
* decode tokens/s: greedy steps after such a prompt (64 tokens, no stop string);
* facts of whole annotated bios with the default decomposer (the stage that is 99% of a run):
  seconds, bios per hour, and whether the facts are the same bytes as the portable side's.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from .common import fmt_s, log, md_table

DECODE_STEPS = 64
PROMPTS = 3
KERNEL_BIOS = 3


def _worker(kernel: str, llm_name: str, threads: int, data: str, n_bios: int, cores: list[int]) -> dict:
    """Run in a child process: one kernel's measurements (printed as JSON)."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(cores))
    from fscore_lite.backends.llm import load_llm
    from fscore_lite.factscore.atomic_facts import DemoSelector, build_prompt, load_demos
    from fscore_lite.factscore.decomposers import make_decomposer
    from fscore_lite.settings import Settings

    from .atomic_facts import annotated_bios
    from .common import NoCache

    t = time.perf_counter()
    llm = load_llm(Settings(threads=threads, llm=llm_name, llm_kernel=kernel, use_cache=False), cache=NoCache())
    load_s = time.perf_counter() - t
    llm.reuse_prefix = False  # every prompt from scratch: the kernel's own prompt speed
    bios = annotated_bios(data)[:n_bios]
    demos = load_demos()
    selector = DemoSelector(demos)
    prompts = [build_prompt(b["output"].split(". ")[0] + ".", demos, selector) for b in bios[:PROMPTS]]
    prompt_tokens, prompt_s = 0, 0.0
    decode_tokens, decode_s = 0, 0.0
    for p in prompts:
        toks = llm._prompt_tokens(p)
        llm._forget()
        t = time.perf_counter()
        logits = llm.evaluate(toks)
        prompt_s += time.perf_counter() - t
        prompt_tokens += len(toks)
        t = time.perf_counter()
        for _ in range(DECODE_STEPS):
            logits = llm.append(int(logits.argmax()))
        decode_s += time.perf_counter() - t
        decode_tokens += DECODE_STEPS
    llm.reuse_prefix = True  # the decomposer as `score` runs it (kept demo prefix)
    decomposer = make_decomposer("default", lambda: llm)
    facts, bio_s = [], 0.0
    for b in bios:
        t = time.perf_counter()
        facts.append([f for s in decomposer.run(b["output"]) for f in s.facts])
        bio_s += time.perf_counter() - t
    return {"kernel": llm.kernel.to_json(), "load_s": load_s, "prompt_tokens": prompt_tokens, "prompt_s": prompt_s,
            "decode_tokens": decode_tokens, "decode_s": decode_s, "bios": len(bios), "bio_s": bio_s, "facts": facts,
            "load_average": os.getloadavg()[0]}


def _child(kernel: str, args, threads: int, n_bios: int, cores: list[int]) -> dict:
    from .atomic_facts import ALIASES

    llm = ALIASES.get(args.e2e_llm, args.e2e_llm)
    code = ("import json, sys; from bench.llm_kernels import _worker; "
            "print(json.dumps(_worker(*json.loads(sys.argv[1]))))")
    argv = json.dumps([kernel, llm, threads, str(args.data), n_bios, cores])
    env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))
    proc = subprocess.run([sys.executable, "-c", code, argv], capture_output=True, text=True, env=env,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if proc.returncode != 0:
        raise RuntimeError(f"kernel {kernel}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(args) -> tuple[str, dict]:
    from fscore_lite.backends.llama_kernels import resolve_kernel

    from .common import usable_cores

    threads = max(args.threads)
    cores = usable_cores()[:threads]
    n_bios = 1 if args.quick else KERNEL_BIOS
    asked = ["portable", "auto"] + [k for k in getattr(args, "kernels", "").split(",") if k]
    sides, seen = [], set()
    for k in asked:  # sides that resolve to the same kernel run once
        name = resolve_kernel(k)
        if name not in seen:
            seen.add(name)
            sides.append(k)
    runs = {k: [] for k in sides}
    for k in sides + sides[::-1]:
        log(f"llm_kernels: {k} ({resolve_kernel(k)})")
        runs[k].append(_child(k, args, threads, n_bios, cores))
    base = sides[0]
    res = {}
    for k, rs in runs.items():
        agg = {key: sum(r[key] for r in rs) for key in ("prompt_tokens", "prompt_s", "decode_tokens", "decode_s",
                                                         "bios", "bio_s")}
        res[k] = {"kernel": rs[0]["kernel"], "runs": len(rs), **agg,
                  "prompt_tps": agg["prompt_tokens"] / agg["prompt_s"], "decode_tps": agg["decode_tokens"] / agg["decode_s"],
                  "bios_per_hour": 3600 * agg["bios"] / agg["bio_s"],
                  "facts_per_bio": sum(len(f) for f in rs[0]["facts"]) / max(1, len(rs[0]["facts"])),
                  "same_facts_each_run": all(r["facts"] == rs[0]["facts"] for r in rs),
                  "facts": rs[0]["facts"], "load_average": [r["load_average"] for r in rs]}
    rows = []
    for k, r in res.items():
        same = sum(a == b for a, b in zip(r["facts"], res[base]["facts"]))
        r["bios_same_facts_as_portable"] = same
        rows.append([f"`--llm-kernel {k}`", f"`{r['kernel']['ran']}`",
                     ", ".join(x.split("=")[0].strip() for x in r["kernel"]["features"].split("|") if x.strip()),
                     f"{r['prompt_tps']:.1f}", f"{r['prompt_tps'] / res[base]['prompt_tps']:.2f}×",
                     f"{r['decode_tps']:.1f}", f"{r['decode_tps'] / res[base]['decode_tps']:.2f}×",
                     f"{r['bios_per_hour']:.1f}", f"{r['bios_per_hour'] / res[base]['bios_per_hour']:.2f}×",
                     f"{r['facts_per_bio']:.1f}", f"{same}/{len(r['facts'])}"])
    md = (f"LLM `{args.e2e_llm}`, {threads} thread{'s' if threads > 1 else ''} pinned to the same cores, no call "
          f"cache; every side in a child process of its own, run {len(runs[base])} times (the order given, then "
          f"reversed). Prompt: {PROMPTS} atomic-fact prompts (demos + a bio's first sentence) each evaluated from "
          f"scratch; decode: {DECODE_STEPS} greedy steps after each; facts: {n_bios} whole annotated InstructGPT bios "
          f"through the default decomposer (kept demo prefix, as `score` runs it). Load average (1 min) at the end "
          f"of each child: " + ", ".join(f"{k} " + "/".join(f"{x:.2f}" for x in r["load_average"]) for k, r in res.items())
          + ".\n\n"
          + md_table(["side", "kernel", "instruction sets", "prompt tok/s", "vs portable", "decode tok/s",
                      "vs portable", "bios/hour (facts)", "vs portable", "facts/bio", "bios with the portable's facts"],
                     rows) + "\n")
    for r in res.values():
        r.pop("facts")
    log("llm_kernels: " + ", ".join(f"{k} prompt {r['prompt_tps']:.0f} tok/s, decode {r['decode_tps']:.1f} tok/s, "
                                    f"{r['bios_per_hour']:.1f} bios/h" for k, r in res.items()))
    return md, {"sides": res, "baseline": base, "threads": threads, "llm": args.e2e_llm, "seconds_fmt":
                {k: fmt_s(r["bio_s"]) for k, r in res.items()}}
