"""Scores (SPEC FActScore §8): per-response support, length penalty, aggregates."""
from __future__ import annotations

import math

from ..records import RESPONSE_STATUSES
from ..stats import mean, score_ci95
from ..stats.bootstrap import N_BOOT, SEED

GAMMA = 10


def length_penalty(n_facts: int, gamma: float = GAMMA) -> float:
    """SPEC §8: 1 if n > gamma, else exp(1 - gamma / n)."""
    if not gamma:
        return 1.0
    return 1.0 if n_facts > gamma else math.exp(1 - gamma / n_facts)


def response_score(supported: list[bool], gamma: float = GAMMA, share: float | None = None) -> tuple[float, float]:
    """(penalised score, raw share) for one responding item: the share is the mean of is_supported
    (the reference), or ``share`` when the verifier estimates it (:func:`apply_run_share`)."""
    raw = sum(1.0 for s in supported if s) / len(supported) if share is None else share
    return raw * length_penalty(len(supported), gamma), raw


def _estimated(it: dict) -> bool:
    return it.get("status") == "ok" and it.get("calibration") is not None


def run_responses(items: list[dict], priors: dict[str, float]):
    """The responding items whose facts carry a calibration, as the run share sees them."""
    from .calibration import Response

    return [(it, Response(tuple(float(d["verifier_probability"]) for d in it["decisions"]), priors[it["calibration"]]))
            for it in items if _estimated(it)]


def apply_run_share(items: list[dict], priors: dict[str, float], gamma: float = GAMMA) -> float | None:
    """Estimate the run's share of supported facts from every item whose facts carry a calibration
    (``priors``: calibration name → its prior) and rewrite those items in place: each fact's
    ``probability`` under its response's share in the run (:func:`~.calibration.fact_posteriors`) and its
    decision (> 0.5), the response's ``init_score`` (the mean probability of its facts) and ``score``
    (with the length penalty). Returns the run share (None: no such item). A function of all the run's
    items, in any order, and of nothing else."""
    from .calibration import fact_posteriors, run_share

    pairs = run_responses(items, priors)
    if not pairs:
        return None
    share = run_share([r for _, r in pairs])
    for it, resp in pairs:
        post = fact_posteriors(resp, share)
        for d, q in zip(it["decisions"], post):
            d["probability"] = round(float(q), 6)
            d["is_supported"] = bool(q > 0.5)
        init = mean([float(p) for p in post])
        it["init_score"] = round(init, 6)
        it["score"] = round(init * length_penalty(len(post), gamma), 6)
    return share


def aggregate(items: list[dict], gamma: float = GAMMA, priors: dict[str, float] | None = None) -> dict:
    """FActScore's output fields over per-item results (after :func:`apply_run_share`, when the verifier
    estimates shares: ``priors`` then gives the interval of the run's score the run share's way).

    An item responds when it got at least one fact (status "ok"). ``respond_ratio`` is over
    every item that was scored or abstained; items with input problems or unknown topics are
    counted apart and excluded. Diagnostics — the share of facts decided supported and the mean of
    the calibrations' own probabilities — are not the FActScore and are named apart.
    """
    considered = [it for it in items if it["status"] in RESPONSE_STATUSES]
    responding = [it for it in considered if it["status"] == "ok"]
    scores = [float(it["score"]) for it in responding]
    init_scores = [float(it["init_score"]) for it in responding]
    n_facts = [len(it["decisions"]) for it in responding]
    ci = score_ci95(scores)
    estimated = bool(responding) and priors is not None and all(_estimated(it) for it in responding)
    diagnostics = {}
    if estimated:
        from .calibration import score_interval

        run = [r for _, r in run_responses(responding, priors)]
        ci = score_interval(run, [length_penalty(n, gamma) for n in n_facts], resamples=N_BOOT, seed=SEED)
        ci = None if ci is None else [round(ci[0], 6), round(ci[1], 6)]
        diagnostics = {
            "share_decided_supported": mean([mean([float(d["is_supported"]) for d in it["decisions"]])
                                             for it in responding]),
            "mean_verifier_probability": mean([mean(list(r.probs)) for r in run])}
    return {
        "score": mean(scores),
        "score_ci95": list(ci) if ci else None,
        "init_score": mean(init_scores),
        "respond_ratio": (len(responding) / len(considered)) if considered else None,
        "num_facts_per_response": mean(n_facts),
        "num_items": len(items),
        "num_responding": len(responding),
        "gamma": gamma,
        **({"diagnostics": diagnostics} if diagnostics else {}),
    }


FACT_KEYS = ("llm_sha256", "atomic_facts")  # the settings that change the facts a run generates


def same_facts(a: dict, b: dict) -> bool:
    """Do two fact settings make the same facts (the LLM's sha256 and every atomic-fact setting)?"""
    return all(a.get(k) == b.get(k) for k in FACT_KEYS)


def fact_settings(llm_name: str, llm_sha256: str, atomic_facts: dict, threads: int | None = None) -> dict:
    """What makes generated facts: the LLM, its sha256, the atomic-fact settings (and the thread count
    they were made at, where it is recorded)."""
    return {"llm": llm_name, "llm_sha256": llm_sha256, "atomic_facts": atomic_facts,
            **({"threads": int(threads)} if threads is not None else {})}


