"""Section ``atomic_facts``: atomic facts/s, one sequence at a time vs 3 decoded together; bios per hour.

Part 1. The sentences of annotated bios (InstructGPT's, the first ``SENTENCES`` of each of
``BIOS`` bios) go through :class:`fscore_lite.factscore.atomic_facts.AtomicFactGenerator` twice per
model and thread count: with ``--parallel 1`` (the previous path: one greedy generation at a time)
and ``--parallel 3`` (:meth:`LlamaRunner.generate_many`). Both sides run in the same process,
interleaved bio by bio, with no call cache, after one warm-up sentence each (the fixed few-shot
prefix is evaluated then, once per side). The facts must be byte-identical.

Part 2. End to end with the default bundle (the 1.5B LLM for atomic facts, the installed trained
verifier): ``fscore_lite.factscore.pipeline.score_file`` on whole annotated bios whose topics are in
a store of wiki-factscore-dev pages, no call cache; bios per hour and each stage's share of the time.
"""
from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from .common import NoCache, fmt_s, free_memory, log, md_table, pinned, wiki_pages, wiki_store

ALIASES = {"0.5b": "qwen2.5-coder-0.5b-instruct-q4_k_m", "1.5b": "qwen2.5-coder-1.5b-instruct-q4_k_m"}
BIOS, SENTENCES = 5, 3
E2E_BIOS = 2
# (model, threads) measured by default; 1.5B at 1 thread (about 20 minutes more) runs with
# ``--llm-models 1.5b --threads 1``, and any --llm-models gives every model x every --threads
DEFAULT_CONFIGS = [("0.5b", 1), ("0.5b", 2), ("1.5b", 2)]
WARMUP = "He was born in 1950."


def annotated_bios(data: Path, topics: set[str] | None = None) -> list[dict]:
    """InstructGPT's annotated bios that have an output, in file order (optionally of ``topics``)."""
    rows = []
    for line in (Path(data) / "factscore-labeled" / "InstructGPT.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec.get("output") and rec.get("annotations") and (topics is None or rec["topic"] in topics):
            rows.append(rec)
    return rows


def _generator(name: str, threads: int, parallel: int):
    from fscore_lite.backends.llm import load_llm
    from fscore_lite.factscore.atomic_facts import AtomicFactGenerator
    from fscore_lite.settings import Settings

    llm = load_llm(Settings(threads=threads, llm=name, parallel=parallel), cache=NoCache())
    return AtomicFactGenerator(llm)


def _texts(bios: list[dict], n_sent: int) -> list[str]:
    from fscore_lite.factscore.sentences import split_sentences

    out = []
    for rec in bios:
        sents, _ = split_sentences(rec["output"])
        out.append(" ".join(sents[:n_sent]))
    return out


def part1(args) -> tuple[list, dict]:
    if args.llm_models:
        configs = [(m, t) for m in args.llm_models for t in args.threads]
    else:
        configs = [(m, t) for m, t in DEFAULT_CONFIGS if t in args.threads and (m == "0.5b" or not args.quick)]
    n_bios, n_sent = (2, 1) if args.quick else (BIOS, SENTENCES)
    texts = _texts(annotated_bios(args.data)[:n_bios], n_sent)
    rows, res = [], {}
    for model, threads in configs:
        name = ALIASES.get(model, model)
        with pinned(threads):
            sides = {p: _generator(name, threads, p) for p in (1, 3)}
            for g in sides.values():
                g.run(WARMUP)
            secs = {1: 0.0, 3: 0.0}
            facts = {1: [], 3: []}
            tokens = {p: g.llm.stats.tokens_generated for p, g in sides.items()}
            for text in texts:
                for p, g in sides.items():
                    t = time.perf_counter()
                    out = g.run(text)
                    secs[p] += time.perf_counter() - t
                    facts[p].append([(s.sentence, s.facts) for s in out])
            tokens = {p: g.llm.stats.tokens_generated - tokens[p] for p, g in sides.items()}
            n_facts = sum(len(f) for bio in facts[1] for _, f in bio)
            same = facts[1] == facts[3]
            r = {"seconds": secs, "facts": n_facts, "tokens": tokens, "identical": same,
                 "sentences": sum(len(b) for b in facts[1])}
            res[f"{model}/{threads}"] = r
            log(f"atomic_facts {model} {threads}t: {secs[1]:.1f}s vs {secs[3]:.1f}s, identical={same}")
            rows.append([model, threads, r["sentences"], n_facts, f"{n_facts / secs[1]:.3f}",
                         f"{n_facts / secs[3]:.3f}", f"{tokens[1] / secs[1]:.1f}", f"{tokens[3] / secs[3]:.1f}",
                         f"{secs[1] / secs[3]:.2f}×", "yes" if same else "**no**"])
            del sides
            free_memory()
    res["bios"], res["sentences_per_bio"] = n_bios, n_sent
    return rows, res


def part2(args) -> tuple[str, dict]:
    from fscore_lite.factscore.pipeline import ScoreOptions, score_file
    from fscore_lite.settings import Settings

    n_pages = 20 if not args.quick else 5
    pages = wiki_pages(args.data, n_pages)
    bios = annotated_bios(args.data, {p["topic"] for p in pages})[: (1 if args.quick else E2E_BIOS)]
    threads = max(args.threads)
    store = wiki_store(args.data, n_pages, threads)
    with tempfile.TemporaryDirectory() as tmp, pinned(threads):
        inp = Path(tmp) / "bios.jsonl"
        inp.write_text("".join(json.dumps({"topic": b["topic"], "output": b["output"]}) + "\n" for b in bios),
                       encoding="utf-8")
        settings = Settings(threads=threads, store=store, llm=ALIASES["1.5b"], use_cache=False)
        t = time.perf_counter()
        summary = score_file(inp, Path(tmp) / "out.jsonl", settings, ScoreOptions(progress=False))
        wall = time.perf_counter() - t
    tm = summary["timings"]
    stages = {"load": tm["load_s"], "atomic facts": tm["atomic_facts_s"], "retrieval": tm["retrieval_s"],
              "verification": tm["verification_s"]}
    stages["other"] = max(0.0, wall - sum(stages.values()))
    rows = [[k, fmt_s(v), f"{100 * v / wall:.1f}%"] for k, v in stages.items()]
    res = {"bios": len(bios), "wall_s": wall, "bios_per_hour": 3600 * len(bios) / wall, "stages_s": stages,
           "facts": tm["facts_generated"], "verifier": summary["settings"]["verifier"], "threads": threads,
           "score": summary.get("score")}
    md = (f"End to end, default bundle (1.5B Q4_K_M atomic facts with `--parallel 3`, verifier "
          f"`{res['verifier']}`), {len(bios)} whole annotated InstructGPT bios, {threads} threads, no call cache: "
          f"**{res['bios_per_hour']:.1f} bios/hour** ({fmt_s(wall)} for {res['facts']} facts).\n\n"
          + md_table(["stage", "time", "share"], rows) + "\n")
    return md, res


def run(args) -> tuple[str, dict]:
    rows, r1 = part1(args)
    md = (f"Atomic facts of the first {r1['sentences_per_bio']} sentence(s) of {r1['bios']} annotated InstructGPT "
          "bios, `--parallel 1` (one generation at a time, the previous path) vs `--parallel 3` (3 sequences a "
          "decoding step, `LlamaRunner.generate_many`), same process, interleaved bio by bio, no call cache. "
          "1.5B at 1 thread is left out by default (`--llm-models 1.5b --threads 1` runs it).\n\n"
          + md_table(["model", "threads", "sentences", "facts", "facts/s (1)", "facts/s (3)", "tokens/s (1)",
                      "tokens/s (3)", "speed-up", "facts byte-identical"], rows) + "\n")
    md2, r2 = part2(args)
    return md + "\n" + md2, {"parallel": r1, "end_to_end": r2}
