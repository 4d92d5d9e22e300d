"""`fscore-lite score`: FActScore over a JSONL file (:func:`fscore_lite.score`)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..distributed import RAY_ACTORS_HELP, RAY_HELP
from ..factscore.options import ScoreOptions
from .common import default, one_of

S = ScoreOptions


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
    llm_kernel: Optional[str] = typer.Option(None, "--llm-kernel", help="llama.cpp's CPU kernel: portable "
                                             "(default; the AVX2 kernel whatever the CPU), auto (the best this "
                                             "CPU has, e.g. zen4; other bits) or a variant's name. Recorded in the "
                                             "summary; env FSCORE_LITE_LLM_KERNEL."),
    verifier: str = typer.Option(default(S, "verifier"), "--verifier", help=f"{one_of(S, 'verifier')}. trained: "
                                 "cross-encoder + page features, calibrated on human labels; llm: the reference's LM "
                                 "judge; llm+trained: the trained verifier's logit and the LLM's margin on a short "
                                 "prompt, stacked (fit with `models train llm-combiner`); auto: trained when "
                                 "installed, else llm."),
    share: str = typer.Option(default(S, "share"), "--share", help=f"{one_of(S, 'share')}. Trained verifier: a "
                              "response's supported share estimated, the mean of its facts' probabilities under the "
                              "run's estimated share of supported facts (estimate), or counted from its decisions "
                              "under the training share (decisions, the reference's rule)."),
    mode: str = typer.Option(default(S, "mode"), "--mode", help=f"{one_of(S, 'mode')}. LLM judge only: the reference "
                             "prompts, or one context per response."),
    context_budget: int = typer.Option(default(S, "context_budget"), "--context-budget",
                                       help="Token budget of the shared context."),
    gamma: float = typer.Option(default(S, "gamma"), "--gamma", help="Length penalty gamma; 0 disables it."),
    abstain: str = typer.Option(default(S, "abstain"), "--abstain", help=f"Abstention detection: {one_of(S, 'abstain')}."),
    k: int = typer.Option(default(S, "k"), "--k", help="Passages retrieved per fact."),
    search_all: bool = typer.Option(default(S, "search_all"), "--search-all",
                                    help="Search the whole store when the topic has no page."),
    npm: bool = typer.Option(default(S, "npm"), "--npm", help="Apply the nonparametric-probability check (needs an mlm model)."),
    chat_template: bool = typer.Option(default(S, "chat_template"), "--chat-template",
                                       help="Wrap prompts in the model's chat template."),
    max_output_chars: int = typer.Option(default(S, "max_output_chars"), "--max-output-chars",
                                         help="Longer outputs get status output_too_long instead of a score."),
    demo_shortcut: bool = typer.Option(default(S, "demo_shortcut"), "--demo-shortcut",
                                       help="Deviation: answer a sentence that is a demo with its demo facts "
                                            "(the reference sends it to the LM)."),
    decomposer: str = typer.Option(default(S, "decomposer"), "--decomposer",
                                   help=f"{one_of(S, 'decomposer')}. default (deviations): drafts looked up in the "
                                        "sentence, stop rules against loops, named filters on the facts (citations, "
                                        "echoes, loops, fragments, chains, conjunctions, duplicates); reference: the "
                                        "paper's decoding and facts, byte-faithful; parse: no LLM, facts from "
                                        "spaCy's dependency parse (clauses, appositions, adjuncts, coordinations)."),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted run of the same input and settings."),
    force: bool = typer.Option(False, "--force", help="Discard the finished items of an earlier, unfinished run "
                               "of this output (OUTPUT.partial) and start over."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the model-call cache."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    ray: Optional[str] = typer.Option(None, "--ray", help=RAY_HELP),
    ray_actors: Optional[int] = typer.Option(None, "--ray-actors", help=RAY_ACTORS_HELP),
) -> None:
    """Score long-form generations with FActScore against a passage store."""
    from .. import score as score_api

    result = score_api(input, output, summary=summary, resume=resume, force=force, store=store, llm=llm, models_dir=models_dir,
                       threads=threads, n_ctx=n_ctx, parallel=parallel, llm_kernel=llm_kernel, use_cache=False if no_cache else None,
                       verifier=verifier, share=share, mode=mode, gamma=gamma, abstain=abstain, k=k,
                       search_all=search_all, npm=npm, chat_template=chat_template, context_budget=context_budget,
                       progress=not quiet, max_output_chars=max_output_chars, demo_shortcut=demo_shortcut,
                       decomposer=decomposer,
                       ray=ray, ray_actors=ray_actors)
    keys = ("score", "score_ci95", "init_score", "run_share", "respond_ratio", "num_facts_per_response", "num_items",
            "status_counts")
    optional = ("run_share",)
    typer.echo(json.dumps({k: result.get(k) for k in keys if k in result or k not in optional}
                          | {"output": result["output"], "summary": result["summary"]}
                          | ({"ray": result["ray"]} if "ray" in result else {}), indent=2))


def register(app: typer.Typer) -> None:
    app.command("score")(score)
