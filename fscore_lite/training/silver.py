"""Silver labels: a model-made fact of a training bio takes the label of its closest human fact.

The facts ``score`` verifies are made by a model (the default decomposer's, or the paper's
InstructGPT facts given in the input), and people labelled other facts of the same bios: their
own atomic facts, sentence by sentence. A model-made fact is matched, by the cosine of the
store's sentence embedder, to the most similar fact of its own bio's annotation — a human fact
of a relevant sentence (S supported; NS and IR not, as FActScore counts them) or a model fact of
a sentence the annotators marked irrelevant (not supported, FActScore's convention) — and takes
its label. The verifier is then trained and calibrated on the kind of facts it actually sees.

How good the labels are is measured where it can be: a bio's share of silver-supported facts
against its human FActScore (``agreement``; docs/VERIFIER.md gives the figures).
"""
from __future__ import annotations

import numpy as np

from .labeled import AnnotatedBio


def label_pool(bio: AnnotatedBio) -> list[tuple[str, float]]:
    """The labelled facts of a bio's annotation that model-made facts are matched to."""
    pool: list[tuple[str, float]] = []
    for s in bio.sentences or ():
        if s.is_relevant:
            pool += [(f.text, 1.0 if f.label == "S" else 0.0) for f in s.human_facts]
        else:
            pool += [(f, 0.0) for f in s.model_facts]
    return pool


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def silver_labels(bios: list[AnnotatedBio], facts: list[tuple[int, str]], embedder,
                  more=()) -> tuple[list[float], list[float]]:
    """Per fact ``(bio index, text)``: its silver label and the cosine of its match. Each bio's pool
    and facts are embedded together, in the facts' order (deterministic for a given embedder).

    ``more``: further embedders with sessions of their own (the same model); the bios are then dealt
    to one thread per embedder (:mod:`.dealt`). Every bio is still one ``encode`` call of the same
    texts, so the split changes no value."""
    from .dealt import run_dealt

    labels = [0.0] * len(facts)
    sims = [0.0] * len(facts)
    by_bio: dict[int, list[int]] = {}
    for j, (b, _) in enumerate(facts):
        by_bio.setdefault(b, []).append(j)

    def label(emb, b: int) -> None:
        idx = by_bio[b]
        pool = label_pool(bios[b])
        if not pool:
            return  # a bio without annotated facts: its facts keep label 0 and similarity 0
        vectors = _unit(np.asarray(emb.encode([t for t, _ in pool] + [facts[j][1] for j in idx]), dtype=np.float64))
        sim = vectors[len(pool):] @ vectors[: len(pool)].T
        best = sim.argmax(axis=1)
        for j, k, row in zip(idx, best, sim):
            labels[j] = pool[int(k)][1]
            sims[j] = float(row[int(k)])

    run_dealt(sorted(by_bio), [embedder, *more], label)
    return labels, sims


def agreement(labels: list[float], bio_of: list[int], human_share: list[float], subjects: list[str]) -> list[dict]:
    """Per subject: the mean over bios of their facts' silver share against the mean human FActScore,
    and the per-bio mean absolute difference (×100)."""
    share: dict[int, list[float]] = {}
    for lab, b in zip(labels, bio_of):
        share.setdefault(b, []).append(lab)
    rows = []
    for subject in dict.fromkeys(subjects):
        bios = [b for b in share if subjects[b] == subject]
        if not bios:
            continue
        silver = [float(np.mean(share[b])) for b in bios]
        human = [human_share[b] for b in bios]
        rows.append({"subject": subject, "n_bios": len(bios), "human": 100 * float(np.mean(human)),
                     "silver": 100 * float(np.mean(silver)),
                     "per_bio_mae": 100 * float(np.mean(np.abs(np.subtract(silver, human))))})
    return rows
