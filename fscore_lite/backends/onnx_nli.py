"""Three-way NLI cross-encoder on onnxruntime (Q²'s NLI role; reference: RoBERTa-large on SNLI).

Premise and hypothesis are encoded as a pair with the tokenizer's own special tokens (for
RoBERTa ``<s> premise </s></s> hypothesis </s>``, what the reference AllenNLP predictor
feeds its model); a pair longer than the model's positions is cut longest-first. The label
order is read from the model's ``config.json`` (``id2label``), never assumed.
"""
from __future__ import annotations

import numpy as np

from ..errors import ModelIntegrityError
from .cross_encoder import CrossEncoder

NLI_LABELS = ("entailment", "neutral", "contradiction")


def label_names(config: dict, n: int) -> list[str]:
    """Lower-cased label names by output index, from ``id2label``; each must be an NLI label."""
    id2label = config.get("id2label") or {}
    names = [str(id2label.get(str(i), id2label.get(i, ""))).lower() for i in range(n)]
    if sorted(names) != sorted(NLI_LABELS):
        raise ModelIntegrityError(
            f"NLI model config has labels {names}; expected entailment, neutral and contradiction"
        )
    return names


class NliCrossEncoder(CrossEncoder):
    """A ``*ForSequenceClassification`` graph with three NLI labels."""

    role = "nli"

    def __init__(self, model_path, tokenizer_path, config=None, *, name, sha256, threads=1, cache=None):
        super().__init__(model_path, tokenizer_path, config, name=name, sha256=sha256, threads=threads, cache=cache)
        self.labels = label_names(self.config, self.n_labels or 3)

    def logits(self, premise: str, hypothesis: str) -> np.ndarray:
        return self.logits_batch([(premise, hypothesis)])[0]

    def predict(self, premise: str, hypothesis: str) -> dict:
        """``{"label": one of NLI_LABELS, "logits": {label: logit}}`` (argmax label; cached)."""
        payload = {"premise": premise, "hypothesis": hypothesis}

        def compute():
            z = self.logits(premise, hypothesis)
            return {"label": self.labels[int(np.argmax(z))],
                    "logits": {lab: float(v) for lab, v in zip(self.labels, z)}}

        return self.cached("nli_pair", payload, compute)

    def predict_batch(self, pairs: list[tuple[str, str]]) -> list[dict]:
        """:meth:`predict` for several (premise, hypothesis) pairs in one padded call
        (:meth:`CrossEncoder.logits_batch`).

        Cached as one batch keyed by all its pairs in order, so a result depends only on the
        batch; callers fix the batch by one item's content (Q²: the answer pairs of one
        response). A single pair is exactly :meth:`predict` (same cache entry).
        """
        pairs = [(str(p), str(h)) for p, h in pairs]
        if len(pairs) <= 1:
            return [self.predict(p, h) for p, h in pairs]

        def compute():
            return [{"label": self.labels[int(np.argmax(z))],
                     "logits": {lab: float(v) for lab, v in zip(self.labels, z)}}
                    for z in self.logits_batch(pairs)]

        return self.cached("nli_batch", {"pairs": [list(p) for p in pairs]}, compute)
