"""What ``meta-eval factscore-er --facts generated`` computes from its per-bio scores, and prints.

Per subject: human, the estimates on own and on the paper's facts (the aggregate PACC: the mean of
per-bio unclipped shares, clipped once), ER, per-bio mean absolute error, facts per response,
degenerate shares and the paired own − paper difference with its interval over topics
(:func:`subject_rows`); the own-facts line refitted without each subject (:func:`subject_holdout`).
"""
from __future__ import annotations

import numpy as np

from ..factscore.fact_filters import degenerate_counts
from ..training.labeled import AnnotatedBio


def human_fact_count(bio: AnnotatedBio) -> int:
    return sum(len(s.human_facts) for s in bio.sentences or ())


def degenerate_share(fact_lists: list[list[str]]) -> tuple[float | None, dict[str, int]]:
    """The share of facts that are loops, fragments, duplicates, echoes of the prompt or keep citations,
    and the counts by kind."""
    kinds: dict[str, int] = {}
    for facts in fact_lists:
        for k, n in degenerate_counts(facts).items():
            kinds[k] = kinds.get(k, 0) + n
    total = sum(len(f) for f in fact_lists)
    return (sum(kinds.values()) / total if total else None), dict(sorted(kinds.items()))


def bio_scores(comb, probs: np.ndarray) -> dict:
    """One bio's scores from its facts' probabilities under ``comb``: readable (mean probability),
    decisions (share above the threshold), PACC unclipped (what the aggregate averages) and clipped."""
    from ..factscore.score import pacc_unclipped

    probs = np.asarray(probs, dtype=np.float64)
    mean_p = float(probs.mean())
    raw = pacc_unclipped(mean_p, comb.p_supported, comb.p_not_supported) if comb.adjusts else None
    decided = float(np.mean(probs > comb.threshold))
    return {"readable": mean_p, "decisions": decided, "pacc": raw if raw is not None else decided,
            "pacc_clipped": min(1.0, max(0.0, raw)) if raw is not None else decided}


def subject_rows(bios: list[AnnotatedBio], human: list[float], own: list[dict], paper: list[dict],
                 own_facts: list[list[str]], own_calibrated: list[dict | None] | None = None) -> list[dict]:
    """Per subject: human, estimates (own and paper facts), ER, per-bio MAE, facts per response,
    degenerate shares, the paired own − paper difference with its interval over topics."""
    from ..stats import signed_error_ci

    rows = []
    for subject in dict.fromkeys(b.subject for b in bios):
        idx = [i for i, b in enumerate(bios) if b.subject == subject and own[i] is not None]
        if not idx:
            continue
        topics = [bios[i].topic for i in idx]
        h = [human[i] for i in idx]
        row = {"subject": subject, "n_bios": len(idx),
               "n_no_own_facts": sum(1 for i, b in enumerate(bios) if b.subject == subject and own[i] is None),
               "human": 100 * float(np.mean(h))}
        kinds = [("own", own, idx), ("paper", paper, idx)]
        if own_calibrated is not None:
            kinds.append(("own_calibrated", own_calibrated, [i for i in idx if own_calibrated[i] is not None]))
        for kind, res, idx in kinds:
            if not idx:
                row[kind] = None
                continue
            topics, h = [bios[i].topic for i in idx], [human[i] for i in idx]
            raw = [res[i]["pacc"] for i in idx]
            est = 100 * min(1.0, max(0.0, float(np.mean(raw))))
            row[kind] = {"estimated": est, "error_rate": abs(est - 100 * float(np.mean(h))), "n_bios": len(idx),
                         "signed_error_ci95": signed_error_ci(raw, h, topics),
                         "per_bio_mae": 100 * float(np.mean([abs(res[i]["readable"] - hh) for i, hh in zip(idx, h)])),
                         "per_bio_mae_pacc_clipped": 100 * float(np.mean([abs(res[i]["pacc_clipped"] - hh)
                                                                          for i, hh in zip(idx, h)])),
                         "estimated_by_decisions": 100 * float(np.mean([res[i]["decisions"] for i in idx])),
                         "mean_readable": 100 * float(np.mean([res[i]["readable"] for i in idx]))}
        idx = kinds[0][2]
        topics = [bios[i].topic for i in idx]
        own_lists = [own_facts[i] for i in idx]
        paper_lists = [bios[i].model_facts() for i in idx]
        row["facts_per_response"] = {"own": float(np.mean([len(f) for f in own_lists])),
                                     "paper": float(np.mean([len(f) for f in paper_lists])),
                                     "human": float(np.mean([human_fact_count(bios[i]) for i in idx]))}
        row["degenerate_share"], row["degenerate_kinds"] = degenerate_share(own_lists)
        row["paper_degenerate_share"], _ = degenerate_share(paper_lists)
        row["own_minus_paper"] = {
            "difference": 100 * float(np.mean([own[i]["pacc"] - paper[i]["pacc"] for i in idx])),
            "ci95": signed_error_ci([own[i]["pacc"] for i in idx], [paper[i]["pacc"] for i in idx], topics)}
        cal = [i for i in idx if own_calibrated is not None and own_calibrated[i] is not None]
        if cal:
            row["own_calibrated_minus_paper"] = {
                "difference": 100 * float(np.mean([own_calibrated[i]["pacc"] - paper[i]["pacc"] for i in cal])),
                "ci95": signed_error_ci([own_calibrated[i]["pacc"] for i in cal], [paper[i]["pacc"] for i in cal],
                                        [bios[i].topic for i in cal])}
        rows.append(row)
    return rows


def _ci(ci) -> str:
    return f"[{ci[0]:+.1f}, {ci[1]:+.1f}]" if ci else "[-]"


def format_e2e_report(report: dict) -> str:
    sample = f"a fixed sample of {report['limit']} bios per subject" if report["limit"] else "every bio"
    head = (f"held-out topics: {report['folds']}-fold topic-grouped CV over {report['topics']} topics"
            if report.get("folds") else "no cross-validation (the installed verifier, or the LM judge fitted on no topic)")
    lines = ([report["note"]] if report.get("note") else []) + [
             f"{head}; own facts by {report['llm']} ({report['llm_sha256'][:12]}), decomposer {report['decomposer']}; "
             f"verifier {report['verifier']}, calibrated on {report['calibrated_on']}; {sample}: {report['bios']} bios",
             "estimate = the aggregate PACC (the mean of per-bio unclipped PACC, clipped once); "
             "MAE = per-bio mean |readable score (mean probability) − human|",
             f"{'subject':<13}{'bios':>5}{'human':>7} | {'own':>6}{'ER':>6}{'MAE':>6} | {'paper':>6}{'ER':>6}{'MAE':>6} | "
             f"{'facts own/paper/human':>22} | {'degen own/paper':>16}"]
    calibrated = "own_calibration" in report
    if calibrated:
        lines[-1] += f" | {'own, own-facts calibration':>26}"
        lines.insert(-1, "own-facts calibration: each fold's threshold and share means fitted on the other folds' bios "
                         "only (their probabilities out of fold within those topics); its MAE is of the per-bio share "
                         f"clipped to [0, 1]; facts {report.get('facts_source', 'generated by this run')}")
    for r in report["subjects"]:
        o, p, n = r["own"], r["paper"], r["facts_per_response"]
        dg = lambda x: f"{100 * x:.1f}%" if x is not None else "-"  # noqa: E731
        line = (f"{r['subject']:<13}{r['n_bios']:>5}{r['human']:>7.1f} | {o['estimated']:>6.1f}{o['error_rate']:>6.1f}"
                f"{o['per_bio_mae']:>6.1f} | {p['estimated']:>6.1f}{p['error_rate']:>6.1f}{p['per_bio_mae']:>6.1f} | "
                f"{n['own']:>8.1f}/{n['paper']:.1f}/{n['human']:.1f}{'':>4} | "
                f"{dg(r['degenerate_share']):>7}/{dg(r['paper_degenerate_share'])}")
        if calibrated:
            c = r.get("own_calibrated")
            line += (f" | {c['estimated']:>8.1f}{c['error_rate']:>6.1f}{c['per_bio_mae_pacc_clipped']:>6.1f} "
                     f"({c['n_bios']} bios)" if c else f" | {'-':>8} (no fold fitted)")
        lines.append(line)
    lines.append("own − human, 95% interval over resampled topics: " + " · ".join(
        f"{r['subject']} {r['own']['estimated'] - r['human']:+.1f} {_ci(r['own']['signed_error_ci95'])}"
        for r in report["subjects"]))
    lines.append("own − paper on the same bios, 95% interval over resampled topics: " + " · ".join(
        f"{r['subject']} {r['own_minus_paper']['difference']:+.1f} {_ci(r['own_minus_paper']['ci95'])}"
        for r in report["subjects"]))
    if all(r.get("own_calibrated_minus_paper") for r in report["subjects"]):
        lines.append("own (own-facts calibration) − paper on the same bios, 95% interval over resampled topics: "
                     + " · ".join(f"{r['subject']} {r['own_calibrated_minus_paper']['difference']:+.1f} "
                                  f"{_ci(r['own_calibrated_minus_paper']['ci95'])}" for r in report["subjects"]))
    kinds = {k: sum(r["degenerate_kinds"].get(k, 0) for r in report["subjects"])
             for k in ("loop", "fragment", "duplicate", "citation")}
    lines.append("degenerate own facts by kind: " + ", ".join(f"{k} {v}" for k, v in kinds.items()))
    skipped = sum(r["n_no_own_facts"] for r in report["subjects"])
    if skipped:
        lines.append(f"{skipped} bios got no own facts (status no_facts in score) and are left out of both columns")
    if report.get("subject_holdout"):
        lines.append("own-facts level refitted without the subject (a new LM; approximate, from the per-bio shares): "
                     + " · ".join(f"{r['subject']} {r['estimated']:.1f} (ER {r['error_rate']:.1f})"
                                  for r in report["subject_holdout"]))
    rp = report["ranking_preserved"]
    lines.append(f"ranking InstructGPT < ChatGPT < PerplexityAI preserved: own {rp['own']}, paper {rp['paper']}"
                 + (f", own with the own-facts calibration {rp['own_calibrated']}" if "own_calibrated" in rp else ""))
    lines.append(f"fact generation {report['generation_s']:.0f} s at {report['threads']} thread(s); total "
                 f"{report['total_s']:.0f} s")
    return "\n".join(lines)


def record_scores(rec: dict) -> dict | None:
    """A scored record's per-bio scores (as :func:`bio_scores`); None when it got no facts."""
    if rec.get("status") != "ok":
        return None
    readable = float(rec["init_score"])
    raw = rec.get("pacc_share_unclipped")
    decided = float(np.mean([d["is_supported"] for d in rec["decisions"]]))
    pacc = float(raw) if raw is not None else readable
    return {"readable": readable, "decisions": decided, "pacc": pacc, "pacc_clipped": min(1.0, max(0.0, pacc))}


def subject_holdout(per_bio: list[dict], between_subjects: bool = False) -> list[dict]:
    """The own-facts calibration refitted without each subject, as for an LM no training bio came from
    (approximate: from the run's per-bio shares). For each outer fold and subject S: the level (as
    shipped; ``between_subjects``: the line between the other subjects' means,
    :func:`~fscore_lite.training.share_line.fit_share_line`) over the other folds' bios of the other
    subjects — their own facts' unclipped PACC ``own.pacc`` under their fold combiner, against their
    human score — applied to the fold's bios of S. Unlike the nested fit, those bios' shares come from the outer
    fold combiners, whose training topics include the held-out fold's; the verifier's combiner and its
    paper-facts line still see every subject. Per subject: human, estimate (clipped once), ER."""
    from ..training.combiner_cv import aggregate_estimate
    from ..training.share_line import fit_share_line

    rows = [b for b in per_bio if b.get("own")]
    subjects = list(dict.fromkeys(b["subject"] for b in rows))
    if len(subjects) < 2:
        return []
    est: dict[str, list[float]] = {s: [] for s in subjects}
    for fold in sorted({b["fold"] for b in rows}):
        for s in subjects:
            train = [b for b in rows if b["fold"] != fold and b["subject"] != s]
            held = [b for b in rows if b["fold"] == fold and b["subject"] == s]
            if not train or not held:
                continue
            a, k = fit_share_line([b["own"]["pacc"] for b in train], [b["human"] / 100 for b in train],
                                  [b["subject"] for b in train] if between_subjects else None)
            est[s] += [a + k * b["own"]["pacc"] for b in held]
    out = []
    for s in subjects:
        human = float(np.mean([b["human"] for b in rows if b["subject"] == s]))
        if est[s]:
            e = 100 * aggregate_estimate(est[s])
            out.append({"subject": s, "human": human, "estimated": e, "error_rate": abs(e - human)})
    return out
