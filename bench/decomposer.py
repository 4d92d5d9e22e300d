"""Section ``decomposer``: bios per hour end to end, today's default against the new default decomposer.

Old: ``--decomposer reference`` (the reference's greedy decoding, ``--parallel 3``). New: the default
decomposer (prompt-lookup drafts, stop rules; ``fscore_lite/factscore/fact_decoding.py``). Both sides
run the whole ``score`` path (``score_file`` with a scorer of their own: the default bundle's LLM,
the installed verifier, a store of wiki-factscore-dev pages, no call cache) on the same annotated
InstructGPT bios whose topics the store holds, in one process, alternately bio by bio (old first on
even bios, new first on odd ones), so that load on the shared machine falls on both sides alike.
A side's time is its model loading plus its bios; the ratio of bios per hour is the result. Peak RSS
is the process's, with both sides loaded (each holds its own copy of the repacked LLM weights), and
the RSS each side's loading added is reported beside it.
Without an installed trained verifier (``auto`` would fall back to the LLM judge, which is not the
default bundle) the section times the atomic-fact stage of the same bios instead, and says so.
"""
from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from .atomic_facts import ALIASES, annotated_bios
from .common import current_rss_mib, fmt_s, log, md_table, peak_rss_mib, pinned, wiki_pages, wiki_store

E2E_BIOS = 3
SIDES = {"old": "reference", "new": "default"}


def _degenerate(facts: list[str]) -> dict:
    """Facts that repeat an earlier one of the bio, and facts of more than 15 words."""
    seen, dup = set(), 0
    for f in facts:
        key = " ".join(f.lower().rstrip(".").split())
        dup += key in seen
        seen.add(key)
    return {"duplicates": dup, "over_15_words": sum(len(f.split()) > 15 for f in facts)}


def run(args) -> tuple[str, dict]:
    from fscore_lite.factscore.pipeline import FactScorer, ScoreOptions, score_file
    from fscore_lite.settings import Settings

    n_pages = 5 if args.quick else 20
    pages = wiki_pages(args.data, n_pages)
    bios = annotated_bios(args.data, {p["topic"] for p in pages})[: (1 if args.quick else E2E_BIOS)]
    threads = max(args.threads)
    store = wiki_store(args.data, n_pages, threads)
    llm = ALIASES.get(args.e2e_llm, args.e2e_llm)
    res = {side: {"seconds": 0.0, "facts": [], "scores": []} for side in SIDES}
    with tempfile.TemporaryDirectory() as tmp, pinned(threads):
        settings = Settings(threads=threads, store=store, llm=llm, use_cache=False)
        scorers = {}
        for side, decomposer in SIDES.items():
            rss = current_rss_mib()
            t = time.perf_counter()
            scorers[side] = FactScorer(settings, ScoreOptions(progress=False, decomposer=decomposer))
            scorers[side].llm  # noqa: B018 - loaded now, timed as the side's loading
            res[side]["seconds"] += time.perf_counter() - t
            res[side]["load_s"] = time.perf_counter() - t
            res[side]["rss_added_mib"] = current_rss_mib() - rss
        end_to_end = all(sc.verifier.kind == "trained" for sc in scorers.values())
        what = ("end to end (`score_file`: atomic facts, retrieval, the trained verifier)" if end_to_end else
                "the atomic-fact stage only (**no trained verifier installed**, so not end to end)")
        for i, bio in enumerate(bios):
            inp = Path(tmp) / f"bio{i}.jsonl"
            inp.write_text(json.dumps({"topic": bio["topic"], "output": bio["output"]}) + "\n", encoding="utf-8")
            for side in (list(SIDES) if i % 2 == 0 else list(SIDES)[::-1]):
                sc = scorers[side]
                t = time.perf_counter()
                if end_to_end:
                    out = Path(tmp) / f"bio{i}.{side}.jsonl"
                    score_file(inp, out, settings, scorer=sc)
                    rec = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
                    sentences = rec.get("sentences") or []
                    res[side]["scores"].append(rec.get("score"))
                else:
                    sentences = [{"facts": s.facts} for s in sc.generator.run(bio["output"])]
                res[side]["seconds"] += time.perf_counter() - t
                res[side]["facts"].append([f for s in sentences for f in s["facts"]])
            log(f"decomposer bio {i + 1}/{len(bios)}: old {res['old']['seconds']:.0f}s, new {res['new']['seconds']:.0f}s")
    peak = peak_rss_mib()
    rows = []
    for side, r in res.items():
        facts = [f for bio in r["facts"] for f in bio]
        r.update(bios=len(bios), bios_per_hour=3600 * len(bios) / r["seconds"], n_facts=len(facts),
                 **_degenerate(facts))
        rows.append([f"{side}: `--decomposer {SIDES[side]}`", len(bios), r["n_facts"], fmt_s(r["seconds"]),
                     f"{r['bios_per_hour']:.1f}", r["duplicates"], r["over_15_words"], f"{r['rss_added_mib']:.0f}"])
    ratio = res["new"]["bios_per_hour"] / res["old"]["bios_per_hour"]
    out = {"sides": res, "ratio": ratio, "peak_rss_mib": peak, "threads": threads, "llm": llm,
           "end_to_end": end_to_end}
    log(f"decomposer: new/old bios per hour = {ratio:.2f}x, peak RSS {peak:.0f} MiB")
    md = (f"Timed: {what}; LLM `{llm}`, "
          f"{len(bios)} annotated InstructGPT bios whose topics are in a store of {n_pages} wiki-factscore-dev pages, "
          f"{threads} threads, no call cache; old and new in one process, alternately bio by bio. "
          f"**New / old: {ratio:.2f}× bios per hour**; peak RSS of the process (both sides loaded) "
          f"{peak:.0f} MiB.\n\n"
          + md_table(["side", "bios", "facts", "time (incl. loading)", "bios/hour", "repeated facts",
                      "facts > 15 words", "RSS added at load (MiB)"], rows) + "\n")
    return md, out
