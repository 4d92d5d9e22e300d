"""Optional stage: the NLI cross-encoder continued on (atomic fact, evidence) pairs.

Each human fact labelled S or NS contributes its k (window, fact) pairs, exactly the pairs the
runtime scores (:class:`fscore_lite.factscore.trained.PairBuilder` over the same retrieval).
Multiple-instance loss: the fact's logit is the log-mean-exp of its passages' entailment
log-odds, trained with binary cross-entropy against S (1) / NS (0); the 3-label head is kept,
so the model stays an NLI model in form.
"""
from __future__ import annotations

import math

import numpy as np


def entail_logodds(logits, labels=(0, 1, 2)):
    import torch

    e, n, c = labels
    return logits[..., e] - torch.logaddexp(logits[..., n], logits[..., c])


def fact_batches(examples, tokenizer, facts_per_batch: int, seed: int, epochs: float):
    """Batches of whole facts: ``input_ids`` etc. over all their pairs, ``owner`` (pair → fact
    index in the batch) and ``labels`` (per fact)."""
    import torch

    from fscore_lite.backends.cross_encoder import encode_pairs

    rng = np.random.RandomState(seed)
    total = int(round(epochs * len(examples)))
    order: list[int] = []
    while len(order) < total:
        order.extend(rng.permutation(len(examples)).tolist())
    for b in range(0, total, facts_per_batch):
        idx = order[b : b + facts_per_batch]
        pairs, owner = [], []
        for j, i in enumerate(idx):
            pairs += examples[i][0]
            owner += [j] * len(examples[i][0])
        feeds = {k: torch.from_numpy(v) for k, v in encode_pairs(tokenizer, pairs).items()}
        feeds["owner"] = torch.as_tensor(owner)
        feeds["labels"] = torch.as_tensor([float(examples[i][1]) for i in idx])
        yield feeds


def finetune_facts(model, tokenizer, examples: list[tuple[list[tuple[str, str]], bool]], *, epochs: float, lr: float,
                   facts_per_batch: int, seed: int, threads: int, bf16: bool, log=print):
    """Continue ``model`` (a 3-label NLI classifier, entailment first) on fact examples."""
    import torch

    from .torch_train import seed_everything, train_loop

    seed_everything(seed, threads)
    examples = [e for e in examples if e[0]]
    steps = math.ceil(epochs * len(examples) / facts_per_batch)

    def loss_fn(m, batch):
        owner = batch["owner"]
        z = entail_logodds(m(**{k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}).logits.float())
        n = batch["labels"].shape[0]
        # log-mean-exp of each fact's passage log-odds
        mx = torch.full((n,), -1e4).scatter_reduce(0, owner, z, reduce="amax")
        s = torch.zeros(n).index_add(0, owner, torch.exp(z - mx[owner]))
        cnt = torch.zeros(n).index_add(0, owner, torch.ones_like(z))
        fact_logit = mx + torch.log(s / cnt)
        return torch.nn.functional.binary_cross_entropy_with_logits(fact_logit, batch["labels"])

    return train_loop(model, fact_batches(examples, tokenizer, facts_per_batch, seed, epochs), loss_fn, lr=lr,
                      steps_total=steps, bf16=bf16, log=log, label="facts")


def torch_fact_logits(model, tokenizer, pair_lists: list[list[tuple[str, str]]], bf16: bool, facts_per_batch: int = 32):
    """Per fact, the [k, 3] logits of its pairs (torch; for out-of-fold features)."""
    import torch

    from fscore_lite.backends.cross_encoder import encode_pairs

    out: list[np.ndarray] = []
    model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        for b in range(0, len(pair_lists), facts_per_batch):
            chunk = pair_lists[b : b + facts_per_batch]
            flat = [p for pl in chunk for p in pl]
            if not flat:
                out += [np.zeros((0, 3), np.float32)] * len(chunk)
                continue
            z = model(**{k: torch.from_numpy(v) for k, v in encode_pairs(tokenizer, flat).items()}).logits.float().numpy()
            i = 0
            for pl in chunk:
                out.append(z[i : i + len(pl)])
                i += len(pl)
    return out
