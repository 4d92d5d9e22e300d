"""Masked-LM encoder on onnxruntime (for NP, the nonparametric probability).

Expects a bundle entry of role ``mlm`` whose ONNX graph takes ``input_ids`` and
``attention_mask`` and outputs the final hidden states (``last_hidden_state``); the export
step (``fscore-lite models export mlm``) writes such a graph. Tokenisation uses the entry's
``tokenizer.json`` through the ``tokenizers`` library.
"""
from __future__ import annotations

import numpy as np

from ..errors import ModelNotInstalled
from .onnx_session import make_session


class MaskedLMEncoder:
    def __init__(self, onnx_path, tokenizer_path, name: str, sha256: str, threads: int = 1):
        from tokenizers import Tokenizer

        self.session = make_session(onnx_path, threads)
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.name, self.sha256 = name, sha256
        self.inputs = {i.name for i in self.session.get_inputs()}
        outs = [o.name for o in self.session.get_outputs()]
        if "last_hidden_state" not in outs:
            raise ModelNotInstalled(f"mlm model {name} has no last_hidden_state output (outputs: {outs}); re-export it")
        self.mask_id = self.tokenizer.token_to_id("<mask>")
        if self.mask_id is None:
            self.mask_id = self.tokenizer.token_to_id("[MASK]")
        self.pad_id = self.tokenizer.token_to_id("<pad>") or 0

    def ids(self, text: str, special: bool) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=special).ids

    def token_text(self, token_id: int) -> str:
        return self.tokenizer.decode([token_id])

    def hidden_states(self, batch: list[list[int]]) -> list[np.ndarray]:
        """Final hidden states of each sequence (no padding rows)."""
        if not batch:
            return []
        n = max(len(x) for x in batch)
        ids = np.full((len(batch), n), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(batch), n), dtype=np.int64)
        for i, x in enumerate(batch):
            ids[i, : len(x)] = x
            mask[i, : len(x)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        (hidden,) = self.session.run(["last_hidden_state"], feed)
        return [hidden[i, : len(x)].astype(np.float32) for i, x in enumerate(batch)]
