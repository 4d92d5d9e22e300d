"""Optional stage 2 (``train verifier --fact-stage``): the SNLI cross-encoder continued on facts.

The cross-encoder of stage 1 has only seen SNLI's short caption pairs. This stage continues it on
the (evidence window, atomic fact) pairs of the human facts labelled S or NS — exactly the pairs
the runtime scores (the same retrieval, :class:`fscore_lite.factscore.trained.PairBuilder`) —
with the multiple-instance loss of :mod:`.facts`.

The combiner on top must learn from scores the cross-encoder gives facts it has not seen, and a
user scores an LM no label came from, so the stage is cross-fitted over LM × topic folds (the
build's own topic-grouped folds, :func:`topic_folds`, the same as the combiner's report): for each
LM and each fold a copy of stage 1 is fine-tuned on the human facts of the *other* LMs' bios of
the other folds' topics, exported int8 like every model, and scores every fact of the fold
(human, the paper's and each decomposer's) through the runtime's code. A fact's score from the
model that held out its topic and its own LM is what the combiner and its calibrations are fitted
on; every LM's scores are recorded (``oof_scores.jsonl.gz``, hashed in the manifest), so that
``meta-eval factscore-er --cv K --hold-out lm`` scores a held-out LM's facts, and fits the combiner
of that split, with models that never saw that LM, and ``--hold-out topic`` a training topic's
facts with a model that never saw that topic. The model installed for run time is then fine-tuned
on every training fact (LMs × K + 1 fine-tunes in all).
"""
from __future__ import annotations

import gzip
import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fscore_lite.factscore.trained import CE_FEATURES
from fscore_lite.manifest import ModelFile, describe_file
from fscore_lite.training.examples import OOF_KIND

OOF_FILE = "oof_scores.jsonl.gz"


@dataclass
class FactStageConfig:
    epochs: float = 1.0
    lr: float = 3e-5
    facts_per_batch: int = 16
    frozen_layers: int = 0  # > 0: only the encoder layers above it learn (their input computed once)


def stage1_checkpoint(home: Path, stage1: dict) -> Path:
    """Where stage 1's torch checkpoint is kept for the fact stage (one per stage-1 setting)."""
    import hashlib

    key = hashlib.sha256(json.dumps(stage1, sort_keys=True).encode()).hexdigest()[:16]
    return Path(home) / "build" / "verifier-stage1" / key


def fact_pairs(ex, retriever, builder) -> dict[str, list[list[tuple[str, str]]]]:
    """Each fact's (window, fact) pairs, by kind, from the runtime's retrieval (cached by the
    featurisation that ran before)."""
    return {kind: [builder.pairs(f.text, retriever.retrieve(f.topic, f.text)) for f in ex.facts_of(kind)]
            for kind in ex.kinds}


def _load(checkpoint: Path):
    from .torch_train import load_torch

    load_torch()  # before transformers imports torch: when stage 1 is reused, this is the first import
    from transformers import BertForSequenceClassification

    model = BertForSequenceClassification.from_pretrained(str(checkpoint), attn_implementation="eager")
    model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
    return model


def _tokenizer(stage1_dir: Path, window_tokens: int):
    from tokenizers import Tokenizer

    from fscore_lite.backends.cross_encoder import pair_tokenizer

    return pair_tokenizer(Tokenizer.from_file(str(stage1_dir / "tokenizer.json")), window_tokens)


def lower_layer_states(stage1_dir: Path, pairs, cfg: FactStageConfig, *, window_tokens, seed, threads, bf16, log=print):
    """Stage 1's embeddings + lower ``cfg.frozen_layers`` layers over every human fact's pairs
    (computed once, shared by the LMs × K + 1 fine-tunes), or None when every layer learns."""
    if not cfg.frozen_layers:
        return None
    from .facts import lower_states
    from .torch_train import seed_everything

    t = time.monotonic()
    seed_everything(seed, threads)
    states = lower_states(_load(stage1_dir), _tokenizer(stage1_dir, window_tokens), pairs["human"],
                          cfg.frozen_layers, bf16)
    log(f"facts: lower {cfg.frozen_layers} layers over {len(states)} facts' pairs in {time.monotonic() - t:.0f} s")
    return states


def _finetune(stage1_dir: Path, pairs, facts, cfg: FactStageConfig, *, window_tokens, seed, threads, bf16, log, label,
              states=None):
    from .facts import finetune_facts

    model = _load(stage1_dir)
    train = [(pairs[i], f.label) for i, f in facts]
    report = finetune_facts(model, _tokenizer(stage1_dir, window_tokens), train, epochs=cfg.epochs, lr=cfg.lr,
                            facts_per_batch=cfg.facts_per_batch, seed=seed, threads=threads, bf16=bf16,
                            log=lambda m: log(f"{label}: {m}"), frozen_layers=cfg.frozen_layers,
                            states=None if states is None else [states[i] for i, _ in facts])
    return model, report


def cross_fit(ex, stage1_dir: Path, pairs, cfg: FactStageConfig, folds: dict[str, int], *, bundle, store, cache, seed: int,
              threads: int, bf16: bool, k: int, window_tokens: int, passages: int, log=print, states=None) -> list[dict]:
    """One model per (held-out LM, topic fold), fine-tuned on the human facts of the other LMs' bios
    of the other folds' topics, scoring every fact of its fold. Each fact's ``ce_*`` features in
    ``ex.features`` become the scores of the model that held out its topic and its own LM, and
    ``ex.held_lm_features[lm]`` every fact as the models that held ``lm`` out scored it. Returns a
    report per model."""
    from fscore_lite.errors import FscoreError
    from fscore_lite.manifest import Bundle
    from fscore_lite.training.examples import featurise, worker_pool

    from ..export import export_model
    from .torch_train import save_checkpoint

    lms = list(dict.fromkeys(b.subject for b in ex.bios))
    if len(lms) < 2:
        raise FscoreError(f"the fact stage holds each LM out of its own cross-encoder: it needs the labelled bios of "
                          f"at least two LMs, not {', '.join(lms) or 'none'}")
    lm_of = lambda f: ex.bios[f.bio].subject  # noqa: E731
    scored = {lm: {kind: [None] * len(ex.facts_of(kind)) for kind in ex.kinds} for lm in lms}
    reports = []
    n_folds = max(folds.values()) + 1
    for lm in lms:
        for fold in range(n_folds):
            t = time.monotonic()
            label = f"facts without {lm}, fold {fold}"
            train = [(i, f) for i, f in enumerate(ex.human) if folds[f.topic] != fold and lm_of(f) != lm]
            model, loop = _finetune(stage1_dir, pairs["human"], train, cfg, window_tokens=window_tokens, seed=seed,
                                    threads=threads, bf16=bf16, log=log, label=label, states=states)
            work = Path(tempfile.mkdtemp(prefix=f".fact-fold{fold}-"))
            try:
                ckpt = save_checkpoint(model, stage1_dir, work / "checkpoint")
                entry = export_model("nli", ckpt, work / "bundle", name=f"fact-fold{fold}", per_channel=True,
                                     threads=threads, license="build-step intermediate", log=lambda m: None)
                held = {kind: [i for i, f in enumerate(ex.facts_of(kind)) if folds[f.topic] == fold] for kind in ex.kinds}
                sub = ex.subset(held)
                pool = worker_pool(Bundle(work / "bundle"), store, entry, cache, threads, k, window_tokens, passages,
                                   embed_bundle=bundle)
                featurise(sub, *pool[0], None, more=pool[1:])
                for kind in ex.kinds:
                    for i, row in zip(held[kind], sub.features[kind]):
                        scored[lm][kind][i] = {key: row[key] for key in CE_FEATURES}
            finally:
                shutil.rmtree(work, ignore_errors=True)
            reports.append({"held_out_lm": lm, "fold": fold, "train_facts": len(train),
                            "held_out_facts": sum(map(len, held.values())), "steps": loop.steps,
                            "seconds": round(time.monotonic() - t, 1)})
            log(f"{label}: {len(train)} training facts, {reports[-1]['seconds']:.0f} s")
    ex.set_held_lm_scores(lms, lambda lm, kind, i: scored[lm][kind][i])
    return reports


def final_model(ex, stage1_dir: Path, pairs, cfg: FactStageConfig, *, window_tokens, seed, threads, bf16, log=print,
                states=None):
    """The cross-encoder installed for run time: stage 1 continued on every training fact."""
    return _finetune(stage1_dir, pairs["human"], list(enumerate(ex.human)), cfg, window_tokens=window_tokens, seed=seed,
                     threads=threads, bf16=bf16, log=log, label="facts (all)", states=states)


def graph_checks(model, bundle, entry, pairs, threads: int, window_tokens: int) -> dict:
    """The installed fact model's fp32 graph vs torch (max |Δlogit|) and int8 vs fp32 (agreement of
    the entailment log-odds' sign) on a fixed set of training pairs."""
    from fscore_lite.backends.cross_encoder import CrossEncoder
    from fscore_lite.backends.onnx_base import bundle_files

    from .torch_train import predict_logits

    logits = {}
    for precision in ("fp32", "int8"):
        files = bundle_files(bundle, entry, precision)
        ce = CrossEncoder(files["weights"], files["tokenizer"], files.get("config"), name=entry.name,
                          sha256=files["sha256"], threads=threads, max_length=window_tokens)
        logits[precision] = np.concatenate([ce.logits_batch(pairs[i : i + 64]) for i in range(0, len(pairs), 64)])
    torch_z = predict_logits(model, ce._pair_tok, pairs[:64], bf16=False)

    def entail(z):
        return z[:, 0] - np.logaddexp(z[:, 1], z[:, 2])

    return {"fp32_onnx_vs_torch_max_abs_diff": float(np.max(np.abs(torch_z - logits["fp32"][:64]))),
            "int8_vs_fp32_entailment_sign_agreement": round(float(np.mean(
                (entail(logits["int8"]) > 0) == (entail(logits["fp32"]) > 0))), 5),
            "onnx_check_pairs": len(pairs)}


def write_oof(ex, dest: Path, bundle_root: Path) -> ModelFile:
    """Record every training fact's out-of-fold ``ce_*`` features for every held-out LM (one line
    per LM and distinct topic and fact, in a fixed order) as a bundle file of kind ``oof_scores``."""
    rows: dict[tuple[str, str, str], dict] = {}
    for lm, view in sorted(ex.held_lm_features.items()):
        for kind in ex.kinds:
            for f, feats in zip(ex.facts_of(kind), view[kind]):
                rows.setdefault((lm, f.topic, f.text), {key: feats[key] for key in CE_FEATURES})
    dest.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"held_lm": lm, "topic": t, "fact": x, **v}, ensure_ascii=False, sort_keys=True) + "\n"
             for (lm, t, x), v in sorted(rows.items())]
    with open(dest, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        gz.write("".join(lines).encode("utf-8"))
    return describe_file(bundle_root, str(dest.relative_to(bundle_root)), OOF_KIND)


def run(ex, stage1_dir: Path, pool, cfg, *, bundle_dir: Path, store, cache, bf16: bool, license: str, log=print):
    """The whole stage for the build: cross-fitted scores into ``ex.features``, then the run-time
    model exported (int8 + fp32) into ``bundle_dir/<cfg.name>`` with the recorded out-of-fold
    scores beside it. Returns (the exported entry with the scores file among its files, report)."""
    import os

    from fscore_lite.manifest import Bundle, ModelEntry
    from fscore_lite.training.examples import topic_folds

    from ..export import export_model
    from .torch_train import save_checkpoint, state_sha256

    fs: FactStageConfig = cfg.fact_stage
    retriever, verifier = pool[0]
    pairs = fact_pairs(ex, retriever, verifier.builder)
    common = {"seed": cfg.seed, "threads": cfg.threads, "bf16": bf16}
    t = time.monotonic()
    states = lower_layer_states(stage1_dir, pairs, fs, window_tokens=cfg.window_tokens, log=log, **common)
    states_s = round(time.monotonic() - t, 1)
    folds = cross_fit(ex, stage1_dir, pairs, fs, topic_folds(ex.topics, cfg.folds), bundle=Bundle(bundle_dir),
                      store=store, cache=cache,
                      k=cfg.k, window_tokens=cfg.window_tokens, passages=cfg.ce_passages, log=log, states=states, **common)
    t = time.monotonic()
    model, loop = final_model(ex, stage1_dir, pairs, fs, window_tokens=cfg.window_tokens, log=log, states=states,
                              **common)
    final = {"train_facts": len(ex.human), "steps": loop.steps, "seconds": round(time.monotonic() - t, 1),
             "weights_sha256": state_sha256(model)}
    work = Path(tempfile.mkdtemp(prefix=".fact-stage-", dir=bundle_dir))
    try:
        ckpt = save_checkpoint(model, stage1_dir, work / "checkpoint")
        entry = export_model("nli", ckpt, work / "bundle", name=cfg.name, keep_fp32=True, per_channel=True,
                             threads=cfg.threads, license=license, log=log)
        checks = graph_checks(model, Bundle(work / "bundle"), entry, [p for pl in pairs["human"][:256] for p in pl],
                              cfg.threads, cfg.window_tokens)
        oof = write_oof(ex, work / "bundle" / cfg.name / OOF_FILE, work / "bundle")
        target = bundle_dir / cfg.name
        if target.exists():
            shutil.rmtree(target)
        os.replace(work / "bundle" / cfg.name, target)  # the files' paths stay <name>/<file>
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"fact stage: {json.dumps(checks)}")
    entry = ModelEntry(**{**entry.__dict__, "files": (*entry.files, oof)})
    return entry, {"config": {**fs.__dict__}, "lower_states_s": states_s, "folds": folds, "final": final,
                   "graph_checks": checks}
