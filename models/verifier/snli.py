"""Stage 1: an NLI cross-encoder from a sentence encoder trained on SNLI (3 labels).

The encoder is all-MiniLM-L6-v2 (``--encoder minilm``, the default) or all-mpnet-base-v2
(``--encoder mpnet``); the head is new (``*ForSequenceClassification`` on the encoder); labels are
``entailment, neutral, contradiction`` in that logit order, recorded in ``config.json``.
Pairs are (premise, hypothesis) with SNLI's gold label; pairs without one ("-") are dropped.
Batches are cut from length-sorted chunks (less padding), in an order fixed by the seed.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

LABELS = ("entailment", "neutral", "contradiction")


@dataclass
class SnliConfig:
    pairs: int = 75_000  # training pairs, a seeded sample of the 100,000 shipped
    max_length: int = 64
    epochs: float = 1.0
    batch_size: int = 64
    lr: float = 1.6e-4
    # dropout in the encoder and head; 0 since recipe 4: one epoch does not overfit, and drawing
    # the masks was slow (docs/BENCHMARKS.md, recipe 4 against recipe 3)
    dropout: float = 0.0
    test_pairs: int = 10_000  # the full SNLI test set


def read_snli(path: Path) -> list[tuple[str, str, int]]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if d.get("gold_label") in LABELS:
                out.append((d["sentence1"], d["sentence2"], LABELS.index(d["gold_label"])))
    return out


def batches_by_length(examples, tokenizer, batch_size: int, seed: int, epochs: float, pad_id: int = 0):
    """Encoded batches: shuffle, sort chunks of 50 batches by length, shuffle the batches."""
    from fscore_lite.backends.cross_encoder import encode_pairs

    from .torch_train import tensors

    rng = np.random.RandomState(seed)
    total = int(round(epochs * len(examples)))
    order: list[int] = []
    while len(order) < total:
        order.extend(rng.permutation(len(examples)).tolist())
    order = order[:total]
    chunk = batch_size * 50
    batches = []
    for c in range(0, len(order), chunk):
        idx = sorted(order[c : c + chunk], key=lambda i: (len(examples[i][0]) + len(examples[i][1]), i))
        batches.extend(idx[b : b + batch_size] for b in range(0, len(idx), batch_size))
    for j in rng.permutation(len(batches)).tolist():
        b = batches[j]
        feeds = encode_pairs(tokenizer, [(examples[i][0], examples[i][1]) for i in b], pad_id)
        yield tensors(feeds, [examples[i][2] for i in b])


def new_model(checkpoint: Path, dropout: float = 0.0):
    """The encoder with a new 3-label head. Eager attention: on the CPU torch's fused attention (``sdpa``)
    was slower for the backward pass of these short pairs (docs/BENCHMARKS.md, recipe 4)."""
    from transformers import AutoModelForSequenceClassification

    return AutoModelForSequenceClassification.from_pretrained(
        str(checkpoint), num_labels=3, id2label=dict(enumerate(LABELS)), label2id={n: i for i, n in enumerate(LABELS)},
        hidden_dropout_prob=float(dropout), attention_probs_dropout_prob=float(dropout), attn_implementation="eager")


def train_snli(checkpoint: Path, files: dict[str, Path], cfg: SnliConfig, *, seed: int, threads: int, bf16: bool,
               log=print):
    """Train; return (model, report dict with the SNLI test accuracy)."""
    from tokenizers import Tokenizer

    from fscore_lite.backends.cross_encoder import pair_tokenizer

    from .torch_train import load_torch, model_inputs, pad_id_of, predict_logits, seed_everything, train_loop

    seed_everything(seed, threads)
    torch = load_torch()
    tok = pair_tokenizer(Tokenizer.from_file(str(checkpoint / "tokenizer.json")), cfg.max_length)
    train = read_snli(files["train"])
    rng = np.random.RandomState(seed)
    sample = [train[i] for i in sorted(rng.permutation(len(train))[: cfg.pairs].tolist())]
    model = new_model(checkpoint, cfg.dropout)
    model.base_model.embeddings.word_embeddings.weight.requires_grad_(False)
    steps = int(np.ceil(cfg.epochs * len(sample) / cfg.batch_size))

    def loss_fn(m, batch):
        return m(**model_inputs(m, batch)).loss

    batches = batches_by_length(sample, tok, cfg.batch_size, seed, cfg.epochs, pad_id_of(model))
    loop = train_loop(model, batches, loss_fn, lr=cfg.lr,
                      steps_total=steps, bf16=bf16, log=log, label="snli")
    test = read_snli(files["test"])[: cfg.test_pairs]
    with torch.no_grad():
        z = predict_logits(model, tok, [(a, b) for a, b, _ in test], bf16=bf16)
    acc = float(np.mean(z.argmax(1) == np.asarray([y for *_, y in test])))
    log(f"snli: test accuracy {100 * acc:.2f}% on {len(test)} pairs ({loop.seconds:.0f} s training)")
    report = {"train_pairs": len(sample), "test_pairs": len(test), "test_accuracy": round(acc, 5),
              "steps": loop.steps, "seconds": loop.seconds, "final_loss": loop.final_loss, "bf16": bf16}
    return model, report
