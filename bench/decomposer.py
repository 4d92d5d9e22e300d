"""Section ``decomposer``: bios per hour end to end, today's default decomposer against each other one.

Sides: ``--decomposer default`` (the baseline: the local LLM with prompt-lookup drafts, stop rules and
the clean-up filters) and every other decomposer of :data:`SIDES` (``parse``: no LLM, facts from
spaCy's dependency parse; ``tuned``: the fine-tuned 135M decomposer, when installed — it was trained on
these development topics' sentences, so its proxy here is in-sample: its held-out proxy is in its
manifest entry). Every side runs the whole ``score`` path (``score_file`` with a scorer of
its own: the default bundle's LLM where the decomposer uses one, the installed verifier, a store of
wiki-factscore-dev pages, no call cache) on the same annotated InstructGPT bios whose topics the
store holds, in one process, in a rotating order bio by bio, so that load on the shared machine falls
on every side alike. A side's time is its loading (its decomposer's model) plus its bios; bios per
hour relative to the default is the result. Beside it: facts per response, the decomposer proxy on the
same bios (each bio's facts against its human atomic facts, token-overlap entailment as
``meta-eval decomposer``), the RSS each side's loading added, the process's peak RSS and the load
average before and after. Without an installed trained verifier (``auto`` would fall back to the LLM
judge, which is not the default bundle) the section times the atomic-fact stage only, and says so.
"""
from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from .atomic_facts import ALIASES, annotated_bios
from .common import current_rss_mib, fmt_s, log, md_table, peak_rss_mib, pinned, wiki_pages, wiki_store

E2E_BIOS = 4
SIDES = ("default", "parse", "tuned")  # the first is the baseline


def _sides(settings) -> tuple[tuple[str, ...], list[str]]:
    """The sides that can run here, and a note for each left out (a decomposer model not installed)."""
    from fscore_lite.errors import FscoreError
    from fscore_lite.factscore.decomposers import Models, fact_source

    sides, notes = [], []
    for side in SIDES:
        if side == "tuned":
            try:
                fact_source(side, lambda: None, Models.of(settings))
            except FscoreError as e:  # its model is not installed: reported in the section
                notes.append(f"`--decomposer {side}` not run: {e}")
                continue
        sides.append(side)
    return tuple(sides), notes


def _degenerate(facts: list[str]) -> dict:
    """Facts that repeat an earlier one of the bio, and facts of more than 15 words."""
    seen, dup = set(), 0
    for f in facts:
        key = " ".join(f.lower().rstrip(".").split())
        dup += key in seen
        seen.add(key)
    return {"duplicates": dup, "over_15_words": sum(len(f.split()) > 15 for f in facts)}


def _human_facts(bio: dict) -> list[str]:
    return [f["text"] for a in bio["annotations"] for f in (a.get("human-atomic-facts") or [])]


def run(args) -> tuple[str, dict]:
    import os

    from fscore_lite.factscore.pipeline import FactScorer, ScoreOptions, score_file
    from fscore_lite.metaeval.decomposer_proxy import compare
    from fscore_lite.settings import Settings

    n_pages = 5 if args.quick else 20
    pages = wiki_pages(args.data, n_pages)
    bios = annotated_bios(args.data, {p["topic"] for p in pages})[: (1 if args.quick else E2E_BIOS)]
    threads = max(args.threads)
    store = wiki_store(args.data, n_pages, threads)
    llm = ALIASES.get(args.e2e_llm, args.e2e_llm)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp, pinned(threads):
        settings = Settings(threads=threads, store=store, llm=llm, use_cache=False)
        sides, notes = _sides(settings)
        res = {side: {"seconds": 0.0, "facts": [], "scores": []} for side in sides}
        scorers = {}
        for side in sides:
            rss = current_rss_mib()
            t = time.perf_counter()
            scorers[side] = FactScorer(settings, ScoreOptions(progress=False, decomposer=side))
            scorers[side].generator  # noqa: B018 - its model (LLM or parser) loaded now, timed as the side's loading
            res[side]["seconds"] += time.perf_counter() - t
            res[side]["load_s"] = time.perf_counter() - t
            res[side]["rss_added_mib"] = current_rss_mib() - rss
        end_to_end = all(sc.verifier.kind == "trained" for sc in scorers.values())
        what = ("end to end (`score_file`: atomic facts, retrieval, the trained verifier)" if end_to_end else
                "the atomic-fact stage only (**no trained verifier installed**, so not end to end)")
        for i, bio in enumerate(bios):
            inp = Path(tmp) / f"bio{i}.jsonl"
            inp.write_text(json.dumps({"topic": bio["topic"], "output": bio["output"]}) + "\n", encoding="utf-8")
            for side in sides[i % len(sides):] + sides[:i % len(sides)]:
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
            log(f"decomposer bio {i + 1}/{len(bios)}: " + ", ".join(f"{s} {res[s]['seconds']:.0f}s" for s in sides))
    load_after = os.getloadavg()
    peak = peak_rss_mib()
    human = [_human_facts(b) for b in bios]
    rows = []
    base = sides[0]
    for side, r in res.items():
        facts = [f for bio in r["facts"] for f in bio]
        proxy = compare(r["facts"], human)
        r.update(bios=len(bios), bios_per_hour=3600 * len(bios) / r["seconds"], n_facts=len(facts),
                 facts_per_response=len(facts) / len(bios), proxy=proxy, **_degenerate(facts))
    for side, r in res.items():
        r["ratio"] = r["bios_per_hour"] / res[base]["bios_per_hour"]
        rows.append([f"`--decomposer {side}`", len(bios), f"{r['facts_per_response']:.1f}", fmt_s(r["seconds"]),
                     f"{r['load_s']:.1f} s", f"{r['bios_per_hour']:.1f}", f"{r['ratio']:.2f}×",
                     f"{100 * r['proxy']['coverage']:.1f}%", f"{100 * r['proxy']['precision']:.1f}%",
                     r["duplicates"], r["over_15_words"], f"{r['rss_added_mib']:.0f}"])
    human_per = sum(map(len, human)) / len(bios)
    out = {"sides": res, "baseline": base, "peak_rss_mib": peak, "threads": threads, "llm": llm,
           "end_to_end": end_to_end, "load_average": {"before": load_before, "after": load_after},
           "human_facts_per_response": human_per}
    log("decomposer: bios per hour vs default = " + ", ".join(f"{s} {res[s]['ratio']:.2f}x" for s in sides))
    md = (f"Timed: {what}; LLM `{llm}` (for the decomposers that use one), "
          f"{len(bios)} annotated InstructGPT bios whose topics are in a store of {n_pages} wiki-factscore-dev pages, "
          f"{threads} thread{'s' if threads > 1 else ''}, no call cache; every side in one process, in a rotating order bio by bio. "
          f"Load average (1 min) {load_before[0]:.2f} before, {load_after[0]:.2f} after; peak RSS of the process "
          f"(every side loaded) {peak:.0f} MiB. Proxy: each bio's facts against its human atomic facts "
          f"({human_per:.1f} a response), token-overlap entailment as `meta-eval decomposer`.\n\n"
          + md_table(["side", "bios", "facts/response", "time (incl. loading)", "loading", "bios/hour",
                      "vs default", "proxy coverage", "proxy precision", "repeated facts", "facts > 15 words",
                      "RSS added at load (MiB)"], rows) + "\n"
          + "".join(f"\n{n}\n" for n in notes))
    out["not_run"] = notes
    return md, out
