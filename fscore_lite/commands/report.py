"""`fscore-lite report`: one self-contained HTML file from `score` / `q2` outputs."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer


def report(
    runs: List[Path] = typer.Argument(..., help="Per-item JSONL written by `score` or `q2` (one or more; kind detected)."),
    output: Path = typer.Option(Path("report.html"), "-o", "--output", help="The HTML file to write."),
    label: Optional[List[str]] = typer.Option(None, "--label", help="Name of a run in tables and legends (once per run, in order)."),
    category_field: str = typer.Option("cat", "--category-field",
                                       help="Record field with the entity category for Figure 2 (first element of a list)."),
    position_bins: int = typer.Option(10, "--position-bins", help="Relative-position bins of Figure 2."),
    n_boot: int = typer.Option(1000, "--bootstrap", help="Bootstrap resamples for the confidence intervals."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap (the report is reproducible)."),
    store: Optional[Path] = typer.Option(None, "--store",
                                         help="Passage store for evidence texts (default: the store each run's summary names)."),
    title: Optional[str] = typer.Option(None, "--title", help="Title of the report."),
    human: Optional[Path] = typer.Option(None, "--human",
                                         help="Data folder with factscore-labeled/: add the human FActScore of the same "
                                              "bios beside each run named after InstructGPT, ChatGPT or PerplexityAI."),
) -> None:
    """Write an HTML report: summary tables with 95% CIs, Figure 2, every response with its facts and evidence."""
    from ..report import write_report
    from ..report.html import check_report_options
    from ..report.load import check_report_paths

    check_report_options(n_boot, position_bins)
    check_report_paths(runs, output)
    path = write_report(runs, output, labels=label or None, category_field=category_field,
                        position_bins=position_bins, n_boot=n_boot, seed=seed, store=store, title=title, human=human)
    typer.echo(str(path))


def register(app: typer.Typer) -> None:
    app.command("report")(report)
