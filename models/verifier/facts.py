"""Optional stage: the NLI cross-encoder continued on (atomic fact, evidence) pairs.

Each human fact labelled S or NS contributes its k (window, fact) pairs, exactly the pairs the
runtime scores (:class:`fscore_lite.factscore.trained.PairBuilder` over the same retrieval).
Multiple-instance loss: the fact's logit is the log-mean-exp of its passages' entailment
log-odds, trained with binary cross-entropy against S (1) / NS (0); the 3-label head is kept,
so the model stays an NLI model in form.

With ``frozen_layers`` = F > 0 only the encoder layers above F (and the pooler and head) learn:
the embeddings and the lower F layers are stage 1's, so their output for every training pair is
computed once (:func:`lower_states`) and every fine-tune of the cross-fitting starts from it —
each step runs only the upper layers. The exported model is the whole network as usual.
"""
from __future__ import annotations

import math

import numpy as np


def entail_logodds(logits, labels=(0, 1, 2)):
    import torch

    e, n, c = labels
    return logits[..., e] - torch.logaddexp(logits[..., n], logits[..., c])


def _batch_order(n: int, facts_per_batch: int, seed: int, epochs: float):
    """The facts of each batch: seeded permutations, one after another, cut after ``epochs`` passes."""
    rng = np.random.RandomState(seed)
    total = int(round(epochs * n))
    order: list[int] = []
    while len(order) < total:
        order.extend(rng.permutation(n).tolist())
    for b in range(0, total, facts_per_batch):
        yield order[b : b + facts_per_batch]


def fact_batches(examples, tokenizer, facts_per_batch: int, seed: int, epochs: float):
    """Batches of whole facts: ``input_ids`` etc. over all their pairs, ``owner`` (pair → fact
    index in the batch) and ``labels`` (per fact)."""
    import torch

    from fscore_lite.backends.cross_encoder import encode_pairs

    for idx in _batch_order(len(examples), facts_per_batch, seed, epochs):
        pairs, owner = [], []
        for j, i in enumerate(idx):
            pairs += examples[i][0]
            owner += [j] * len(examples[i][0])
        feeds = {k: torch.from_numpy(v) for k, v in encode_pairs(tokenizer, pairs).items()}
        feeds["owner"] = torch.as_tensor(owner)
        feeds["labels"] = torch.as_tensor([float(examples[i][1]) for i in idx])
        yield feeds


def _per_fact(model, tokenizer, pair_lists, bf16: bool, facts_per_batch: int, run) -> list[dict | None]:
    """``run(feeds)`` (a dict of tensors with one row per pair) over chunks of facts, without
    gradients; per fact, its rows of every tensor, or None for a fact without pairs."""
    import torch

    from fscore_lite.backends.cross_encoder import encode_pairs

    out: list[dict | None] = []
    model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        for b in range(0, len(pair_lists), facts_per_batch):
            chunk = pair_lists[b : b + facts_per_batch]
            flat = [p for pl in chunk for p in pl]
            rows = run({k: torch.from_numpy(v) for k, v in encode_pairs(tokenizer, flat).items()}) if flat else {}
            i = 0
            for pl in chunk:
                out.append({k: v[i : i + len(pl)] for k, v in rows.items()} if pl else None)
                i += len(pl)
    return out


def lower_states(model, tokenizer, pair_lists: list[list[tuple[str, str]]], frozen_layers: int, bf16: bool,
                 facts_per_batch: int = 32) -> list[tuple | None]:
    """Per fact, the output of the embeddings and the first ``frozen_layers`` encoder layers for
    its pairs — (hidden [k, T, H], attention_mask [k, T]) trimmed to the fact's own longest pair —
    or None for a fact without pairs."""

    def run(feeds):
        h = model.bert.embeddings(input_ids=feeds["input_ids"], token_type_ids=feeds["token_type_ids"])
        return {"h": _run_layers(model, h, feeds["attention_mask"], 0, frozen_layers), "mask": feeds["attention_mask"]}

    out: list[tuple | None] = []
    for rows in _per_fact(model, tokenizer, pair_lists, bf16, facts_per_batch, run):
        width = int(rows["mask"].sum(1).max()) if rows else 0
        out.append((rows["h"][:, :width].clone(), rows["mask"][:, :width].clone()) if rows else None)
    return out


def _run_layers(model, hidden, mask, start: int, stop: int):
    ext = model.get_extended_attention_mask(mask, tuple(mask.shape))
    for layer in model.bert.encoder.layer[start:stop]:
        hidden = layer(hidden, attention_mask=ext)
        hidden = hidden[0] if isinstance(hidden, tuple) else hidden
    return hidden


def upper_logits(model, hidden, mask, frozen_layers: int):
    """The classifier's logits from the lower layers' output (the rest of the forward pass)."""
    h = _run_layers(model, hidden, mask, frozen_layers, len(model.bert.encoder.layer))
    return model.classifier(model.dropout(model.bert.pooler(h)))


def state_batches(examples, states, facts_per_batch: int, seed: int, epochs: float):
    """As :func:`fact_batches`, from :func:`lower_states` (``hidden``, ``attention_mask`` padded
    to the batch's longest pair)."""
    import torch

    for idx in _batch_order(len(examples), facts_per_batch, seed, epochs):
        parts = [states[i] for i in idx]
        width = max(m.shape[1] for _, m in parts)
        hidden = torch.cat([torch.nn.functional.pad(h, (0, 0, 0, width - h.shape[1])) for h, _ in parts])
        mask = torch.cat([torch.nn.functional.pad(m, (0, width - m.shape[1])) for _, m in parts])
        owner = torch.cat([torch.full((m.shape[0],), j) for j, (_, m) in enumerate(parts)])
        yield {"hidden": hidden, "attention_mask": mask, "owner": owner,
               "labels": torch.as_tensor([float(examples[i][1]) for i in idx])}


def finetune_facts(model, tokenizer, examples: list[tuple[list[tuple[str, str]], bool]], *, epochs: float, lr: float,
                   facts_per_batch: int, seed: int, threads: int, bf16: bool, log=print, frozen_layers: int = 0,
                   states: list | None = None):
    """Continue ``model`` (a 3-label NLI classifier, entailment first) on fact examples. With
    ``frozen_layers`` > 0, ``states`` (:func:`lower_states` of the same model, one per example)
    stand for the frozen lower part."""
    import torch

    from .torch_train import seed_everything, train_loop

    seed_everything(seed, threads)
    if frozen_layers and (states is None or len(states) != len(examples)):
        raise ValueError("frozen_layers needs the lower layers' states of every example")
    keep = [i for i, e in enumerate(examples) if e[0]]  # facts without evidence teach nothing
    examples = [examples[i] for i in keep]
    if frozen_layers:
        states = [states[i] for i in keep]
        for module in (model.bert.embeddings, *model.bert.encoder.layer[:frozen_layers]):
            module.requires_grad_(False)
    steps = math.ceil(epochs * len(examples) / facts_per_batch)

    def loss_fn(m, batch):
        owner = batch["owner"]
        if frozen_layers:
            z = entail_logodds(upper_logits(m, batch["hidden"], batch["attention_mask"], frozen_layers).float())
        else:
            z = entail_logodds(m(**{k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}).logits.float())
        n = batch["labels"].shape[0]
        # log-mean-exp of each fact's passage log-odds
        mx = torch.full((n,), -1e4).scatter_reduce(0, owner, z, reduce="amax")
        s = torch.zeros(n).index_add(0, owner, torch.exp(z - mx[owner]))
        cnt = torch.zeros(n).index_add(0, owner, torch.ones_like(z))
        fact_logit = mx + torch.log(s / cnt)
        return torch.nn.functional.binary_cross_entropy_with_logits(fact_logit, batch["labels"])

    batches = (state_batches(examples, states, facts_per_batch, seed, epochs) if frozen_layers
               else fact_batches(examples, tokenizer, facts_per_batch, seed, epochs))
    return train_loop(model, batches, loss_fn, lr=lr, steps_total=steps, bf16=bf16, log=log, label="facts")


def torch_fact_logits(model, tokenizer, pair_lists: list[list[tuple[str, str]]], bf16: bool, facts_per_batch: int = 32):
    """Per fact, the [k, 3] logits of its pairs (torch; for out-of-fold features)."""
    rows = _per_fact(model, tokenizer, pair_lists, bf16, facts_per_batch, lambda feeds: {"z": model(**feeds).logits.float()})
    return [r["z"].numpy() if r else np.zeros((0, 3), np.float32) for r in rows]
