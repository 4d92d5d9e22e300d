"""Bench section "factscore": speed of each FActScore stage per model and thread count,
shared-context vs parity verification, and the estimator's error rate on annotated topics.

Each (model, threads) configuration runs in its own subprocess (``python -m bench.factscore
--worker ...``) so that its peak RSS is its own. Model calls are never served from the cache
here (an in-memory cache per run), so every number is real work.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

MODELS = ("qwen2.5-coder-0.5b-instruct-q4_k_m", "qwen2.5-coder-1.5b-instruct-q4_k_m")
TOPIC = "Adil Rami"
SUBJECT_FILE = "ChatGPT.jsonl"


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def _bio(data: Path) -> tuple[list[str], list[str]]:
    """Sentences and model-atomic-facts of the annotated ChatGPT bio of TOPIC."""
    for line in (data / "factscore-labeled" / SUBJECT_FILE).read_text().splitlines():
        d = json.loads(line)
        if d["topic"] == TOPIC:
            sents = [a["text"] for a in d["annotations"]]
            facts = [f["text"] for a in d["annotations"] for f in a["model-atomic-facts"] or []]
            return sents, facts
    raise SystemExit(f"{TOPIC} not found in {SUBJECT_FILE}")


def ensure_bench_store(data: Path, home: Path) -> Path:
    """A store of the whole wiki-* text (shared with meta-eval factscore-er)."""
    from fscore_lite.build_step import ensure_store
    from fscore_lite.training.labeled import wiki_pages
    from fscore_lite.settings import Settings

    _, files = wiki_pages(data)
    return ensure_store(files, Settings(threads=2), None)


def worker(llm_name: str, threads: int, store: Path, data: Path, n_sent: int, n_facts: int, n_shared: int) -> dict:
    from fscore_lite.backends.llm import load_llm
    from fscore_lite.cache import CallCache
    from fscore_lite.factscore.pipeline import FactScorer, ScoreOptions
    from fscore_lite.factscore.verify import Verifier
    from fscore_lite.settings import Settings

    settings = Settings(threads=threads, llm=llm_name, store=store)
    llm = load_llm(settings, cache=CallCache(None))
    scorer = FactScorer(settings, ScoreOptions(progress=False), cache=llm.cache, llm=llm)
    sents, facts = _bio(data)
    out: dict = {"llm": llm_name, "threads": threads}

    t = time.monotonic()
    generated = sum(len(scorer.generator.facts_for_sentence(s)) for s in sents[:n_sent])
    dt = time.monotonic() - t
    out["atomic"] = {"sentences": n_sent, "facts": generated, "seconds": dt, "facts_per_s": generated / dt}

    lat = []
    for f in facts:
        t = time.monotonic()
        scorer.retriever.rank(TOPIC, TOPIC + " " + f)
        lat.append(1000 * (time.monotonic() - t))
    out["retrieval_ms"] = {"n": len(lat), "p50": _pct(lat, 0.5), "p95": _pct(lat, 0.95)}

    evidence = [scorer.retriever.retrieve(TOPIC, f) for f in facts]
    sub = slice(0, n_facts)
    t = time.monotonic()
    parity = Verifier(llm, "parity").verify(TOPIC, facts[sub], evidence[sub])
    dt = time.monotonic() - t
    out["verify_parity"] = {"facts": n_facts, "seconds": dt, "facts_per_s": n_facts / dt}

    if n_shared:
        sub = slice(0, n_shared)
        ev0 = llm.stats.tokens_evaluated
        t = time.monotonic()
        par = Verifier(llm, "parity").verify(TOPIC, facts[sub], evidence[sub])
        t_par = time.monotonic() - t
        tok_par = llm.stats.tokens_evaluated - ev0
        ev0 = llm.stats.tokens_evaluated
        t = time.monotonic()
        sh = Verifier(llm, "shared-context").verify(TOPIC, facts[sub], evidence[sub])
        t_sh = time.monotonic() - t
        tok_sh = llm.stats.tokens_evaluated - ev0
        same = sum(a.is_supported == b.is_supported for a, b in zip(par, sh))
        out["shared_vs_parity"] = {
            "facts": n_shared, "parity_s": t_par, "shared_s": t_sh, "speedup": t_par / t_sh,
            "parity_tokens": tok_par, "shared_tokens": tok_sh, "identical_decisions": same,
            "parity_supported": sum(v.is_supported for v in par), "shared_supported": sum(v.is_supported for v in sh),
        }
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    del parity
    return out


def _threads(args) -> list[int]:
    t = getattr(args, "threads", None) or "1,2"
    return [int(x) for x in (t.split(",") if isinstance(t, str) else t)]


def run(args) -> tuple[str, dict]:
    data = Path(getattr(args, "data", "../shared/data"))
    quick = bool(getattr(args, "quick", False))
    from fscore_lite.settings import Settings

    store = ensure_bench_store(data, Settings().home)
    n_sent, n_facts, n_shared = (1, 2, 3) if quick else (2, 3, 8)
    rows = []
    for model in MODELS[:1] if quick else MODELS:
        threads = _threads(args)
        for th in threads:
            cmd = [sys.executable, "-m", "bench.factscore", "--worker", "--llm", model, "--threads", str(th),
                   "--store", str(store), "--data", str(data), "--n-sent", str(n_sent), "--n-facts", str(n_facts),
                   "--n-shared", str(n_shared if th == max(threads) else 0)]
            print(f"[factscore] {model} threads={th}", file=sys.stderr, flush=True)
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"bench worker failed: {proc.stderr[-2000:]}")
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    md = ["Per model and thread count (one 0.5B/1.5B Q4_K_M GGUF each, llama.cpp, no cache; "
          f"topic '{TOPIC}', its ChatGPT bio's sentences and model-atomic-facts; k = 5):", "",
          "| model | threads | atomic facts/s | verified facts/s (parity) | retrieval p50 / p95 ms | peak RSS MB |",
          "|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['llm']} | {r['threads']} | {r['atomic']['facts_per_s']:.2f} ({r['atomic']['facts']} facts, "
                  f"{r['atomic']['seconds']:.0f} s) | {r['verify_parity']['facts_per_s']:.3f} "
                  f"({r['verify_parity']['facts']} facts, {r['verify_parity']['seconds']:.0f} s) | "
                  f"{r['retrieval_ms']['p50']:.1f} / {r['retrieval_ms']['p95']:.1f} | {r['peak_rss_mb']:.0f} |")
    md += ["", "Shared-context vs parity verification, same facts, same evidence (context budget 2048 tokens):", "",
           "| model | threads | facts | parity s | shared s | speed-up | tokens evaluated parity / shared | identical decisions |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s = r.get("shared_vs_parity")
        if s:
            md.append(f"| {r['llm']} | {r['threads']} | {s['facts']} | {s['parity_s']:.1f} | {s['shared_s']:.1f} | "
                      f"{s['speedup']:.1f}× | {s['parity_tokens']} / {s['shared_tokens']} | "
                      f"{s['identical_decisions']}/{s['facts']} |")
    er = None
    if not quick and not getattr(args, "no_er", False):
        from fscore_lite.metaeval.factscore_er import format_report, run_er

        limit = int(getattr(args, "er_limit", 0) or 3)
        er = run_er(data, Settings(threads=max(_threads(args)), llm=MODELS[1]), mode="shared-context", limit=limit,
                    out=Path("out/bench-er"), per_fact=False, baseline=True, progress=False)
        md += ["", f"Estimated vs human FActScore on annotated bios whose topic has wiki text "
               f"(shared-context mode, {MODELS[1]}, {limit} bios per subject, no length penalty):", "", "```",
               format_report(er), "```"]
    return "\n".join(md), {"configs": rows, "er": er}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--llm")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--store")
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--n-sent", type=int, default=3)
    ap.add_argument("--n-facts", type=int, default=4)
    ap.add_argument("--n-shared", type=int, default=12)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-er", action="store_true")
    ap.add_argument("--er-limit", type=int, default=3)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(a.llm, int(a.threads), Path(a.store), Path(a.data), a.n_sent, a.n_facts, a.n_shared)))
    else:
        md, _ = run(a)
        print(md)


if __name__ == "__main__":
    main()
