"""Q² (Honovich et al., EMNLP 2021): factual consistency of a response with its knowledge.

One module per stage: :mod:`.spans` (answer candidates, personal questions),
:mod:`.generate` (question generation), :mod:`.answer` (QA, normalisation,
self-consistency), :mod:`.compare` (F1, NLI, score mapping), :mod:`.score` (one response),
:mod:`.pipeline` (files, resume, summary), :mod:`.roles` (backend per role).

``fscore_lite.q2`` is also callable: ``fscore_lite.q2(input, out, settings)`` is
:func:`fscore_lite.q2.pipeline.run_q2`. Heavy imports (spaCy, onnxruntime, llama.cpp) happen
only when scoring starts.
"""
from __future__ import annotations

import sys
import types


def run_q2(input_path, out_path, settings=None, **kwargs) -> dict:
    """Score a Q² CSV/JSONL file; see :func:`fscore_lite.q2.pipeline.run_q2`."""
    from .pipeline import run_q2 as _run

    return _run(input_path, out_path, settings, **kwargs)


class _CallableModule(types.ModuleType):
    def __call__(self, input_path, out_path, settings=None, **kwargs) -> dict:
        return run_q2(input_path, out_path, settings, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["run_q2"]
