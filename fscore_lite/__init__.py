"""fscore-lite: offline FActScore and Q².

The public API (the CLI calls exactly these)::

    from fscore_lite import Settings, score_file, open_store, load_bundle
"""
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
