"""Same input, same store bytes: two builds give the same files and store_sha256 (issue 9).

The HNSW index used to be built with several insertion threads, so ``hnsw.bin`` (and with it
the store hash, which keys the retrieval cache) changed from build to build.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from fscore_lite.errors import StoreError
from fscore_lite.factscore.retrieve import Retriever
from fscore_lite.store import MANIFEST_NAME, open_store
from fscore_lite_index.build import build_store
from fscore_lite_index.writer import StoreWriter

from .conftest import EXAMPLES

DIM = 16


def _synthetic(path, hnsw=True):
    """2,000 random unit vectors in 100 pages: enough for threads to interleave if they could."""
    rng = np.random.default_rng(7)
    w = StoreWriter(path, DIM, hnsw=hnsw)
    for page in range(100):
        v = rng.normal(size=(20, DIM)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        w.add_page(f"Page {page}", [f"<s>passage {page}-{i}</s>" for i in range(20)], v)
    return w.finish({"embed_model": "random", "embed_sha256": "r" * 64, "dim": DIM, "passage_count": w.passage_count})


def _bytes(path):
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def test_writer_twice_gives_identical_bytes(tmp_path):
    a, b = _synthetic(tmp_path / "a"), _synthetic(tmp_path / "b")
    assert set(a["files"]) == {"store.sqlite", "hnsw.bin"}
    assert a == b and a["store_sha256"] == b["store_sha256"]
    assert _bytes(tmp_path / "a") == _bytes(tmp_path / "b")


def test_build_store_twice_gives_the_same_store(tmp_path, minilm_embedder):
    """A whole `kb build --hnsw` of the demo pages, twice, with 2 threads asked for."""
    shas = []
    for name in ("one", "two"):
        stats = build_store(EXAMPLES / "pages.jsonl", tmp_path / name, source_label="examples", snapshot="2026",
                            embedder=minilm_embedder, threads=2, progress=False, hnsw=True)
        shas.append(stats.store_sha256)
        assert json.loads((tmp_path / name / MANIFEST_NAME).read_text())["store_sha256"] == stats.store_sha256
    assert shas[0] == shas[1]
    assert _bytes(tmp_path / "one") == _bytes(tmp_path / "two")
    with open_store(tmp_path / "one") as s:
        assert s.has_hnsw and s.meta["hnsw_insert_threads"] == "1" and s.meta["hnsw"] == "yes"


def test_build_without_hnsw_is_reproducible_and_has_no_index(tmp_path, minilm_embedder):
    shas = [build_store(EXAMPLES / "pages.jsonl", tmp_path / n, embedder=minilm_embedder, progress=False).store_sha256
            for n in ("one", "two")]
    assert shas[0] == shas[1]
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == ["manifest.json", "store.sqlite"]
    with open_store(tmp_path / "one") as s:
        assert not s.has_hnsw and s.meta["hnsw"] == "no" and "hnsw_m" not in s.meta
        # retrieval for a known topic needs no index; store-wide search (--search-all) says how to add one
        strict = Retriever(s, minilm_embedder, k=2)
        assert [e.passage.title for e in strict.retrieve("Kō Itakura", "He is a footballer.")] == ["Kō Itakura"] * 2
        assert strict.retrieve("Not A Page", "He is a footballer.") == []
        wide = Retriever(s, minilm_embedder, k=2, search_all=True)
        with pytest.raises(StoreError, match=r"no HNSW index.*rebuilding the store with .*--hnsw"):
            wide.retrieve("Not A Page", "He is a footballer.")


@pytest.mark.llm
def test_score_search_all_without_hnsw_says_how_to_add_it(tmp_path, minilm_embedder, minilm_bundle_dir, capsys):
    """`score --search-all` on a store built without --hnsw: exit 2 with the rebuild command."""
    from fscore_lite.cli import main

    from .conftest import TEST_LLM

    store = tmp_path / "store"
    build_store(EXAMPLES / "pages.jsonl", store, embedder=minilm_embedder, progress=False)
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"topic": "Nobody Known", "facts": ["He was a footballer."]}) + "\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["score", str(src), "-o", str(tmp_path / "out.jsonl"), "--store", str(store), "--search-all",
              "--llm", TEST_LLM, "--threads", "1", "--no-cache", "--quiet"])
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and err.startswith("error: "), err
    assert "no HNSW index" in err and "--hnsw" in err and "Traceback" not in err
