"""Masked-LM encoder on onnxruntime (for NP, the nonparametric probability).

Expects a bundle entry of role ``mlm`` whose ONNX graph takes ``input_ids`` and
``attention_mask`` and outputs the final hidden states (``last_hidden_state``); the export
step (``fscore-lite models export mlm``) writes such a graph. Tokenisation uses the entry's
``tokenizer.json`` through the ``tokenizers`` library.
"""
from __future__ import annotations

import numpy as np

from ..errors import ModelNotInstalled
from .onnx_base import OnnxTextModel, pad_rows


class MaskedLMEncoder(OnnxTextModel):
    role = "mlm"

    def __init__(self, onnx_path, tokenizer_path, name: str, sha256: str, threads: int = 1):
        super().__init__(tokenizer_path, None, name=name, sha256=sha256, threads=threads)
        self.open_session(onnx_path)
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
        ids, mask = pad_rows(batch, self.pad_id)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        (hidden,) = self.session.run(["last_hidden_state"], feed)
        return [hidden[i, : len(x)].astype(np.float32) for i, x in enumerate(batch)]
