"""fscore-lite: offline FActScore and Q².

The public API (the CLI calls exactly these)::

    import fscore_lite
    summary = fscore_lite.score("bios.jsonl", "out/bios.jsonl", store="STORE", verifier="trained")
    summary = fscore_lite.q2("dialogues.csv", "out/q2.jsonl", backend="onnx")

Every keyword is the CLI flag of the same name (``--search-all`` is ``search_all``).
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
from . import q2 as _q2_package  # noqa: F401  (the package first, so that the function below keeps the name q2)

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
    "Q2Options": ".q2.score",
}


def __getattr__(name: str):
    import importlib

    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_bundle(settings: Settings | None = None):
    """The model bundle named by the settings (manifest + files)."""
    from .manifest import Bundle

    return Bundle((settings or Settings()).models_dir)


def _split(options: dict, *kinds) -> list[dict]:
    """``options`` divided among the dataclasses ``kinds`` by field name; an unknown name is an error."""
    from dataclasses import fields

    names = [{f.name for f in fields(k)} for k in kinds]
    parts: list[dict] = [{} for _ in kinds]
    for key, value in options.items():
        owner = next((i for i, n in enumerate(names) if key in n), None)
        if owner is None:
            known = sorted(set().union(*names))
            raise TypeError(f"unknown option {key!r}; the options are {', '.join(known)}")
        parts[owner][key] = value
    return parts


def _paths(input, output, summary, suffix: str):
    from pathlib import Path

    from .io import default_output, summary_path_for

    input = Path(input)
    output = Path(output) if output else default_output(input, suffix)
    return input, output, Path(summary) if summary else summary_path_for(output)


def score(input, output=None, *, summary=None, resume: bool = False, force: bool = False, settings: Settings | None = None,
          ray: str | None = None, ray_actors: int | None = None, **options) -> dict:
    """FActScore over a JSONL file, as ``fscore-lite score``: writes ``output`` (default: INPUT
    with ``.factscore.jsonl``) and the summary JSON (default: OUTPUT with ``.summary.json``);
    returns the summary. ``options``: any :class:`ScoreOptions` field (mode, gamma, verifier, …)
    or :class:`Settings` field (store, llm, models_dir, threads, n_ctx, parallel, llm_kernel, use_cache).
    ``ray``: score on Ray actors (``local``, ``auto`` or an address; ``ray_actors`` of them); the
    returned summary then says where it ran under ``"ray"``."""
    from .distributed import executor_for
    from .factscore.pipeline import ScoreOptions, score_file

    method, changes = _split(options, ScoreOptions, Settings)
    input, output, summary = _paths(input, output, summary, ".factscore.jsonl")
    settings = (settings or Settings()).with_(**changes)
    options = ScoreOptions(**method)
    with executor_for(ray, ray_actors, "factscore", settings, options) as executor:
        result = score_file(input, output, settings, options, resume=resume, summary_path=summary, executor=executor,
                            force=force)
        return result | ({"ray": executor.describe()} if executor else {})


def q2(input, output=None, *, summary=None, resume: bool = False, force: bool = False, settings: Settings | None = None,
       progress: bool = True, ray: str | None = None, ray_actors: int | None = None, **options) -> dict:
    """Q² over a CSV or JSONL file, as ``fscore-lite q2``: writes ``output`` (default: INPUT with
    ``.q2.jsonl``) and the summary JSON; returns the summary. ``options``: any :class:`Q2Options`
    field (questions, remove_personal, no_nli_gets_fallback, metric, backend, qa_backend, precision, …) or
    :class:`Settings` field (llm, models_dir, threads, llm_kernel, use_cache)."""
    from .distributed import executor_for
    from .q2.pipeline import q2_file
    from .q2.score import Q2Options

    method, changes = _split(options, Q2Options, Settings)
    input, output, summary = _paths(input, output, summary, ".q2.jsonl")
    settings = (settings or Settings()).with_(**changes)
    options = Q2Options(**method)
    with executor_for(ray, ray_actors, "q2", settings, options) as executor:
        result = q2_file(input, output, settings, options=options, resume=resume, force=force, summary_path=summary,
                         progress=progress, executor=executor)
        return result | ({"ray": executor.describe()} if executor else {})


__all__ = [
    "q2",
    "score",
    "score_file",
    "ScoreOptions",
    "Q2Options",
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
