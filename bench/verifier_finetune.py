"""Experiment: does continuing the SNLI cross-encoder on (fact, evidence) pairs pay?

``python -m bench.verifier_finetune --folds 5 --epochs 1 --lr 3e-5`` (after ``fscore-lite models
train verifier``, whose call cache makes retrieval free here). Topic-grouped folds: in each, the
SNLI model (retrained with the build's default settings — deterministic, so the same model)
is fine-tuned on the other folds' human facts (:mod:`fscore_lite_models.verifier.facts`, the
runtime's own pairs) and scores the held-out facts; the combiner (the default's features:
cross-encoder summaries, page features, position; PACC share) is then cross-validated on those
out-of-fold features with the same folds, beside the same combiner on the SNLI model's own
scores (what the default build does, here in torch) and the fine-tuned cross-encoder alone.
Prints one line per subject and variant. Not part of the default build: stacking needs K+1
fine-tunes, which do not fit the build's 10 minutes next to the SNLI stage.
"""
from __future__ import annotations

import argparse
import copy
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--folds", type=int, default=2)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=3e-5)
    a = ap.parse_args()

    from tokenizers import Tokenizer
    from transformers import BertForSequenceClassification

    from fscore_lite.backends.cross_encoder import pair_tokenizer
    from fscore_lite.backends.embed import SentenceEmbedder
    from fscore_lite.cache import CallCache
    from fscore_lite.factscore.page_features import FEATURES, PageIndex, fact_features
    from fscore_lite.factscore.retrieve import Retriever
    from fscore_lite.factscore.trained import CE_FEATURES, POSITION_FEATURES, PairBuilder, ce_features, page_text
    from fscore_lite.manifest import Bundle
    from fscore_lite.build_step import ensure_store
    from fscore_lite.training.combiner_cv import cross_validate, per_subject
    from fscore_lite.training.examples import fact_positions, load_examples, topic_folds
    from fscore_lite.training.labeled import wiki_pages
    from fscore_lite.settings import Settings
    from fscore_lite.store import open_store
    from fscore_lite_models.verifier.build import VerifierConfig
    from fscore_lite_models.verifier.facts import finetune_facts, torch_fact_logits
    from fscore_lite_models.verifier.snli import train_snli
    from fscore_lite_models.verifier.sources import minilm_checkpoint, shipped_data, snli_files
    from fscore_lite_models.verifier.torch_train import cpu_has_bf16

    cfg = VerifierConfig()
    s = Settings(threads=cfg.threads)
    data = shipped_data(s.home / "build" / "factscore-dev")
    pages, files = wiki_pages(data)
    store = open_store(ensure_store(files, s, None))
    bundle = Bundle(s.models_dir)
    cache = CallCache(s.cache_path)
    retriever = Retriever(store, SentenceEmbedder.from_bundle(bundle, store.embed_model, cfg.threads), cfg.k, False, cache)
    ckpt = minilm_checkpoint(s.home)
    tok = Tokenizer.from_file(str(ckpt / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    builder = PairBuilder(lambda t: len(tok.encode(t, add_special_tokens=False).ids), cfg.window_tokens, cfg.ce_passages)
    ptok = pair_tokenizer(tok, cfg.window_tokens)
    ex = load_examples(data, pages)
    kinds = ("human", "model")
    evidence = {k: [retriever.retrieve(f.topic, f.text) for f in getattr(ex, k)] for k in kinds}
    pairs = {k: [builder.pairs(f.text, e) for f, e in zip(getattr(ex, k), evidence[k])] for k in kinds}
    page = {t: PageIndex.build(t, page_text(store, t)) for t in ex.topics}
    pfeat = {k: [fact_features(f.text, page[f.topic], [x.passage.text for x in e])
                 for f, e in zip(getattr(ex, k), evidence[k])] for k in kinds}
    for (k, i), p in fact_positions(ex).items():  # as `featurise` computes it
        pfeat[k][i]["position"] = p
    bf16 = cpu_has_bf16()
    base, _ = train_snli(ckpt, snli_files(s.home), cfg.snli, seed=cfg.seed, threads=cfg.threads, bf16=bf16,
                         log=lambda m: None)
    base.save_pretrained("/tmp/fscore-lite-stage1")
    base = BertForSequenceClassification.from_pretrained("/tmp/fscore-lite-stage1", attn_implementation="eager")
    folds = topic_folds(ex.topics, a.folds)
    snli_scores = {k: torch_fact_logits(base, ptok, pairs[k], bf16) for k in kinds}
    oof: dict = {k: [None] * len(getattr(ex, k)) for k in kinds}
    for fold in range(a.folds):
        t = time.monotonic()
        model = copy.deepcopy(base)
        model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
        train = [(pairs["human"][i], f.label) for i, f in enumerate(ex.human) if folds[f.topic] != fold]
        finetune_facts(model, ptok, train, epochs=a.epochs, lr=a.lr, facts_per_batch=16, seed=cfg.seed,
                       threads=cfg.threads, bf16=bf16, log=lambda m: None)
        for k in kinds:
            idx = [i for i, f in enumerate(getattr(ex, k)) if folds[f.topic] == fold]
            for i, z in zip(idx, torch_fact_logits(model, ptok, [pairs[k][i] for i in idx], bf16)):
                oof[k][i] = z
        print(f"fold {fold}: {time.monotonic() - t:.0f} s", flush=True)
    labels = ["entailment", "neutral", "contradiction"]
    default = CE_FEATURES + FEATURES + POSITION_FEATURES
    for name, scores, feats in (("SNLI CE + page (default)", snli_scores, default),
                                ("fine-tuned CE + page", oof, default), ("fine-tuned CE alone", oof, CE_FEATURES)):
        for k in kinds:
            ex.features[k] = [{**ce_features(z, labels)[0], **p} for z, p in zip(scores[k], pfeat[k])]
        for r in per_subject(ex, cross_validate(ex, feats, a.folds, cfg.l2, adjust=True)):
            print(f"{name:<26}{r['subject']:<14} human {r['human']:.1f} est {r['estimated']:.1f} "
                  f"ER {r['error_rate']:.1f} F1(NS) {100 * r['f1_ns']:.1f}", flush=True)


if __name__ == "__main__":
    main()
