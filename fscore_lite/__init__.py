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
from .manifest import Bundle
from .settings import Settings
from .store import Passage, PassageStore, open_store
from .backends.embed import SentenceEmbedder
from .factscore.pipeline import FactScorer, ScoreOptions, score_file
from . import q2  # callable: fscore_lite.q2(input, out, settings) runs Q² on a file

__version__ = "0.1.0"


def load_bundle(settings: Settings | None = None) -> Bundle:
    """The model bundle named by the settings (manifest + files)."""
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
