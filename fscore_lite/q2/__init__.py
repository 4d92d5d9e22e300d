"""Q² (Honovich et al., EMNLP 2021): factual consistency of a response with its knowledge.

One module per stage: :mod:`.spans` (answer candidates, personal questions),
:mod:`.generate` (question generation), :mod:`.answer` (QA, normalisation,
self-consistency), :mod:`.compare` (F1, NLI, score mapping), :mod:`.score` (one response),
:mod:`.pipeline` (files, resume, summary), :mod:`.roles` (backend per role).

Files are scored with :func:`fscore_lite.q2` (the Python API) or
:func:`fscore_lite.q2.pipeline.q2_file`. Heavy imports (spaCy, onnxruntime, llama.cpp) happen
only when scoring starts.
"""
