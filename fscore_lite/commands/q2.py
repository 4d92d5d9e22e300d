"""`fscore-lite q2`: Q² factual consistency over a CSV or JSONL file."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..distributed import RAY_ACTORS_HELP, RAY_HELP
from ..q2.score import Q2Options
from ..settings import Settings
from .common import default, one_of

Q = Q2Options


def q2(
    input: Path = typer.Argument(..., help="Q² CSV (columns response, knowledge, ...) or JSONL with the same keys."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Per-item JSONL (default: INPUT with .q2.jsonl)."),
    summary: Optional[Path] = typer.Option(None, "--summary", help="Summary JSON (default: OUTPUT with .summary.json)."),
    backend: str = typer.Option(default(Q, "backend"), "--backend", help=f"{one_of(Q, 'backend')}. auto: the ONNX "
                                "model of a role when installed, else rules for QG and the LLM for QA and NLI."),
    qa_backend: Optional[str] = typer.Option(None, "--qa-backend", help=f"The QA role's backend on its own: "
                                             f"{one_of(Q, 'qa_backend')} (default: as --backend). llm: the LLM's "
                                             "answer snapped to the span of the text with the best token F1; "
                                             "llm-free: the LLM's answer as written."),
    qg_backend: Optional[str] = typer.Option(None, "--qg-backend", help=f"The QG role's backend on its own: "
                                             f"{one_of(Q, 'qg_backend')} (default: as --backend; auto: rules). rules: the "
                                             "answer span's sentence turned into a wh-question in place, no model."),
    metric: str = typer.Option(default(Q, "metric"), "--metric", help=f"The headline score (`score`): "
                               f"{one_of(Q, 'metric')}. q2: the paper's Q²; q2-no-nli: Q² without the NLI step; "
                               "nli: end-to-end NLI alone; overlap: the token-overlap baseline. Every one is "
                               "computed and kept."),
    precision: str = typer.Option(default(Q, "precision"), "--precision",
                                  help=f"ONNX graphs to run: {one_of(Q, 'precision')}."),
    questions: str = typer.Option(default(Q, "questions"), "--questions", help=f"{one_of(Q, 'questions')}. single: "
                                  "first beam passing both filters (the paper); multi: every passing beam."),
    keep_personal: bool = typer.Option(not default(Q, "remove_personal"), "--keep-personal",
                                       help="Do not drop personal (I/you/my/your) questions."),
    no_nli_pure: bool = typer.Option(not default(Q, "no_nli_gets_fallback"), "--no-nli-pure",
                                     help="Leave Q2_no_nli empty for responses without a valid question "
                                          "(the reference gives them the NLI fallback score)."),
    llm: Optional[str] = typer.Option(None, "--llm", help="LLM bundle entry name or a .gguf path."),
    models_dir: Optional[Path] = typer.Option(None, "--models-dir", help="Model bundle directory."),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads (default: all cores)."),
    llm_kernel: Optional[str] = typer.Option(None, "--llm-kernel", help="llama.cpp's CPU kernel: portable "
                                             "(default), auto or a variant's name (see `fscore-lite score --help`)."),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted run of the same input and settings."),
    force: bool = typer.Option(False, "--force", help="Discard the finished items of an earlier, unfinished run "
                               "of this output (OUTPUT.partial) and start over."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the model-call cache."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    ray: Optional[str] = typer.Option(None, "--ray", help=RAY_HELP),
    ray_actors: Optional[int] = typer.Option(None, "--ray-actors", help=RAY_ACTORS_HELP),
) -> None:
    """Score grounded responses with Q²: questions from the response, answered on the knowledge."""
    from .. import q2 as q2_api

    result = q2_api(input, output, summary=summary, resume=resume, force=force, progress=not quiet, llm=llm,
                    models_dir=models_dir, threads=threads, llm_kernel=llm_kernel, use_cache=False if no_cache else None,
                    backend=backend,
                    qa_backend=qa_backend, qg_backend=qg_backend, metric=metric,
                    precision=precision, questions=questions, remove_personal=not keep_personal,
                    no_nli_gets_fallback=not no_nli_pure, ray=ray, ray_actors=ray_actors)
    keys = ("score", "Q2", "Q2_no_nli", "e2e_nli", "overlap", "no_valid_question_share", "num_items", "num_scored",
            "status_counts")
    backends = {role: f"{d['backend']}:{d['name']}" for role, d in result["backends"].items()}
    typer.echo(json.dumps({k: result[k] for k in keys} | {"backends": backends, "output": result["output"],
                          "summary": result["summary"]}
                          | ({"ray": result["ray"]} if "ray" in result else {}), indent=2))


def meta_eval_q2(
    data: Path = typer.Option(Path("../shared/data"), "--data", help="Folder holding q2-wow/."),
    limit: Optional[int] = typer.Option(None, "--limit",
                                        help="A fixed sample of N rows per file (smallest sha256 of the row)."),
    out: Path = typer.Option(Path("out/meta-eval"), "--out", help="Folder for per-file outputs and the report."),
    backend: str = typer.Option(default(Q, "backend"), "--backend",
                                help=f"{one_of(Q, 'backend')} (see `fscore-lite q2 --help`)."),
    qa_backend: Optional[str] = typer.Option(None, "--qa-backend", help=f"{one_of(Q, 'qa_backend')} (default: as "
                                             "--backend; see `fscore-lite q2 --help`)."),
    qg_backend: Optional[str] = typer.Option(None, "--qg-backend", help=f"{one_of(Q, 'qg_backend')} (default: as "
                                             "--backend; see `fscore-lite q2 --help`)."),
    precision: str = typer.Option(default(Q, "precision"), "--precision",
                                  help=f"ONNX graphs to run: {one_of(Q, 'precision')}."),
    llm: Optional[str] = typer.Option(None, "--llm", help="LLM bundle entry name or a .gguf path."),
    models_dir: Optional[Path] = typer.Option(None, "--models-dir", help="Model bundle directory."),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads (default: all cores)."),
    llm_kernel: Optional[str] = typer.Option(None, "--llm-kernel", help="llama.cpp's CPU kernel: portable "
                                             "(default), auto or a variant's name (see `fscore-lite score --help`)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the model-call cache (every "
                                  "call computed: the seconds per response are then the methods' own)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of the table."),
    report: Optional[Path] = typer.Option(None, "--report", help="Also write the HTML report of the four scored files "
                                          "(gold labels from their names: ROC curve, AUC, accuracy at 0.5)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Q² on the annotated WoW responses: Q², Q² without NLI, NLI alone and token overlap —
    accuracy and AUC with 95% intervals, seconds per response — beside the paper's."""
    from ..metaeval.q2_wow import LABELS, SYSTEMS, format_report, run_q2_wow

    if report is not None:
        from ..io import check_writable_outputs

        check_writable_outputs([report])  # before any model work
    settings = Settings().with_(llm=llm, models_dir=models_dir, threads=threads, llm_kernel=llm_kernel,
                                use_cache=False if no_cache else None)
    result = run_q2_wow(data, settings, limit=limit, out_dir=out, backend=backend, precision=precision,
                        options=Q2Options(qa_backend=qa_backend, qg_backend=qg_backend), progress=not quiet)
    if report is not None:
        from ..report import write_report

        runs = [out / "q2-wow" / f"{key}_{label}.q2.jsonl" for key, _ in SYSTEMS for label in LABELS]
        result["report"] = str(write_report(runs, report, title="Q² on the annotated WoW responses"))
    typer.echo(json.dumps(result, indent=2) if as_json else format_report(result))
    if report is not None and not as_json:
        typer.echo(f"report: {result['report']}")


def register(app: typer.Typer) -> None:
    app.command("q2")(q2)
