"""`fscore-lite meta-eval ...`: reproduce the papers' evaluations on annotated data."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(no_args_is_help=True)

DATA_HELP = "Folder holding factscore-labeled/, wiki-*/ and q2-wow/."


@app.command("factscore-human")
def factscore_human(
    data: Path = typer.Option(Path("../shared/data"), "--data", help=DATA_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of the table."),
) -> None:
    """Human FActScores of the annotated bios beside the paper's Table 1."""
    from ..metaeval.factscore_human import evaluate, format_table

    result = evaluate(data)
    typer.echo(json.dumps(result, indent=2) if as_json else format_table(result))


@app.command("factscore-er")
def factscore_er(
    data: Path = typer.Option(Path("../shared/data"), "--data", help=DATA_HELP),
    mode: str = typer.Option("parity", "--mode", help="parity or shared-context."),
    subjects: Optional[str] = typer.Option(None, "--subjects", help="Comma-separated subset of InstructGPT,ChatGPT,PerplexityAI."),
    limit: Optional[int] = typer.Option(None, "--limit", help="At most N bios per subject (a fixed sample)."),
    llm: Optional[str] = typer.Option(None, "--llm", help="LLM bundle entry name or .gguf path."),
    threads: Optional[int] = typer.Option(None, "--threads"),
    store: Optional[Path] = typer.Option(None, "--store", help="Store of the wiki-* text (built when absent)."),
    out: Path = typer.Option(Path("out/meta-eval"), "--out", help="Folder for per-subject outputs."),
    chat_template: bool = typer.Option(False, "--chat-template"),
    context_budget: int = typer.Option(2048, "--context-budget"),
    baseline: bool = typer.Option(False, "--baseline", help="Also print the model-free word-overlap floor."),
    verifier: str = typer.Option("llm", "--verifier", help="llm (the reference's LM judge), trained or llm+trained (needs `models train llm-combiner`)."),
    cv: Optional[int] = typer.Option(None, "--cv", help="With --verifier trained or llm+trained: K topic folds; every "
                                     "fitted number refitted in each split (every bio scored by a verifier that never "
                                     "saw its topic, nor, with --hold-out lm, its LM)."),
    hold_out: str = typer.Option("lm", "--hold-out", help="With --cv and --verifier trained: lm (each LM's bios scored "
                                 "by a verifier fitted on the other LMs' bios of the other folds' topics; topic-only CV "
                                 "beside it) or topic."),
    facts: str = typer.Option("paper", "--facts", help="paper: the paper's model-atomic-facts (the estimator alone); "
                              "generated: each bio's output through score's own fact generation (end to end)."),
    decomposer: str = typer.Option("default", "--decomposer", help="With --facts generated: the decomposer "
                                   "(as score's --decomposer)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of the table."),
    report: Optional[Path] = typer.Option(None, "--report", help="Also write the HTML report of the estimated runs, "
                                          "each beside the human FActScore of the same bios (as `report --human`)."),
) -> None:
    """Estimator error rate against the human FActScores, on bios whose topic has wiki text."""
    from ..errors import FscoreError
    from ..metaeval.factscore_er import format_report, run_er
    from ..settings import Settings

    settings = Settings().with_(llm=llm, threads=threads)
    subs = [s.strip() for s in subjects.split(",")] if subjects else None
    if facts not in ("paper", "generated"):
        raise FscoreError(f"--facts must be paper or generated, not {facts!r}")
    from ..factscore.decomposers import check_decomposer

    check_decomposer(decomposer)
    if cv is not None:
        if verifier not in ("trained", "llm+trained"):
            raise FscoreError("--cv cross-validates the trained verifier: add --verifier trained "
                              "or --verifier llm+trained")
        if report is not None:
            raise FscoreError("--report is not available with --cv (it writes no per-bio outputs)")
        from ..training.labeled import SUBJECTS

        if verifier == "llm+trained":
            if facts != "paper":
                raise FscoreError("--verifier llm+trained --cv measures the paper's facts: drop --facts generated")
            from ..metaeval.stack_er import format_stack_er_report, run_stack_er_cv

            result = run_stack_er_cv(data, settings, cv, limit=limit, subjects=tuple(subs or SUBJECTS),
                                     chat_template=chat_template)
            typer.echo(json.dumps(result, indent=2) if as_json else format_stack_er_report(result))
            return
        from ..metaeval.heldout import format_report as format_heldout, run_heldout

        result = run_heldout(data, settings, cv, hold_out=hold_out, facts=facts, decomposer=decomposer, limit=limit,
                             subjects=tuple(subs or SUBJECTS))
        typer.echo(json.dumps(result, indent=2) if as_json else format_heldout(result))
        return
    if report is not None:
        from ..io import check_writable_outputs

        check_writable_outputs([report])  # before any model work
    if facts == "generated":
        from ..metaeval.e2e_er import format_e2e_report, run_e2e

        result = run_e2e(data, settings, subjects=subs, limit=limit, store=store, out=out, verifier=verifier,
                         decomposer=decomposer, mode=mode, chat_template=chat_template, context_budget=context_budget)
        typer.echo(json.dumps(result, indent=2) if as_json else format_e2e_report(result))
        return
    result = run_er(data, settings, mode=mode, subjects=subs, limit=limit, store=store, out=out,
                    chat_template=chat_template, context_budget=context_budget, baseline=baseline, verifier=verifier,
                    report=report)
    typer.echo(json.dumps(result, indent=2) if as_json else format_report(result))
    if report is not None and not as_json:
        typer.echo(f"report: {result['report']}")


@app.command("decomposer")
def decomposer_proxy(
    data: Path = typer.Option(Path("../shared/data"), "--data", help=DATA_HELP),
    limit: Optional[int] = typer.Option(100, "--limit", help="A fixed sample of N annotated sentences (0: all)."),
    llm: Optional[str] = typer.Option(None, "--llm", help="LLM bundle entry name or .gguf path."),
    threads: Optional[int] = typer.Option(None, "--threads"),
    decomposers: str = typer.Option("default,parse", "--decomposers", help="Comma-separated decomposers to measure "
                                    "(an LLM one: the reference decoding and each filter; parse alone loads no LLM)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of the table."),
) -> None:
    """Proxy for end-to-end agreement: the decomposer's facts against the human facts, per sentence."""
    from ..metaeval.decomposer_proxy import format_proxy, run_proxy
    from ..settings import Settings

    names = tuple(n.strip() for n in decomposers.split(",") if n.strip())
    result = run_proxy(data, Settings().with_(llm=llm, threads=threads), limit or None, decomposers=names)
    typer.echo(json.dumps(result, indent=2) if as_json else format_proxy(result))


from .q2 import meta_eval_q2 as _meta_eval_q2  # noqa: E402  (Q²: fscore_lite/commands/q2.py)
app.command("q2")(_meta_eval_q2)
