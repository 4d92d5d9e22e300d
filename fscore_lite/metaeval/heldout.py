"""``meta-eval factscore-er --verifier trained --cv K [--hold-out lm|topic] [--facts paper|generated]``.

The agreement a user gets, held out: every fitted number of the trained verifier is refitted in
each split (:mod:`fscore_lite.training.heldout`) on the bios it may see — with ``--hold-out lm``
(the default) neither the held-out bio's topic nor any bio of its LM — and each subject's bios are
scored as one run of ``score`` (gamma 0): the run share, each bio's score, their mean. Topic-only CV
is reported beside it.

The facts are the paper's (``--facts paper``, given facts) or the ones ``score`` makes
(``--facts generated``: read from the shipped own-facts file of the decomposer when it was made with
this run's fact settings, else generated through the call cache); the paper's facts of the same bios
are scored beside them, and the own − paper difference is paired by bio. The build fits on every
shipped own-facts file, so every split does too.
"""
from __future__ import annotations

import time
from pathlib import Path

from ..errors import FscoreError
from ..training.labeled import SUBJECTS


def _shipped_files() -> list[Path]:
    from ..build_step import shipped_own_facts

    return shipped_own_facts(None)


def run_heldout(data, settings, folds: int = 5, hold_out: str = "lm", facts: str = "paper", decomposer: str = "default",
                limit: int | None = None, subjects=SUBJECTS, progress: bool = True, llm=None,
                own_facts_files: list[Path] | None = None) -> dict:
    """The held-out report (see the module docstring); ``own_facts_files``: the files the build would fit on
    (default: the shipped ones)."""
    from ..manifest import Bundle
    from ..training.examples import OWN, held_out_bios
    from ..training.heldout import HOLD_OUTS, bio_scores, fact_f1, held_out_responses, paired_difference, subject_rows
    from ..training.prepare import installed_verifier, prepare
    from .factscore_er import ranking_preserved

    if folds < 2:
        raise FscoreError(f"--cv needs at least 2 folds, not {folds}")
    if hold_out not in HOLD_OUTS:
        raise FscoreError(f"--hold-out must be one of {', '.join(HOLD_OUTS)}, not {hold_out!r}")
    if facts not in ("paper", "generated"):
        raise FscoreError(f"--facts must be paper or generated, not {facts!r}")
    t0 = time.monotonic()
    bundle = Bundle(settings.models_dir)
    entry = installed_verifier(bundle)
    target = OWN + decomposer if facts == "generated" else "model"
    made = {"source": "the paper's model-atomic-facts", "generation_s": 0.0, "llm_calls": {}}

    def own_facts(ex, fitted_for):
        if facts == "generated":
            made.update(_own_facts(ex, settings, decomposer, fitted_for, limit, subjects, progress, llm))

    t_feat = time.monotonic()
    prep = prepare(Path(data), settings, bundle, entry, _shipped_files() if own_facts_files is None else own_facts_files,
                   subjects, own_facts)
    feat_s = time.monotonic() - t_feat - made["generation_s"]
    ex, fit, fitted_for = prep.ex, prep.fit, prep.fitted_for
    if len(ex.topics) < folds:
        raise FscoreError(f"{len(ex.topics)} topics with pages and labels under {data}: too few for {folds} folds")
    files_read, silver, source = prep.own_files, prep.silver, made["source"]
    kinds = list(dict.fromkeys([target, "model"]))
    chosen = set(held_out_bios(ex, limit, subjects)) if limit else None
    report = {"folds": folds, "hold_out": hold_out, "facts": facts, "facts_source": source,
              "decomposer": decomposer if facts == "generated" else None, "verifier": entry.name,
              "verifier_sha256": entry.sha256, "topics": len(ex.topics), "limit": limit,
              "own_facts_files": files_read, "silver_labels": silver.get(target)}
    for hold in dict.fromkeys([hold_out, "topic"]):
        responses = held_out_responses(ex, kinds, fit, hold, folds, fitted_for)
        if chosen is not None:
            responses = {k: {i: r for i, r in v.items() if i in chosen} for k, v in responses.items()}
        rows = subject_rows(ex, responses[target])
        report[f"hold_out_{hold}"] = [{k: r[k] for k in ("subject", "n_bios", "human", "estimate", "er", "ci95",
                                                          "per_bio_mae", "error_ci95", "facts_per_response")}
                                      for r in rows]
        report[f"ranking_preserved_{hold}"] = ranking_preserved({r["subject"]: r["estimate"] for r in rows})
        report[f"f1_ns_{hold}"] = fact_f1(ex, fit, hold, folds)
        if target != "model":  # the paper's facts of the same bios, scored as their own runs
            paper = {i: r for i, r in responses["model"].items() if i in responses[target]}
            report[f"paper_{hold}"] = subject_rows(ex, paper)
            report[f"own_minus_paper_{hold}"] = paired_difference(ex, bio_scores(ex, responses[target]),
                                                                  bio_scores(ex, paper))
    report["bios"] = sum(r["n_bios"] for r in report[f"hold_out_{hold_out}"])
    report["timings"] = {"generation_s": round(made["generation_s"], 1), "features_s": round(feat_s, 1),
                         "total_s": round(time.monotonic() - t0, 1)}
    report["llm_calls"] = made["llm_calls"]
    return report


def _own_facts(ex, settings, decomposer, fitted_for, limit, subjects, progress, llm) -> dict:
    """The decomposer's facts of the bios in ``ex``: kept from the shipped file when it was made with this
    run's fact settings, else generated (cached) for every bio, or the ``limit`` sample."""
    from ..backends.llm import load_llm
    from ..cache import CallCache
    from ..factscore.decomposers import Models, fact_source, make_decomposer
    from ..factscore.score import fact_settings, same_facts
    from ..training.examples import held_out_bios
    from ..training.own_facts import generate_own_facts

    loaded: list = [llm] if llm is not None else []
    models = Models.of(settings, cache=CallCache(settings.cache_path if settings.use_cache else None))

    def llm_fn():
        if not loaded:
            loaded.append(load_llm(settings, models.bundle, models.cache))
        return loaded[0]

    generator = make_decomposer(decomposer, llm_fn, models=models)
    source = fact_source(decomposer, llm_fn, models)
    run = fact_settings(*source, generator.describe())
    if decomposer in ex.own and same_facts(fitted_for[decomposer], run):
        return {"source": f"read from the shipped own-facts file ({fitted_for[decomposer]['facts_file_sha256'][:12]}, "
                          "made with these fact settings)"}
    t = time.monotonic()
    chosen = held_out_bios(ex, limit, subjects)
    made = generate_own_facts([ex.bios[i] for i in chosen], generator, progress)
    ex.add_own(decomposer, dict(zip(chosen, made)))
    fitted_for[decomposer] = run
    return {"source": f"generated by this run for {len(chosen)} bios ({source[0]}, decomposer {decomposer})",
            "generation_s": time.monotonic() - t, "llm_calls": loaded[0].stats.__dict__ if loaded else {}}


def format_rows(rows: list[dict]) -> str:
    lines = [f"{'subject':<14}{'bios':>5}{'human':>8}{'score':>8}{'ER':>6}{'  score 95% CI':>16}{'MAE':>6}"
             f"{'  estimate − human [95% over topics]':>38}"]
    for r in rows:
        ci = f"[{r['ci95'][0]:.1f}, {r['ci95'][1]:.1f}]" if r.get("ci95") else "-"
        err = r.get("error_ci95")
        e = (f"{r['estimate'] - r['human']:+.1f} [{err[0]:+.1f}, {err[1]:+.1f}]" if err else
             f"{r['estimate'] - r['human']:+.1f}")
        lines.append(f"{r['subject']:<14}{r['n_bios']:>5}{r['human']:>8.1f}{r['estimate']:>8.1f}{r['er']:>6.1f}"
                     f"{ci:>16}{r['per_bio_mae']:>6.1f}{e:>38}")
    return "\n".join(lines)


def format_report(report: dict) -> str:
    names = {"lm": "the LM and the topic held out (leave-one-LM-out, topic-grouped)", "topic": "topics held out"}
    lines = [f"trained verifier {report['verifier']} ({report['verifier_sha256'][:12]}), refitted in every split, "
             f"{report['folds']} topic folds; facts: {report['facts_source']}; each subject's bios scored as one run "
             "(score at gamma 0: the run share, each bio's score, their mean)"]
    for hold in dict.fromkeys([report["hold_out"], "topic"]):
        lines.append(f"{names[hold]}:")
        lines.append(format_rows(report[f"hold_out_{hold}"]))
        f1 = " · ".join(f"{r['subject']} {100 * r['f1_ns']:.1f}" for r in report[f"f1_ns_{hold}"] if r["f1_ns"] is not None)
        lines.append(f"  ranking InstructGPT < ChatGPT < PerplexityAI preserved: {report[f'ranking_preserved_{hold}']}; "
                     f"F1(NS) of the human facts: {f1}")
        if f"own_minus_paper_{hold}" in report:
            lines.append("  the paper's facts of the same bios: " + " · ".join(
                f"{r['subject']} {r['estimate']:.1f} (ER {r['er']:.1f})" for r in report[f"paper_{hold}"]))
            lines.append("  own − paper on the same bios, 95% interval over topics: " + " · ".join(
                f"{r['subject']} {r['difference']:+.1f} [{r['ci95'][0]:+.1f}, {r['ci95'][1]:+.1f}]"
                if r["ci95"] else f"{r['subject']} {r['difference']:+.1f}" for r in report[f"own_minus_paper_{hold}"]))
    if report.get("silver_labels"):
        lines.append("silver labels of these facts against the human FActScore: " + " · ".join(
            f"{r['subject']} {r['silver']:.1f}/{r['human']:.1f} (per-bio MAE {r['per_bio_mae']:.1f})"
            for r in report["silver_labels"]))
    t = report["timings"]
    lines.append(f"generation {t['generation_s']:.0f} s, features {t['features_s']:.0f} s, total {t['total_s']:.0f} s")
    return "\n".join(lines)
