"""`fscore-lite q2`: Q² factual consistency over a CSV or JSONL file."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..distributed import RAY_ACTORS_HELP, RAY_HELP, executor_for
from ..settings import Settings


def q2(
    input: Path = typer.Argument(..., help="Q² CSV (columns response, knowledge, ...) or JSONL with the same keys."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Per-item JSONL (default: INPUT with .q2.jsonl)."),
    summary: Optional[Path] = typer.Option(None, "--summary", help="Summary JSON (default: OUTPUT with .summary.json)."),
    backend: str = typer.Option("auto", "--backend",
                                help="auto: the ONNX model of a role when installed, else the LLM; onnx; llm."),
    precision: str = typer.Option("int8", "--precision", help="ONNX graphs to run: int8 (default) or fp32."),
    questions: str = typer.Option("single", "--questions",
                                  help="single: first beam passing both filters (the paper); multi: every passing beam."),
    keep_personal: bool = typer.Option(False, "--keep-personal", help="Do not drop personal (I/you/my/your) questions."),
    no_nli_pure: bool = typer.Option(False, "--no-nli-pure",
                                     help="Leave Q2_no_nli empty for responses without a valid question "
                                          "(the reference gives them the NLI fallback score)."),
    llm: Optional[str] = typer.Option(None, "--llm", help="LLM bundle entry name or a .gguf path."),
    models_dir: Optional[Path] = typer.Option(None, "--models-dir", help="Model bundle directory."),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads (default: all cores)."),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted run of the same input and settings."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the model-call cache."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    ray: Optional[str] = typer.Option(None, "--ray", help=RAY_HELP),
    ray_actors: Optional[int] = typer.Option(None, "--ray-actors", help=RAY_ACTORS_HELP),
) -> None:
    """Score grounded responses with Q²: questions from the response, answered on the knowledge."""
    from ..io import summary_path_for
    from ..q2.pipeline import run_q2
    from ..q2.score import Q2Options

    settings = Settings().with_(llm=llm, models_dir=models_dir, threads=threads, use_cache=False if no_cache else None)
    output = output or input.with_name(input.stem + ".q2.jsonl")
    options = Q2Options(questions=_choice(questions, ("single", "multi"), "--questions"),
                        remove_personal=not keep_personal, no_nli_gets_fallback=not no_nli_pure)
    with executor_for(ray, ray_actors, "q2", settings, options, backend=backend, precision=precision) as executor:
        result = run_q2(input, output, settings, options=options, backend=backend, precision=precision,
                        resume=resume, summary_path=summary, progress=not quiet, executor=executor)
        ran_on = {"ray": executor.describe()} if executor else {}
    keys = ("Q2", "Q2_no_nli", "no_valid_question_share", "n_items", "n_scored", "status_counts")
    backends = {role: f"{d['backend']}:{d['name']}" for role, d in result["backends"].items()}
    typer.echo(json.dumps({k: result[k] for k in keys} | {"backends": backends, "output": str(output),
                          "summary": str(summary or summary_path_for(output))} | ran_on, indent=2))


def meta_eval_q2(
    data: Path = typer.Option(Path("../shared/data"), "--data", help="Folder holding q2-wow/."),
    limit: Optional[int] = typer.Option(None, "--limit",
                                        help="A fixed sample of N rows per file (smallest sha256 of the row)."),
    out: Path = typer.Option(Path("out/meta-eval"), "--out", help="Folder for per-file outputs and the report."),
    backend: str = typer.Option("auto", "--backend", help="auto, onnx or llm (see `fscore-lite q2 --help`)."),
    precision: str = typer.Option("int8", "--precision", help="ONNX graphs to run: int8 or fp32."),
    llm: Optional[str] = typer.Option(None, "--llm", help="LLM bundle entry name or a .gguf path."),
    models_dir: Optional[Path] = typer.Option(None, "--models-dir", help="Model bundle directory."),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads (default: all cores)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of the table."),
    report: Optional[Path] = typer.Option(None, "--report", help="Also write the HTML report of the four scored files "
                                          "(gold labels from their names: ROC curve, AUC, accuracy at 0.5)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Q² on the annotated WoW responses: mean scores, accuracy and P/R beside the paper's."""
    from ..metaeval.q2_wow import LABELS, SYSTEMS, format_report, run_q2_wow

    if report is not None:
        from ..io import check_writable_outputs

        check_writable_outputs([report])  # before any model work
    settings = Settings().with_(llm=llm, models_dir=models_dir, threads=threads)
    result = run_q2_wow(data, settings, limit=limit, out_dir=out, backend=backend, precision=precision,
                        progress=not quiet)
    if report is not None:
        from ..report import write_report

        runs = [out / "q2-wow" / f"{key}_{label}.q2.jsonl" for key, _ in SYSTEMS for label in LABELS]
        result["report"] = str(write_report(runs, report, title="Q² on the annotated WoW responses"))
    typer.echo(json.dumps(result, indent=2) if as_json else format_report(result))
    if report is not None and not as_json:
        typer.echo(f"report: {result['report']}")


def _choice(value: str, allowed: tuple[str, ...], flag: str) -> str:
    if value not in allowed:
        raise typer.BadParameter(f"{flag} must be one of {', '.join(allowed)}")
    return value


def register(app: typer.Typer) -> None:
    app.command("q2")(q2)
