"""fscore-lite: offline FActScore and Q².

The public API (the CLI calls exactly these)::

    from fscore_lite import Settings, score_file, open_store, load_bundle
"""
import os as _os

# OpenMP runtimes (llama.cpp's ggml, torch in the build step) busy-wait between parallel regions
# by default; on a machine where another process is busy that makes 2 threads many times slower
# than 1. Wait passively, as the benchmarks measure; set before llama_cpp or torch is loaded.
# The build step's torch training lifts this default (models/verifier/torch_train.py) unless the
# user set the variable: USER_OMP_WAIT_POLICY is what the user set, None when fscore-lite chose.
USER_OMP_WAIT_POLICY = _os.environ.get("OMP_WAIT_POLICY")
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .errors import FscoreError, InputError, ModelIntegrityError, ModelNotInstalled, StoreError
from .settings import Settings

__version__ = "0.1.0"

# Heavier names load on first use, so `fscore-lite --help` and light commands start fast.
_LAZY = {
    "Bundle": ".manifest",
    "Passage": ".store",
    "PassageStore": ".store",
    "open_store": ".store",
    "SentenceEmbedder": ".backends.embed",
    "FactScorer": ".factscore.pipeline",
    "ScoreOptions": ".factscore.pipeline",
    "score_file": ".factscore.pipeline",
}


def __getattr__(name: str):
    import importlib

    if name == "q2":  # callable: fscore_lite.q2(input, out, settings) runs Q² on a file
        return importlib.import_module(".q2", __name__)
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_bundle(settings: Settings | None = None):
    """The model bundle named by the settings (manifest + files)."""
    from .manifest import Bundle

    return Bundle((settings or Settings()).models_dir)


__all__ = [
    "q2",
    "score_file",
    "ScoreOptions",
    "FactScorer",
    "Bundle",
    "FscoreError",
    "InputError",
    "ModelIntegrityError",
    "ModelNotInstalled",
    "Settings",
    "StoreError",
    "load_bundle",
    "open_store",
    "PassageStore",
    "Passage",
    "SentenceEmbedder",
]
