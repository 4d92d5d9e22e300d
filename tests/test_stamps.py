"""Verified stamps: a store or model file is re-hashed only when it changed (issue 9).

Every test counts calls of ``fscore_lite.stamps.sha256_file`` (the one hashing function) and
keeps its stamps in a temporary FSCORE_LITE_HOME.
"""
from __future__ import annotations

import hashlib
import os
import time

import pytest

from fscore_lite import stamps
from fscore_lite.cli import main
from fscore_lite.errors import ModelIntegrityError, StoreError
from fscore_lite.manifest import Bundle, ModelEntry, describe_file
from fscore_lite.store import open_store

from .test_store import write_store


@pytest.fixture()
def hashed(tmp_path, monkeypatch):
    """The list of paths hashed so far; stamps in tmp_path/home, trusted at once (no racy window)."""
    monkeypatch.setenv("FSCORE_LITE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(stamps, "RACY_NS", 0)
    stamps.forget_memory()
    calls: list[str] = []
    real = stamps.sha256_file
    monkeypatch.setattr(stamps, "sha256_file", lambda p, *a, **k: calls.append(os.path.basename(p)) or real(p, *a, **k))
    yield calls
    stamps.forget_memory()


def _rewrite_same_size(path):
    """Change a byte, keep the size; a short pause first so that the clock has moved on."""
    time.sleep(0.05)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_unchanged_file_is_hashed_once_across_processes(tmp_path, hashed):
    f = tmp_path / "w.bin"
    f.write_bytes(b"x" * 1000)
    digest = stamps.verified_sha256(f)
    assert stamps.verified_sha256(f) == digest and hashed == ["w.bin"]
    stamps.forget_memory()  # as a new process would start: only the stamp file remains
    assert stamps.verified_sha256(f) == digest and hashed == ["w.bin"]
    assert (tmp_path / "home" / stamps.STAMPS_NAME).exists()
    assert stamps.verified_sha256(f, use_stamp=False) == digest and hashed == ["w.bin", "w.bin"]


def test_changed_file_is_hashed_again(tmp_path, hashed):
    f = tmp_path / "w.bin"
    f.write_bytes(b"x" * 1000)
    before = stamps.verified_sha256(f)
    st = f.stat()
    _rewrite_same_size(f)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # even with the old mtime put back
    stamps.forget_memory()
    after = stamps.verified_sha256(f)
    assert hashed == ["w.bin", "w.bin"] and after != before
    os.utime(f)  # a plain touch: same bytes, new mtime -> hashed again, same digest
    assert stamps.verified_sha256(f) == after and hashed == ["w.bin"] * 3
    f2 = tmp_path / "w2.bin"  # replaced by another file (new inode) with the same bytes
    f2.write_bytes(f.read_bytes())
    os.replace(f2, f)
    assert stamps.verified_sha256(f) == after and len(hashed) == 4


def test_freshly_written_file_is_not_stamped(tmp_path, hashed, monkeypatch):
    monkeypatch.setattr(stamps, "RACY_NS", 60 * 10**9)  # "fresh" = changed in the last minute
    f = tmp_path / "w.bin"
    f.write_bytes(b"y" * 10)
    stamps.verified_sha256(f)
    stamps.verified_sha256(f)
    assert hashed == ["w.bin", "w.bin"]  # a second write in the same clock tick could go unseen


def test_store_opens_without_rehashing_and_detects_changes(tmp_path, hashed):
    path = tmp_path / "s"
    write_store(path)
    hashed.clear()
    open_store(path).close()
    assert sorted(hashed) == ["hnsw.bin", "store.sqlite"]
    stamps.forget_memory()
    open_store(path).close()
    open_store(path).close()
    assert len(hashed) == 2  # unchanged: the stamps give the sha256
    os.utime(path / "hnsw.bin")  # touched: hashed again, still valid
    open_store(path).close()
    assert sorted(hashed[2:]) == ["hnsw.bin"]
    _rewrite_same_size(path / "store.sqlite")
    with pytest.raises(StoreError, match="sha256"):
        open_store(path)
    assert hashed[-1] == "store.sqlite"


def _bundle(tmp_path) -> tuple[Bundle, ModelEntry]:
    root = tmp_path / "models"
    (root / "m").mkdir(parents=True)
    (root / "m" / "model.gguf").write_bytes(os.urandom(4096))
    b = Bundle(root)
    entry = ModelEntry(name="m", role="llm", architecture="test", files=(describe_file(root, "m/model.gguf", "weights"),))
    b.add(entry)
    b.save()
    return Bundle(root), entry


def test_model_file_is_verified_once_until_it_changes(tmp_path, hashed):
    bundle, entry = _bundle(tmp_path)
    hashed.clear()
    bundle.verified_path(entry)
    stamps.forget_memory()
    Bundle(bundle.root).verified_path(entry)
    assert hashed == ["model.gguf"]
    bundle.verify_file(entry.files[0], use_cache=False)
    assert hashed == ["model.gguf"] * 2
    _rewrite_same_size(bundle.root / "m" / "model.gguf")
    with pytest.raises(ModelIntegrityError, match="sha256"):
        bundle.verified_path(entry)
    assert hashed == ["model.gguf"] * 3


def test_models_verify_always_hashes(tmp_path, hashed, capsys):
    bundle, entry = _bundle(tmp_path)
    bundle.verified_path(entry)  # stamped
    hashed.clear()
    with pytest.raises(SystemExit) as exc:
        main(["models", "verify", "--models-dir", str(bundle.root)])
    out, err = capsys.readouterr()
    assert (exc.value.code or 0) == 0 and "ok" in out and hashed == ["model.gguf"]
    _rewrite_same_size(bundle.root / "m" / "model.gguf")
    with pytest.raises(SystemExit) as exc:
        main(["models", "verify", "--models-dir", str(bundle.root)])
    out, err = capsys.readouterr()
    assert exc.value.code == 1 and "FAILED" in out and "m/model.gguf" in err


def test_unwritable_stamp_file_still_verifies(tmp_path, hashed, monkeypatch):
    home = tmp_path / "home"
    home.write_text("a file where the home folder should be")  # stamps cannot be stored
    f = tmp_path / "w.bin"
    f.write_bytes(b"z" * 100)
    stamps.verified_sha256(f)
    stamps.forget_memory()
    assert stamps.verified_sha256(f) == hashlib.sha256(b"z" * 100).hexdigest()
    assert hashed == ["w.bin", "w.bin"]  # hashed each time, and no error
