"""Sentence embedder: an ONNX BERT encoder with all-MiniLM-L6-v2's pooling.

The recipe is the one sentence-transformers uses for all-MiniLM-L6-v2: WordPiece tokens with
``[CLS]``/``[SEP]``, at most 256 tokens per text (longer texts are cut), the mean of the last
hidden states over the attention mask, then L2 normalisation. Inner products between the
vectors are therefore cosine similarities.

The same tokenizer counts tokens and gives character offsets for the index builder, so
passage sizes are measured with exactly the tokenizer that embeds them.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ModelIntegrityError
from ..settings import DEFAULT_EMBED
from .onnx_base import OnnxTextModel, pad_rows

MAX_TOKENS = 256  # all-MiniLM-L6-v2's max_seq_length


@dataclass(frozen=True)
class TokenSpan:
    """One non-special token of a text: its character span and whether it starts a word.

    ``starts_word`` is False for WordPiece continuations (``##...``); cutting a text at a
    token that starts a word keeps both halves tokenising exactly as they did together.
    """

    start: int
    end: int
    starts_word: bool


class SentenceEmbedder(OnnxTextModel):
    """all-MiniLM-L6-v2-style sentence vectors from an ONNX model and a ``tokenizer.json``.

    ``name`` and ``sha256`` identify the model (the bundle's entry name and the hash of its
    weights file); stores record them so that queries are embedded with the same model.
    """

    role = "embed"

    def __init__(
        self,
        model_path: str | Path,
        tokenizer_path: str | Path,
        *,
        name: str = DEFAULT_EMBED,
        sha256: str = "",
        threads: int = 1,
        max_tokens: int = MAX_TOKENS,
    ):
        # The tokenizer file ships with truncation and fixed padding to 128; the base turns both off.
        super().__init__(tokenizer_path, None, name=name, sha256=sha256, threads=threads)
        self.text_tokens = int(max_tokens)
        self._cls_id = self.tokenizer.token_to_id("[CLS]")
        self._sep_id = self.tokenizer.token_to_id("[SEP]")
        self._pad_id = self.tokenizer.token_to_id("[PAD]") or 0
        if self._cls_id is None or self._sep_id is None:
            raise ModelIntegrityError(f"{tokenizer_path} is not a BERT tokenizer (no [CLS]/[SEP] tokens)")

        self.open_session(model_path)
        missing = {"input_ids", "attention_mask"} - self.inputs
        if missing:
            raise ModelIntegrityError(f"{model_path} lacks the inputs {sorted(missing)} of a BERT encoder")
        out = self.session.get_outputs()[0]
        self._output_name = out.name
        dim = out.shape[-1] if out.shape else None
        self.dim = int(dim) if isinstance(dim, int) else int(self.encode(["dimension probe"]).shape[1])

    @classmethod
    def from_bundle(cls, bundle, name: str = DEFAULT_EMBED, threads: int = 1) -> "SentenceEmbedder":
        """Load a verified embedding model from a :class:`fscore_lite.manifest.Bundle`."""
        entry = bundle.get(name)
        model_path = bundle.verified_path(entry, "weights")
        tokenizer_path = bundle.path(entry, "tokenizer")
        return cls(model_path, tokenizer_path, name=entry.name, sha256=entry.sha256, threads=threads)

    # -- tokens ---------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        """Number of tokens of ``text`` including ``[CLS]`` and ``[SEP]``, without truncation."""
        return len(self.tokenizer.encode(text).ids)

    def token_spans(self, text: str) -> list[TokenSpan]:
        """The non-special tokens of ``text`` with their character offsets into ``text``."""
        enc = self.tokenizer.encode(text)
        spans = []
        for tok, (start, end), special in zip(enc.tokens, enc.offsets, enc.special_tokens_mask):
            if special:
                continue
            spans.append(TokenSpan(start, end, not tok.startswith("##")))
        return spans

    # -- vectors --------------------------------------------------------------------------
    def _ids(self, texts: list[str]) -> list[list[int]]:
        if self.threads > 1 and len(texts) > 1:
            encs = self.tokenizer.encode_batch(texts)
        else:
            encs = [self.tokenizer.encode(t) for t in texts]
        out = []
        for e in encs:
            ids = e.ids
            if len(ids) > self.text_tokens:  # truncate like the reference: keep the head, end with [SEP]
                ids = ids[: self.text_tokens - 1] + [self._sep_id]
            out.append(ids)
        return out

    def encode(self, texts: list[str] | tuple[str, ...], batch_size: int = 32) -> np.ndarray:
        """Unit-length float32 vectors, shape ``(len(texts), dim)``, rows in input order.

        Texts are batched by token length (less padding); the result is put back in order.
        """
        texts = list(texts)
        if not texts:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32)
        ids = self._ids(texts)
        order = sorted(range(len(texts)), key=lambda i: len(ids[i]))
        result: np.ndarray | None = None
        for b in range(0, len(order), max(1, batch_size)):
            idx = order[b : b + batch_size]
            input_ids, mask = pad_rows([ids[i] for i in idx], self._pad_id)
            feeds = {"input_ids": input_ids, "attention_mask": mask}
            if "token_type_ids" in self.inputs:
                feeds["token_type_ids"] = np.zeros_like(input_ids)
            hidden = self.session.run([self._output_name], feeds)[0].astype(np.float32)
            vecs = mean_pool(hidden, mask)
            if result is None:
                result = np.zeros((len(texts), vecs.shape[1]), dtype=np.float32)
            result[idx] = vecs
        assert result is not None
        return result


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of token vectors over the attention mask, then L2-normalised (all-MiniLM-L6-v2)."""
    m = mask[:, :, None].astype(np.float32)
    summed = (hidden * m).sum(axis=1)
    counts = np.clip(m.sum(axis=1), 1e-9, None)
    pooled = summed / counts
    norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
    return (pooled / norms).astype(np.float32)
