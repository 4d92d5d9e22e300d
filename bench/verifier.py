"""Bench section "verifier": the trained verifier vs the LLM judge (parity prompts), 1 thread;
and ``llm+trained`` (the 1.5B model's margin on its short prompt, stacked) when it is fitted.

Same topic, same facts (the model-atomic-facts of one annotated ChatGPT bio), same retrieved
evidence, no call cache. Each side runs in its own subprocess so that its peak RSS is its own;
the ratio is of facts per second measured in this one run.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from .factscore import MODELS, TOPIC, _bio, ensure_bench_store


def worker(side: str, store: Path, data: Path, n_facts: int) -> dict:
    from fscore_lite.backends.embed import SentenceEmbedder
    from fscore_lite.cache import CallCache
    from fscore_lite.factscore.retrieve import Retriever
    from fscore_lite.manifest import Bundle
    from fscore_lite.settings import Settings
    from fscore_lite.store import open_store

    settings = Settings(threads=1, llm=MODELS[1], store=store)
    bundle = Bundle(settings.models_dir)
    st = open_store(store)
    retriever = Retriever(st, SentenceEmbedder.from_bundle(bundle, st.embed_model, 1), 5, False, CallCache(None))
    facts = _bio(data)[1][:n_facts]
    evidence = [retriever.retrieve(TOPIC, f) for f in facts]
    t_load = time.monotonic()
    if side == "trained":
        from fscore_lite.factscore.calibration import GIVEN
        from fscore_lite.factscore.trained import TrainedVerifier

        judge = TrainedVerifier.from_bundle(bundle, st, threads=1, cache=CallCache(None))
        name = judge.name
        run = lambda: judge.verify(TOPIC, facts, evidence, judge.calibrations[GIVEN])  # noqa: E731
    elif side == "llm+trained":
        from fscore_lite.backends.llm import load_llm
        from fscore_lite.factscore.stacked import LlmTrainedVerifier
        from fscore_lite.factscore.trained import TrainedVerifier

        trained = TrainedVerifier.from_bundle(bundle, st, threads=1, cache=CallCache(None))
        judge = LlmTrainedVerifier.from_bundle(bundle, trained, load_llm(settings, bundle, CallCache(None)))
        name = f"{trained.name} + {judge.llm.name}"
        run = lambda: judge.verify(TOPIC, facts, evidence)  # noqa: E731
    else:
        from fscore_lite.backends.llm import load_llm
        from fscore_lite.factscore.verify import Verifier

        llm = load_llm(settings, bundle, CallCache(None))
        name = llm.name
        judge = Verifier(llm, "parity")
        run = lambda: judge.verify(TOPIC, facts, evidence)  # noqa: E731
    load_s = time.monotonic() - t_load
    t = time.monotonic()
    verdicts = run()
    dt = time.monotonic() - t
    return {"side": side, "model": name, "facts": len(facts), "seconds": dt, "facts_per_s": len(facts) / dt,
            "load_s": load_s, "supported": sum(bool(v.is_supported) for v in verdicts),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _stack_fitted(settings) -> bool:
    from fscore_lite.manifest import Bundle

    bundle = Bundle(settings.models_dir)
    entry = bundle.first_for_role("verifier")
    llm = MODELS[1]
    return (entry is not None and llm in bundle.entries
            and bundle.get(llm).sha256 in entry.extra.get("llm_combiners", {}))


def run(args) -> tuple[str, dict]:
    from fscore_lite.settings import Settings

    data = Path(getattr(args, "data", "../shared/data"))
    quick = bool(getattr(args, "quick", False))
    store = ensure_bench_store(data, Settings().home)
    n_all = len(_bio(data)[1])
    sizes = {"trained": n_all, "llm": 2 if quick else 4, "llm+trained": 2 if quick else 4}
    rows = []
    for side in ("trained", "llm", *(("llm+trained",) if _stack_fitted(Settings()) else ())):
        cmd = [sys.executable, "-m", "bench.verifier", "--worker", side, "--store", str(store), "--data", str(data),
               "--n-facts", str(sizes[side])]
        print(f"[verifier] {side}", file=sys.stderr, flush=True)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"bench worker failed: {proc.stderr[-2000:]}")
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    ratio = rows[0]["facts_per_s"] / rows[1]["facts_per_s"]
    md = [f"1 thread, topic '{TOPIC}', the model-atomic-facts of its ChatGPT bio, same evidence (k = 5), no cache:",
          "", "| verifier | model | facts | seconds | facts/s | load s | peak RSS MB |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['side']} | {r['model']} | {r['facts']} | {r['seconds']:.1f} | {r['facts_per_s']:.3f} | "
                  f"{r['load_s']:.1f} | {r['peak_rss_mb']:.0f} |")
    md += ["", f"Trained verifier / LLM judge (parity): **{ratio:,.0f}×** facts per second."]
    if len(rows) > 2:
        md.append(f"llm+trained (the LLM's margin on its short window prompt, stacked): "
                  f"{rows[2]['facts_per_s'] / rows[1]['facts_per_s']:.1f}× the LLM judge's facts per second.")
    else:
        md.append("llm+trained: not measured (no combiner fitted for this LLM: `fscore-lite models train llm-combiner`).")
    return "\n".join(md), {"rows": rows, "ratio": ratio}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", choices=("trained", "llm", "llm+trained"), required=True)
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--n-facts", type=int, required=True)
    a = ap.parse_args()
    print(json.dumps(worker(a.worker, a.store, a.data, a.n_facts)))


if __name__ == "__main__":
    main()
