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


def pacc_unclipped(mean_probability: float, p_supported: float, p_not_supported: float) -> float:
    """PACC's share before the clip: ``(mean p − p̄_NS) / (p̄_S − p̄_NS)``. Only its mean over many
    responses estimates a share (it may leave [0, 1] for one response)."""
    return (mean_probability - p_not_supported) / (p_supported - p_not_supported)


def response_shares(combiner, probabilities: list[float]) -> dict:
    """A response's two shares when the verifier's combiner has its PACC means (else {}):
    ``readable_share``, the mean probability of its facts (its own score: rises with every
    probability, above 0 whenever a fact is decided supported), and ``pacc_share_unclipped``,
    what the run's PACC-adjusted aggregate averages."""
    if combiner is None or not combiner.adjusts or not probabilities:
        return {}
    mean_p = sum(probabilities) / len(probabilities)
    return {"readable_share": round(mean_p, 6),
            "pacc_share_unclipped": round(pacc_unclipped(mean_p, combiner.p_supported, combiner.p_not_supported), 6)}


def _clip(x: float | None) -> float | None:
    return None if x is None else min(1.0, max(0.0, x))


def aggregate(items: list[dict], gamma: float = GAMMA) -> dict:
    """FActScore's output fields over per-item results.

    An item responds when it got at least one fact (status "ok"). ``respond_ratio`` is over
    every item that was scored or abstained; items with input problems or unknown topics are
    counted apart and excluded.
    """
    considered = [it for it in items if it["status"] in RESPONSE_STATUSES]
    responding = [it for it in considered if it["status"] == "ok"]
    scores, init_scores, n_facts, counted, pacc, pacc_init = [], [], [], [], [], []
    for it in responding:
        supported = [d["is_supported"] for d in it["decisions"]]
        # readable_share: the response's mean probability; estimated_share: outputs of earlier versions
        s, raw = response_score(supported, gamma, it.get("readable_share", it.get("estimated_share")))
        scores.append(s)
        init_scores.append(raw)
        n_facts.append(len(it["decisions"]))
        counted.append(response_score(supported, gamma)[0])
        if it.get("pacc_share_unclipped") is not None:
            pacc_init.append(float(it["pacc_share_unclipped"]))
            pacc.append(pacc_init[-1] * length_penalty(len(supported), gamma))
    adjusted = any(it.get("readable_share", it.get("estimated_share")) is not None for it in responding)
    ci = score_ci95(pacc) if pacc and len(pacc) == len(responding) else None
    return {
        "score": mean(scores),
        # with an estimated share: the score that counting the decisions gives, for comparison
        **({"score_by_decisions": mean(counted)} if adjusted else {}),
        # PACC applied where it holds, to the run's mean (the clip once, on the aggregate), with its interval
        **({"score_adjusted": _clip(mean(pacc)), "score_adjusted_ci95": [_clip(ci[0]), _clip(ci[1])] if ci else None,
            "init_score_adjusted": _clip(mean(pacc_init))} if pacc and len(pacc) == len(responding) else {}),
        "score_ci95": score_ci95(scores),
        "init_score": mean(init_scores),
        "respond_ratio": (len(responding) / len(considered)) if considered else None,
        "num_facts_per_response": mean(n_facts),
        "num_items": len(items),
        "num_responding": len(responding),
        "gamma": gamma,
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


PAPER_CALIBRATION = {"threshold": "the paper's model-atomic-facts (InstructGPT) of the training bios",
                     "share_means": "the human atomic facts of the training topics (out of fold)"}
SHARE_LINE = ("the share line (share = {a:+.4f} + {b:.4f} × PACC share) fitted between the {n} subjects' means "
              "of the training bios' human FActScore and their out-of-fold PACC share")
PAPER_LINE = "the human atomic facts of the training topics (out of fold), mapped by " + SHARE_LINE.replace(
    "PACC share)", "PACC share of the paper's facts)", 1)


def paper_calibration(verifier_extra: dict) -> dict:
    """What the paper calibration of a verifier entry was fitted on (recipe 6 on: the human facts' share
    means mapped by the paper facts' share line, recorded as ``training.share_means``)."""
    means = verifier_extra.get("training", {}).get("share_means") or {}
    if "paper_line" not in means:
        return PAPER_CALIBRATION
    a, b = means["paper_line"]
    return {**PAPER_CALIBRATION, "share_means": PAPER_LINE.format(a=a, b=b, n=means.get("n_subjects", "?"))}


OWN_CALIBRATION = ("the facts the decomposer made for the training bios (threshold: share-matching on their "
                   "out-of-fold probabilities; share means: {})")
OWN_SHARE_MEANS = {"paper pair shifted": "the paper calibration's share means moved by one offset (shift), fitted so "
                                         "that the bios' mean share estimate is their mean human FActScore",
                   "share line": "the paper calibration's share means mapped by " + SHARE_LINE,
                   "share level": "the paper calibration's share means moved by one level on the PACC scale (share = "
                                  "{a:+.4f} + PACC share), fitted so that the training bios' mean share estimate is "
                                  "their mean human FActScore"}
OLDER_SHARE_MEANS = "least squares of the bios' human FActScore on their mean probability (a recipe-4 record)"


def _share_means_text(own: dict) -> str:
    text = OWN_SHARE_MEANS.get(own.get("method"), OLDER_SHARE_MEANS)
    if own.get("method") in ("share line", "share level"):
        text = text.format(a=own["line"][0], b=own["line"][1], n=own.get("n_subjects", "?"))
    return text


def calibration_note(verifier_extra: dict | None, facts_generated: int, decomposer: str,
                     run_fact_settings: dict | None = None, own_usable: bool = True) -> dict | None:
    """For the summary: which facts the trained verifier's threshold and share estimate were fitted
    on (recorded as ``calibrated_for_facts`` in its manifest entry; older entries: the paper's facts),
    which facts this run scored, and a warning when they differ (never applied silently).

    With an ``own_facts_calibration`` in the entry: which calibration was applied — the own-facts one
    to the facts this run generated when ``run_fact_settings`` (the LLM's sha256 and the atomic-fact
    settings) are the ones it was fitted for (and ``own_usable``: the plain trained verifier), the
    paper one to facts given in the input and to generated facts of other settings."""
    if verifier_extra is None:
        return None
    own = verifier_extra.get("own_facts_calibration")
    if own is not None:
        return _own_note(own, facts_generated, decomposer, run_fact_settings, own_usable, paper_calibration(verifier_extra))
    fitted = verifier_extra.get("calibrated_for_facts") or paper_calibration(verifier_extra)
    run = f"generated by this run (decomposer {decomposer})" if facts_generated else "given in the input"
    matches = bool(facts_generated) and fitted.get("decomposer") == decomposer
    note = {"fitted_on": fitted, "run_facts": run, "fitted_for_these_facts": matches}
    if facts_generated and not matches:
        note["warning"] = ("the verifier's threshold and share estimate were fitted on other facts than the ones "
                           "this run generated; its scores carry that calibration's error (meta-eval factscore-er "
                           "--facts generated measures it)")
    return note


def _own_note(own: dict, facts_generated: int, decomposer: str, run: dict | None, usable: bool, paper: dict) -> dict:
    fitted_for = own["calibrated_for_facts"]
    matches = bool(facts_generated) and usable and run is not None and same_facts(fitted_for, run)
    note = {"fitted_on": paper,
            "own_facts": {"fitted_on": OWN_CALIBRATION.format(_share_means_text(own)),
                          "fitted_for": fitted_for,
                          **{k: own[k] for k in ("threshold", "p_supported", "p_not_supported", "line", "shift", "n_bios")
                             if k in own},
                          **({"note": own["note"]} if own.get("note") else {})},
            "run_facts": f"generated by this run (decomposer {decomposer})" if facts_generated else "given in the input",
            "fitted_for_these_facts": matches,
            "applied": ("own facts: the own-facts threshold and share means for the responses whose facts this run "
                        "generated; the paper calibration for responses with facts given in the input" if matches
                        else "paper facts: the paper calibration")}
    if facts_generated and run is not None:
        note["run_fact_settings"] = run
    if facts_generated and not matches:
        differs = [k for k in FACT_KEYS if run is None or fitted_for.get(k) != run.get(k)]
        note["warning"] = ("the own-facts calibration was fitted for other facts than the ones this run generated "
                           f"({', '.join(differs) if usable else 'the llm+trained stack has its own combiner'} "
                           "differ): the paper calibration was applied, and its scores carry that calibration's error "
                           "(meta-eval factscore-er --facts generated measures it)")
    return note
