"""Experiment: does continuing the SNLI cross-encoder on labelled facts pay, with the LM held out?

``python -m bench.verifier_finetune [--epochs 1] [--lr 3e-5] [--frozen 4] [--folds 5]`` (after
``fscore-lite models train verifier``, whose call cache makes retrieval free here). The SNLI model is
retrained with the build's settings (deterministic: the build's stage 1), then cross-fitted over
cells of (LM, topic fold): the copy for a cell is fine-tuned (:mod:`fscore_lite_models.verifier.facts`,
the runtime's own pairs) on every labelled fact — human facts and the silver-labelled paper and own
facts — of the bios of the *other* LMs and the *other* folds' topics, and scores the cell's facts.
The held-out figures (:mod:`fscore_lite.training.heldout`, the LM held out) are then computed on
those scores beside the same figures on the SNLI model's own scores. Not part of any build: its
15 fine-tunes take tens of minutes.
"""
from __future__ import annotations

import argparse
import copy
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=3e-5)
    ap.add_argument("--frozen", type=int, default=4, help="lower encoder layers kept as stage 1 left them")
    a = ap.parse_args()

    from transformers import BertForSequenceClassification

    from fscore_lite.backends.cross_encoder import pair_tokenizer
    from fscore_lite.build_step import shipped_own_facts
    from fscore_lite.factscore.trained import PairBuilder, ce_features
    from fscore_lite.manifest import Bundle
    from fscore_lite.settings import Settings
    from fscore_lite.training.examples import topic_folds
    from fscore_lite.training.fit import FitSettings
    from fscore_lite.training.heldout import held_out_responses, subject_rows
    from fscore_lite.training.prepare import prepare_examples
    from fscore_lite_models.verifier.build import VerifierConfig
    from fscore_lite_models.verifier.facts import finetune_facts, lower_states, torch_fact_logits
    from fscore_lite_models.verifier.snli import train_snli
    from fscore_lite_models.verifier.sources import minilm_checkpoint, shipped_data, snli_files
    from fscore_lite_models.verifier.torch_train import cpu_has_bf16
    from tokenizers import Tokenizer

    cfg = VerifierConfig()
    s = Settings(threads=cfg.threads)
    bundle = Bundle(s.models_dir)
    verifier = bundle.first_for_role("verifier")
    nli = bundle.get(verifier.extra["nli_model"])
    data = shipped_data(s.home / "build" / "factscore-dev")
    ex, pool, fitted_for, *_ = prepare_examples(data, s, bundle, nli, shipped_own_facts(None), cfg.k, cfg.window_tokens,
                                                cfg.ce_passages)
    fit = FitSettings(tuple(verifier.extra["combiner"]["features"]), cfg.l2)
    kinds = [k for k in ex.kinds if k != "human"]

    def report(label: str) -> None:
        responses = held_out_responses(ex, kinds, fit, "lm", a.folds, fitted_for)
        for kind in kinds:
            print(f"{label:<24}{kind:<14}" + " | ".join(
                f"{r['subject']} {r['estimate']:.1f}/{r['human']:.1f} ER {r['er']:.1f} MAE {r['per_bio_mae']:.1f}"
                for r in subject_rows(ex, responses[kind])), flush=True)

    report("SNLI cross-encoder")
    ckpt = minilm_checkpoint(s.home)
    tok = Tokenizer.from_file(str(ckpt / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    builder = PairBuilder(lambda t: len(tok.encode(t, add_special_tokens=False).ids), cfg.window_tokens, cfg.ce_passages)
    ptok = pair_tokenizer(tok, cfg.window_tokens)
    retriever = pool[0][0]
    pairs = {k: [builder.pairs(f.text, retriever.retrieve(f.topic, f.text)) for f in ex.facts_of(k)] for k in ex.kinds}
    bf16 = cpu_has_bf16()
    t = time.monotonic()
    base, _ = train_snli(ckpt, snli_files(s.home), cfg.snli, seed=cfg.seed, threads=cfg.threads, bf16=bf16,
                         log=lambda m: None)
    base.save_pretrained("/tmp/fscore-lite-stage1")
    base = BertForSequenceClassification.from_pretrained("/tmp/fscore-lite-stage1", attn_implementation="eager")
    base.bert.embeddings.word_embeddings.weight.requires_grad_(False)
    print(f"stage 1: {time.monotonic() - t:.0f} s", flush=True)
    labelled = [(k, i) for k in ex.kinds for i, f in enumerate(ex.facts_of(k)) if f.label is not None]
    states = lower_states(base, ptok, [pairs[k][i] for k, i in labelled], a.frozen, bf16) if a.frozen else None
    fold_of = topic_folds(ex.topics, a.folds)
    cell = lambda b: (ex.bios[b].subject, fold_of[ex.bios[b].topic])  # noqa: E731
    labels_ce = ["entailment", "neutral", "contradiction"]
    for subject in dict.fromkeys(b.subject for b in ex.bios):
        for fold in range(a.folds):
            t = time.monotonic()
            train = [j for j, (k, i) in enumerate(labelled)
                     if cell(ex.facts_of(k)[i].bio)[0] != subject and cell(ex.facts_of(k)[i].bio)[1] != fold]
            model = copy.deepcopy(base)
            finetune_facts(model, ptok, [(pairs[labelled[j][0]][labelled[j][1]],
                                          bool(ex.facts_of(labelled[j][0])[labelled[j][1]].label)) for j in train],
                           epochs=a.epochs, lr=a.lr, facts_per_batch=16, seed=cfg.seed, threads=cfg.threads, bf16=bf16,
                           log=lambda m: None, frozen_layers=a.frozen,
                           states=None if states is None else [states[j] for j in train])
            for k in ex.kinds:
                idx = [i for i, f in enumerate(ex.facts_of(k)) if cell(f.bio) == (subject, fold)]
                for i, z in zip(idx, torch_fact_logits(model, ptok, [pairs[k][i] for i in idx], bf16)):
                    if len(z):
                        ex.features[k][i].update(ce_features(z, labels_ce)[0])
            print(f"cell {subject} fold {fold}: {len(train)} training facts, {time.monotonic() - t:.0f} s", flush=True)
    report("fine-tuned, LM held out")


if __name__ == "__main__":
    main()
