"""The stand-alone binary (``make dist`` → the launcher ``dist/fscore-lite`` and its bundle
``dist/fscore-lite.d``) in a clean environment.

The binary runs with no Python on PATH and no PYTHONPATH, also through a link from another
folder (as ``make dist-install`` installs it): build a 2-page store, inspect it,
verify the model bundle, score one item with one precomputed fact (0.5B model, 1 thread),
run Q² on one short response with the LLM backend, and refuse ``models export`` with a clear
message. Skipped when the binary has not been built (``make dist`` or ``make dist-test``).
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from .conftest import EXAMPLES, REPO, TEST_LLM

pytestmark = pytest.mark.dist

BINARY = REPO / "dist" / "fscore-lite"  # the launcher
BUNDLE_DIR = REPO / "dist" / "fscore-lite.d"
EMBED = "all-minilm-l6-v2-int8"
TOPIC = "Travis Oliphant"


def _clean_path() -> str:
    """PATH without the virtual environment (or any folder holding a python)."""
    venv = os.environ.get("VIRTUAL_ENV")
    keep = []
    for d in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep):
        if not d or (venv and d.startswith(venv)) or "/.venv/" in d + "/" or Path(d, "pyvenv.cfg").exists():
            continue
        keep.append(d)
    return os.pathsep.join(keep) or "/usr/bin:/bin"


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict:
    if not BINARY.exists():
        pytest.skip(f"{BINARY} has not been built: run `make dist` (PyInstaller one-folder build) first")
    from fscore_lite.manifest import Bundle
    from fscore_lite.settings import Settings

    # A bundle with just the two models the test needs: manifest entries plus links to the files.
    source = Bundle(Settings().models_dir)
    missing = [n for n in (TEST_LLM, EMBED) if n not in source.entries]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed in {source.root}: run `make models-test`")
    home = tmp_path_factory.mktemp("dist-home")
    bundle = Bundle(home / "models")
    bundle.root.mkdir()
    for name in (TEST_LLM, EMBED):
        entry = source.get(name)
        for f in entry.files:
            link = bundle.root / f.path
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.exists():
                link.symlink_to((source.root / f.path).resolve())
        bundle.add(entry)
    bundle.save()
    # Clean environment: no venv on PATH, no PYTHONPATH, a private home and cache.
    return {
        "PATH": _clean_path(),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TMPDIR": str(home),
        "FSCORE_LITE_HOME": str(home / "fscore-lite"),
        "FSCORE_LITE_MODELS": str(bundle.root),
        "FSCORE_LITE_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
    }


def run(env: dict, *args, cwd=None, timeout=900, binary: Path = BINARY) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(binary), *map(str, args)], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)
    return proc


def _ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def store(env, tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("dist-kb")
    lines = [l for l in (EXAMPLES / "pages.jsonl").read_text(encoding="utf-8").splitlines() if l.strip()]
    pages = [l for l in lines if json.loads(l)["topic"] in (TOPIC, "Ben Lummis")]
    assert len(pages) == 2
    (work / "pages.jsonl").write_text("\n".join(pages) + "\n", encoding="utf-8")
    out = work / "store"
    stats = json.loads(_ok(run(env, "kb", "build", work / "pages.jsonl", "-o", out, "--source", "test pages",
                              "--snapshot", "2026", "--threads", "1", "-q", cwd=work)))
    assert stats["pages"] == 2 and stats["passages"] >= 2
    return out


def test_help_and_list(env):
    out = _ok(run(env, "--help"))
    for command in ("score", "q2", "kb", "models"):
        assert command in out
    listed = _ok(run(env, "models", "list"))
    assert TEST_LLM in listed and EMBED in listed


def test_launcher_through_a_link(env, tmp_path):
    """Installed as `make dist-install` does it: a link in a bin folder to the launcher beside its bundle."""
    assert (BUNDLE_DIR / "fscore-lite").is_file()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "fscore-lite").symlink_to(BINARY)
    out = _ok(run(env, "models", "list", cwd=tmp_path, binary=bin_dir / "fscore-lite"))
    assert TEST_LLM in out
    # the launcher passes arguments through unchanged, spaces included
    proc = run(env, "kb", "info", tmp_path / "no such store", cwd=tmp_path, binary=bin_dir / "fscore-lite")
    assert proc.returncode == 2 and "no such store" in proc.stderr and "Traceback" not in proc.stderr


def test_kb_info(env, store):
    info = json.loads(_ok(run(env, "kb", "info", store)))
    assert info["pages"] == 2 and info["passages"] >= 2
    assert info["embed_model"] == EMBED and info["dim"] == 384


def test_models_verify(env):
    out = _ok(run(env, "models", "verify"))
    assert f"ok     {TEST_LLM}" in out and f"ok     {EMBED}" in out


def test_score_one_fact(env, store, tmp_path):
    item = {"topic": TOPIC, "facts": ["Travis Oliphant is the primary creator of NumPy."], "id": "x1"}
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps(item) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    summary = json.loads(_ok(run(env, "score", inp, "-o", out, "--store", store, "--llm", TEST_LLM, "--verifier", "llm",
                                 "--threads", "1", "--no-cache", "-q", cwd=tmp_path)))
    assert summary["num_items"] == 1
    rows = [json.loads(l) for l in out.read_text(encoding="utf-8").splitlines() if l.strip()]
    assert len(rows) == 1
    row = rows[0]
    assert row["id"] == "x1" and row["status"] == "ok" and row["num_facts"] == 1
    (d,) = row["decisions"]
    assert d["atom"] == item["facts"][0]
    assert isinstance(d["is_supported"], bool) and d["rule"] == "logprob"
    assert d["evidence"] and all(e["title"] == TOPIC for e in d["evidence"])
    assert 0.0 <= row["score"] <= 1.0
    assert Path(summary["summary"]).exists()


def test_q2_llm_backend(env, tmp_path):
    """Q² in the binary: spaCy and its English pipeline load, the LLM serves every role."""
    row = {"response": "Paris is the capital of France.",
           "knowledge": "Paris is the capital and largest city of France."}
    inp = tmp_path / "q2.jsonl"
    inp.write_text(json.dumps(row) + "\n", encoding="utf-8")
    out = tmp_path / "q2.out.jsonl"
    summary = json.loads(_ok(run(env, "q2", inp, "-o", out, "--backend", "llm", "--llm", TEST_LLM,
                                 "--threads", "1", "--no-cache", "-q", cwd=tmp_path)))
    assert summary["num_items"] == 1
    rows = [json.loads(l) for l in out.read_text(encoding="utf-8").splitlines() if l.strip()]
    assert len(rows) == 1
    # answer candidates come from spaCy's entities and noun chunks
    candidates = {c["candidate"] for c in rows[0]["candidates"]}
    assert {"Paris", "France"} <= candidates
    assert rows[0]["status"] == "ok" and 0.0 <= rows[0]["Q2"] <= 1.0


def test_models_export_refused(env, tmp_path):
    proc = run(env, "models", "export", "qa", tmp_path)
    assert proc.returncode == 2
    assert "not available in the stand-alone binary" in proc.stderr
    assert "Traceback" not in proc.stderr
