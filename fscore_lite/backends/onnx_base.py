"""The one base of every ONNX model: its session(s), tokenizer, config, identity and call cache.

Each backend (cross-encoder and NLI, extractive QA, seq2seq question generation, sentence
embedder, masked LM) adds only its pre- and post-processing. ``name`` and ``sha256`` identify
the model (bundle entry name, hash of the weights file actually loaded), so int8 and fp32 files
never share cache entries. :func:`pad_rows` is the one right-padding of token id rows.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..cache import CallCache
from ..errors import ModelIntegrityError
from .onnx_session import make_session


def pad_rows(rows: list[list[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Token id rows right-padded to the longest with ``pad_id``: (ids, attention mask), int64."""
    width = max((len(r) for r in rows), default=1)
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
        mask[i, : len(r)] = 1
    return ids, mask


def bundle_files(bundle, entry, precision: str = "int8") -> dict:
    """Verified paths of one ONNX entry's files: ``weights`` (int8 by default, fp32 on request),
    ``tokenizer``, ``config``, plus the ``sha256`` of the weights actually used.

    The export step records the int8 graph as kind ``weights`` and the fp32 graph it was
    made from as kind ``weights_fp32``; a bundle with only one graph serves both.
    """
    kinds = {f.kind: f for f in entry.files}
    want = "weights_fp32" if precision == "fp32" and "weights_fp32" in kinds else "weights"
    if want not in kinds:
        raise ModelIntegrityError(f"model '{entry.name}' has no {want} file in {bundle.manifest_path}")
    out: dict = {}
    for kind in (want, "tokenizer", "config"):
        f = kinds.get(kind)
        if f is None:
            if kind == "config":
                continue
            raise ModelIntegrityError(f"model '{entry.name}' has no {kind} file in {bundle.manifest_path}")
        out["weights" if kind == want else kind] = bundle.verify_file(f)
    out["sha256"] = kinds[want].sha256
    return out


def _json_roundtrip(value: Any) -> Any:
    """The value exactly as the cache will return it later (so reruns are byte-identical)."""
    return json.loads(json.dumps(value, ensure_ascii=False))


class OnnxTextModel:
    """One ONNX model with its ``tokenizers`` tokenizer (no padding, no truncation: each backend
    does both itself) and config; :meth:`cached` routes a call through the call cache."""

    backend = "onnx"

    def __init__(
        self,
        tokenizer_path: str | Path,
        config: dict | str | Path | None,
        *,
        name: str,
        sha256: str,
        threads: int = 1,
        cache: CallCache | None = None,
    ):
        from tokenizers import Tokenizer

        self.name = name
        self.sha256 = sha256
        self.threads = max(1, int(threads))
        self.cache = cache if cache is not None else CallCache(None)
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        if config is None:
            self.config: dict = {}
        elif isinstance(config, dict):
            self.config = config
        else:
            self.config = json.loads(Path(config).read_text(encoding="utf-8"))
        self.calls = 0

    @classmethod
    def from_bundle(cls, bundle, entry, *, threads=1, cache=None, precision="int8"):
        """The model of one single-graph bundle entry (:func:`bundle_files`)."""
        files = bundle_files(bundle, entry, precision)
        return cls(files["weights"], files["tokenizer"], files.get("config"), name=entry.name,
                   sha256=files["sha256"], threads=threads, cache=cache)

    def open_session(self, model_path: str | Path):
        """Open the model's one graph as ``self.session``; ``self.inputs`` are its input names."""
        self.session = make_session(model_path, self.threads)
        self.inputs = {i.name for i in self.session.get_inputs()}
        return self.session

    def cached(self, kind: str, payload: dict, compute: Callable[[], Any]) -> Any:
        """Cached model call keyed by (sha256, kind, exact input)."""
        self.calls += 1
        return self.cache.cached(self.sha256, kind, payload, lambda: _json_roundtrip(compute()))

    def max_tokens(self) -> int:
        """Longest input the model's position embeddings allow."""
        n = int(self.config.get("max_position_embeddings", 512))
        if self.config.get("model_type") in ("roberta", "xlm-roberta", "camembert", "longformer"):
            n -= int(self.config.get("pad_token_id", 1)) + 1  # positions start after the pad id
        return n

    def token_strings(self, ids: list[int]) -> list[str]:
        return [self.tokenizer.id_to_token(int(i)) or "" for i in ids]

    def tokens_to_string(self, tokens: list[str]) -> str:
        """The tokenizer's ``convert_tokens_to_string``: its decoder, or tokens joined by spaces."""
        decoder = self.tokenizer.decoder
        return decoder.decode(tokens) if decoder is not None else " ".join(tokens)
