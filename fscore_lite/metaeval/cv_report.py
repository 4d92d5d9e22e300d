"""What ``meta-eval factscore-er --cv K`` prints: the held-out table, the intervals, the ranking.

Two kinds of 95% interval, both by a seeded bootstrap that resamples topics
(:func:`~fscore_lite.stats.clustered_mean_ci`): a subject's signed error (how far
its ER could move with other topics like these), and the paired difference of two estimators
on the same bios (whether one beats the other on these topics).
"""
from __future__ import annotations

import numpy as np

from ..stats import signed_error_ci
from .factscore_er import format_error_cis, format_f1_cis
from ..training.combiner_cv import CvResult
from ..training.examples import Examples


def paired_estimates(ex: Examples, a: CvResult, b: CvResult) -> list[dict]:
    """Per subject: mean estimate of ``a`` minus that of ``b`` over the same bios (points), with a
    95% interval that resamples topics and keeps each bio's two estimates together
    (:func:`~fscore_lite.stats.signed_error_ci` with ``b`` in the place of the
    human score). Far narrower than either estimate's own interval, since both see the same
    topics: whether one estimator is better than another on these topics, not what either would
    give on other topics."""
    out = []
    for subject in dict.fromkeys(bio.subject for bio in ex.bios):
        bios = [i for i, bio in enumerate(ex.bios) if bio.subject == subject]
        a_est, b_est = [a.bio_estimate[i] for i in bios], [b.bio_estimate[i] for i in bios]
        out.append({"subject": subject, "difference": 100.0 * float(np.mean(np.subtract(a_est, b_est))),
                    "ci95": signed_error_ci(a_est, b_est, [ex.bios[i].topic for i in bios])})
    return out


def format_cv_report(report: dict) -> str:
    lines = [f"held-out topics: {report['folds']}-fold topic-grouped cross-validation over {report['topics']} topics "
             f"({report['bios']} bios, {report['human_facts']} human S/NS facts, {report['model_facts']} model facts); "
             f"verifier {report['verifier']} ({report['verifier_sha256'][:12]})",
             f"{'subject':<14}{'bios':>5}{'human':>7}{'est':>7}{'ER':>6}{'F1(NS)':>8} | {'lexical':>7}{'ER':>6}"
             f"{'F1':>6} | {'floor':>6}{'ER':>6}{'F1':>6}"]
    for r, lex, fl in zip(report["subjects"], report["lexical"], report["floor"]):
        f = lambda x: f"{100 * x:.1f}" if x is not None else "-"  # noqa: E731
        lines.append(f"{r['subject']:<14}{r['n_bios']:>5}{r['human']:>7.1f}{r['estimated']:>7.1f}{r['error_rate']:>6.1f}"
                     f"{f(r['f1_ns']):>8} | {lex['estimated']:>7.1f}{lex['error_rate']:>6.1f}{f(lex['f1_ns']):>6} | "
                     f"{fl['estimated']:>6.1f}{fl['error_rate']:>6.1f}{f(fl['f1_ns']):>6}")
    if report.get("share", "").startswith("adjusted"):
        lines.append("share of supported facts per bio: PACC-adjusted (counting decisions instead: ER "
                     + " / ".join(f"{r['error_rate_by_decisions']:.1f}" for r in report["subjects"]) + ")")
    lines += [x for x in (format_error_cis(report["subjects"]), format_f1_cis(report["subjects"])) if x]
    if report.get("trained_minus_lexical"):
        lines.append("trained − lexical estimate on the same bios, 95% interval over resampled topics: " + " · ".join(
            f"{d['subject']} {d['difference']:+.1f} [{d['ci95'][0]:+.1f}, {d['ci95'][1]:+.1f}]"
            for d in report["trained_minus_lexical"]))
    if report.get("recorded_oof_facts"):
        lines.append(f"cross-encoder continued on the training facts (--fact-stage): {report['recorded_oof_facts']} facts "
                     "of training topics scored by the build's out-of-fold models")
    rp = report["ranking_preserved"]
    lines.append(f"ranking InstructGPT < ChatGPT < PerplexityAI preserved: trained {rp['trained']}, "
                 f"lexical {rp['lexical']}, floor {rp['floor']}")
    return "\n".join(lines)
