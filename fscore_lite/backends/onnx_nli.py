"""Three-way NLI cross-encoder on onnxruntime (Q²'s NLI role; reference: RoBERTa-large on SNLI).

Premise and hypothesis are encoded as a pair with the tokenizer's own special tokens (for
RoBERTa ``<s> premise </s></s> hypothesis </s>``, what the reference AllenNLP predictor
feeds its model); a pair longer than the model's positions is cut longest-first. The label
order is read from the model's ``config.json`` (``id2label``), never assumed.
"""
from __future__ import annotations

import numpy as np

from ..errors import ModelIntegrityError
from .onnx_qa import OnnxTextModel, make_session

NLI_LABELS = ("entailment", "neutral", "contradiction")


def bundle_files(bundle, entry, precision: str = "int8") -> dict:
    """Verified paths of one ONNX entry's files: ``weights`` (int8 by default, fp32 on request),
    ``tokenizer``, ``config``, plus the ``sha256`` of the weights actually used.

    The export step records the int8 graph as kind ``weights`` and the fp32 graph it was
    made from as kind ``weights_fp32``; a bundle with only one graph serves both.
    """
    from ..manifest import ModelFile

    kinds = {f.kind: f for f in entry.files}
    want = "weights_fp32" if precision == "fp32" and "weights_fp32" in kinds else "weights"
    if want not in kinds:
        raise ModelIntegrityError(f"model '{entry.name}' has no {want} file in {bundle.manifest_path}")
    out: dict = {}
    for kind in (want, "tokenizer", "config"):
        f: ModelFile | None = kinds.get(kind)
        if f is None:
            if kind == "config":
                continue
            raise ModelIntegrityError(f"model '{entry.name}' has no {kind} file in {bundle.manifest_path}")
        out["weights" if kind == want else kind] = bundle.verify_file(f)
    out["sha256"] = kinds[want].sha256
    return out


def label_names(config: dict, n: int) -> list[str]:
    """Lower-cased label names by output index, from ``id2label``; each must be an NLI label."""
    id2label = config.get("id2label") or {}
    names = [str(id2label.get(str(i), id2label.get(i, ""))).lower() for i in range(n)]
    if sorted(names) != sorted(NLI_LABELS):
        raise ModelIntegrityError(
            f"NLI model config has labels {names}; expected entailment, neutral and contradiction"
        )
    return names


class NliCrossEncoder(OnnxTextModel):
    """A ``*ForSequenceClassification`` graph with three NLI labels."""

    role = "nli"

    def __init__(self, model_path, tokenizer_path, config=None, *, name, sha256, threads=1, cache=None):
        super().__init__(tokenizer_path, config, name=name, sha256=sha256, threads=threads, cache=cache)
        self.session = make_session(model_path, self.threads)
        self.inputs = {i.name for i in self.session.get_inputs()}
        out = self.session.get_outputs()[0]
        self._output = out.name
        n = out.shape[-1] if out.shape and isinstance(out.shape[-1], int) else 3
        self.labels = label_names(self.config, n)
        self._pair_tokenizer = None

    @classmethod
    def from_bundle(cls, bundle, entry, *, threads=1, cache=None, precision="int8") -> "NliCrossEncoder":
        files = bundle_files(bundle, entry, precision)
        return cls(files["weights"], files["tokenizer"], files.get("config"), name=entry.name,
                   sha256=files["sha256"], threads=threads, cache=cache)

    def _encode(self, premise: str, hypothesis: str):
        enc = self.tokenizer.encode(premise, hypothesis)
        if len(enc.ids) <= self.max_tokens():
            return enc
        if self._pair_tokenizer is None:
            from tokenizers import Tokenizer

            self._pair_tokenizer = Tokenizer.from_str(self.tokenizer.to_str())
            self._pair_tokenizer.no_padding()
            self._pair_tokenizer.enable_truncation(self.max_tokens(), strategy="longest_first")
        return self._pair_tokenizer.encode(premise, hypothesis)

    def logits(self, premise: str, hypothesis: str) -> np.ndarray:
        enc = self._encode(premise, hypothesis)
        ids = np.asarray([enc.ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "token_type_ids" in self.inputs:
            feeds["token_type_ids"] = np.asarray([enc.type_ids], dtype=np.int64)
        return self.session.run([self._output], feeds)[0][0].astype(np.float32)

    def predict(self, premise: str, hypothesis: str) -> dict:
        """``{"label": one of NLI_LABELS, "logits": {label: logit}}`` (argmax label; cached)."""
        payload = {"premise": premise, "hypothesis": hypothesis}

        def compute():
            z = self.logits(premise, hypothesis)
            return {"label": self.labels[int(np.argmax(z))],
                    "logits": {lab: float(v) for lab, v in zip(self.labels, z)}}

        return self.cached("nli_pair", payload, compute)
