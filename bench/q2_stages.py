"""Throughput of Q² per stage, for each backend that is installed (used by ``make bench``).

Each backend scores the same rows with a fresh in-memory call cache, so every model call
is computed; the result gives seconds and responses per second for each stage
(candidates, qg, qa_response, qa_knowledge, nli, fallback, e2e_nli, overlap) and for the whole run.
"""
from __future__ import annotations

import time

from fscore_lite.cache import CallCache
from fscore_lite.q2.score import STAGES


def bench_q2(settings, rows, *, backends: list[str] | None = None, precision: str = "int8") -> dict:
    """Benchmark Q² on ``rows`` (dicts with ``response`` and ``knowledge``; Records work too).

    ``backends``: any of "onnx", "llm" (default: every backend that can serve all roles).
    Returns ``{"n_responses", "threads", "backends": {name: {"roles", "load_s", "total_s",
    "responses_per_s", "stages": {stage: {"seconds", "responses_per_s"}}}}}``.
    """
    from fscore_lite.q2.pipeline import Q2Scorer
    from fscore_lite.q2.roles import available_backends

    data = [getattr(r, "data", r) for r in rows]
    todo = backends if backends is not None else available_backends(settings)
    out: dict = {"n_responses": len(data), "threads": settings.threads, "precision": precision, "backends": {}}
    for backend in todo:
        t0 = time.perf_counter()
        scorer = Q2Scorer(settings, backend=backend, precision=precision, cache=CallCache(None))
        load_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        for d in data:
            scorer.record(d)
        total = time.perf_counter() - t1
        n = scorer.scored
        stages = {s: {"seconds": round(scorer.timer.seconds[s], 4),
                      # a stage that did no work (e.g. no response needed the fallback) has no rate
                      "responses_per_s": round(n / scorer.timer.seconds[s], 3) if scorer.timer.seconds[s] >= 1e-3
                      else None}
                  for s in STAGES}
        out["backends"][backend] = {
            "roles": {r: f"{d['backend']}:{d['name']}" for r, d in scorer.roles.describe().items()},
            "load_s": round(load_s, 3), "total_s": round(total, 3),
            "responses_per_s": round(n / total, 4) if total > 0 else None, "stages": stages,
        }
    return out
