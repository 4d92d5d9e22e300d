"""`fscore-lite score`: FActScore over a JSONL file."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..settings import Settings


def score(
    input: Path = typer.Argument(..., help="JSONL: one {\"topic\", \"output\"} object per line (or \"facts\": [...] instead of output)."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Per-item JSONL (default: INPUT with .factscore.jsonl)."),
    summary: Optional[Path] = typer.Option(None, "--summary", help="Summary JSON (default: OUTPUT with .summary.json)."),
    store: Optional[Path] = typer.Option(None, "--store", help="Passage store directory (default: the demo store)."),
    llm: Optional[str] = typer.Option(None, "--llm", help="LLM bundle entry name or a .gguf path."),
    models_dir: Optional[Path] = typer.Option(None, "--models-dir", help="Model bundle directory."),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads (default: all cores)."),
    n_ctx: Optional[int] = typer.Option(None, "--n-ctx", help="LLM context size in tokens."),
    parallel: Optional[int] = typer.Option(None, "--parallel", help="Atomic-fact generations decoded together, 1-3 "
                                           "(default 3; the facts are the same bytes as with 1)."),
    verifier: str = typer.Option("auto", "--verifier", help="trained (cross-encoder + page features, calibrated on human labels), "
                                 "llm (the reference's LM judge), llm+trained (the trained verifier's logit and the LLM's margin on a "
                                 "short prompt, stacked; fit with `models train llm-combiner`) or auto: trained when installed, else llm."),
    share: str = typer.Option("adjusted", "--share", help="Trained verifier: a response's supported share estimated "
                              "from its probabilities (adjusted, PACC) or counted from its decisions (decisions)."),
    mode: str = typer.Option("parity", "--mode", help="LLM judge only: parity (reference prompts) or shared-context (one context per response)."),
    context_budget: int = typer.Option(2048, "--context-budget", help="Token budget of the shared context."),
    gamma: float = typer.Option(10, "--gamma", help="Length penalty gamma; 0 disables it."),
    abstain: str = typer.Option("none", "--abstain", help="Abstention detection: none, generic, perplexity_ai."),
    k: int = typer.Option(5, "--k", help="Passages retrieved per fact."),
    search_all: bool = typer.Option(False, "--search-all", help="Search the whole store when the topic has no page."),
    npm: bool = typer.Option(False, "--npm", help="Apply the nonparametric-probability check (needs an mlm model)."),
    chat_template: bool = typer.Option(False, "--chat-template", help="Wrap prompts in the model's chat template."),
    max_output_chars: int = typer.Option(100_000, "--max-output-chars",
                                         help="Longer outputs get status output_too_long instead of a score."),
    demo_shortcut: bool = typer.Option(False, "--demo-shortcut",
                                       help="Deviation: answer a sentence that is a demo with its demo facts "
                                            "(the reference sends it to the LM)."),
    decomposer: str = typer.Option("default", "--decomposer",
                                    help="Atomic-fact decoding: default (drafts looked up in the sentence, stop rules "
                                         "against loops; deviations) or reference (the reference's decoding, byte-faithful)."),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted run of the same input and settings."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the model-call cache."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Score long-form generations with FActScore against a passage store."""
    from ..factscore.pipeline import ScoreOptions, score_file, summary_path_for

    settings = Settings().with_(store=store, llm=llm, models_dir=models_dir, threads=threads, n_ctx=n_ctx,
                                parallel=parallel,
                                use_cache=False if no_cache else None)
    output = output or input.with_name(input.stem + ".factscore.jsonl")
    options = ScoreOptions(verifier=verifier, share=share, mode=mode, gamma=gamma, abstain=abstain, k=k, search_all=search_all, npm=npm,
                           chat_template=chat_template, context_budget=context_budget, progress=not quiet,
                           max_output_chars=max_output_chars, demo_shortcut=demo_shortcut,
                           decomposer=decomposer)
    result = score_file(input, output, settings, options, resume=resume, summary_path=summary)
    keys = ("score", "score_ci95", "score_by_decisions", "init_score", "respond_ratio", "num_facts_per_response", "num_items", "status_counts")
    typer.echo(json.dumps({k: result.get(k) for k in keys if k in result or k != "score_by_decisions"} | {"output": str(output),
                          "summary": str(summary or summary_path_for(output))}, indent=2))


def register(app: typer.Typer) -> None:
    app.command("score")(score)
