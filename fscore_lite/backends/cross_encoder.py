"""A sequence-pair classifier on onnxruntime, batched: the trained verifier and Q²'s NLI.

``encode_pairs`` is the one definition of how a (text_a, text_b) pair becomes model inputs —
the tokenizer's own pair template (for BERT ``[CLS] a [SEP] b [SEP]``, token types 0/1), cut
longest-first to ``max_length`` tokens, right-padded to the longest pair of the batch. The
build step trains on exactly these ids (:mod:`models.verifier`), so what the runtime feeds
the exported graph is what the model saw in training.
"""
from __future__ import annotations

import numpy as np

from .onnx_base import OnnxTextModel, pad_rows


def pair_tokenizer(tokenizer, max_length: int):
    """A copy of ``tokenizer`` that cuts pairs longest-first to ``max_length`` tokens."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tokenizer.to_str())
    tok.no_padding()
    tok.enable_truncation(int(max_length), strategy="longest_first")
    return tok


def encode_pairs(tokenizer, pairs: list[tuple[str, str]], pad_id: int = 0) -> dict[str, np.ndarray]:
    """``input_ids``, ``attention_mask``, ``token_type_ids`` (int64, shape [n, longest])."""
    encs = [tokenizer.encode(a, b) for a, b in pairs]
    ids, mask = pad_rows([e.ids for e in encs], pad_id)
    types, _ = pad_rows([e.type_ids for e in encs], 0)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


class CrossEncoder(OnnxTextModel):
    """A ``*ForSequenceClassification`` graph: pairs in, one logit row per pair out."""

    role = "cross-encoder"

    def __init__(self, model_path, tokenizer_path, config=None, *, name, sha256, threads=1, cache=None,
                 max_length: int | None = None):
        super().__init__(tokenizer_path, config, name=name, sha256=sha256, threads=threads, cache=cache)
        self.open_session(model_path)
        out = self.session.get_outputs()[0]
        self._output = out.name
        self.n_labels = out.shape[-1] if out.shape and isinstance(out.shape[-1], int) else None
        self.max_length = min(int(max_length or self.max_tokens()), self.max_tokens())
        self._pair_tok = pair_tokenizer(self.tokenizer, self.max_length)
        pad = self.tokenizer.token_to_id("[PAD]")
        self.pad_id = int(self.config.get("pad_token_id", pad if pad is not None else 0) or 0)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` without special tokens."""
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def logits_batch(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        """Logits, shape ``[len(pairs), labels]``, for the pairs run as one batch.

        Padding width depends on the batch, and kernels may round differently for other
        shapes, so callers keep a batch fixed by its content (the trained verifier: one fact's
        k passages), never by what else is being scored: a result never depends on item order.
        """
        if not pairs:
            return np.zeros((0, self.n_labels or 0), dtype=np.float32)
        feeds = encode_pairs(self._pair_tok, list(pairs), self.pad_id)
        feeds = {k: v for k, v in feeds.items() if k in self.inputs}
        return self.session.run([self._output], feeds)[0].astype(np.float32)
