"""Scores (SPEC FActScore §8): per-response support, length penalty, aggregates."""
from __future__ import annotations

import math

from ..records import RESPONSE_STATUSES
from ..stats import mean, score_ci95

GAMMA = 10


def length_penalty(n_facts: int, gamma: float = GAMMA) -> float:
    """SPEC §8: 1 if n > gamma, else exp(1 - gamma / n)."""
    if not gamma:
        return 1.0
    return 1.0 if n_facts > gamma else math.exp(1 - gamma / n_facts)


def response_score(supported: list[bool], gamma: float = GAMMA, share: float | None = None) -> tuple[float, float]:
    """(penalised score, raw share) for one responding item: the share is the mean of is_supported
    (the reference), or ``share`` when the verifier estimates it (PACC, ``estimated_share``)."""
    raw = sum(1.0 for s in supported if s) / len(supported) if share is None else share
    return raw * length_penalty(len(supported), gamma), raw


def aggregate(items: list[dict], gamma: float = GAMMA) -> dict:
    """FActScore's output fields over per-item results.

    An item responds when it got at least one fact (status "ok"). ``respond_ratio`` is over
    every item that was scored or abstained; items with input problems or unknown topics are
    counted apart and excluded.
    """
    considered = [it for it in items if it["status"] in RESPONSE_STATUSES]
    responding = [it for it in considered if it["status"] == "ok"]
    scores, init_scores, n_facts, counted = [], [], [], []
    for it in responding:
        supported = [d["is_supported"] for d in it["decisions"]]
        s, raw = response_score(supported, gamma, it.get("estimated_share"))
        scores.append(s)
        init_scores.append(raw)
        n_facts.append(len(it["decisions"]))
        counted.append(response_score(supported, gamma)[0])
    adjusted = any(it.get("estimated_share") is not None for it in responding)
    return {
        "score": mean(scores),
        # with an estimated share (PACC): the score that counting the decisions gives, for comparison
        **({"score_by_decisions": mean(counted)} if adjusted else {}),
        "score_ci95": score_ci95(scores),
        "init_score": mean(init_scores),
        "respond_ratio": (len(responding) / len(considered)) if considered else None,
        "num_facts_per_response": mean(n_facts),
        "num_items": len(items),
        "num_responding": len(responding),
        "gamma": gamma,
    }
