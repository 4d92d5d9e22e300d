"""The read-only passage store: lookups, vectors, BM25, HNSW, and refusing damaged stores.

Most tests use a small store written directly with synthetic vectors (no model needed).
"""
from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from fscore_lite.errors import FscoreError, StoreError
from fscore_lite.store import (
    DB_NAME,
    MANIFEST_NAME,
    Passage,
    PassageStore,
    fts_query,
    open_store,
    passage_embedding_text,
    strip_markers,
)
from fscore_lite_index.writer import StoreWriter

DIM = 8

PAGES = {
    "Alpha Centauri": (
        ["<s>Alpha Centauri Alpha Centauri is a star system.</s><s>It is 4.37 light-years away.</s>",
         "<s>Observation. The system is visible from the Southern Hemisphere.</s>"],
        ("Alpha Cen",),
    ),
    "Kō Itakura": (
        ["<s>Kō Itakura Kō Itakura is a Japanese footballer.</s>",
         "<s>Club career. He joined Kawasaki Frontale in 2015.</s>",
         '<s>He said "NEAR AND NOT" in an interview (sic) *really*.</s>'],
        ("Ko Itakura",),
    ),
    "Empty Page": ([], ()),
}


def _vectors(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def write_store(path, embed_sha="a" * 64):
    w = StoreWriter(path, DIM)
    all_vecs = {}
    for seed, (title, (psgs, aliases)) in enumerate(PAGES.items()):
        vecs = _vectors(len(psgs), seed)
        all_vecs[title] = vecs
        w.add_page(title, psgs, vecs, aliases)
    w.finish({"embed_model": "test-embed", "embed_sha256": embed_sha, "dim": DIM,
              "passage_count": w.passage_count, "source": "unit test"})
    return all_vecs


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    path = tmp_path_factory.mktemp("store") / "s"
    vecs = write_store(path)
    return path, vecs


@pytest.fixture()
def store(built):
    s = open_store(built[0])
    yield s
    s.close()


def test_open_and_meta(store, built):
    assert isinstance(store, PassageStore)
    assert store.path == built[0]
    assert store.embed_model == "test-embed" and store.embed_sha256 == "a" * 64
    assert store.meta["source"] == "unit test"
    assert len(store.sha256) == 64
    manifest = json.loads((built[0] / MANIFEST_NAME).read_text())
    assert store.sha256 == manifest["store_sha256"]


def test_titles_pages_and_aliases(store):
    assert store.titles() == list(PAGES)
    assert store.has_page("Kō Itakura") and store.has_page("Ko Itakura")
    assert not store.has_page("ko itakura")
    ps = store.page_passages("Ko Itakura")  # by alias: the page's own title comes back
    assert [p.ordinal for p in ps] == [0, 1, 2]
    assert all(p.title == "Kō Itakura" for p in ps)
    assert [p.text for p in ps] == PAGES["Kō Itakura"][0]
    ids = [p.id for p in ps]
    assert ids == list(range(ids[0], ids[0] + 3))
    assert store.page_passages("Nowhere") == []
    assert store.page_passages("Empty Page") == []
    assert store.resolve_title("Alpha Cen") == "Alpha Centauri"


def test_page_vectors_align_with_passages(store, built):
    for title in PAGES:
        v = store.page_vectors(title)
        assert v.dtype == np.float32 and v.shape == (len(PAGES[title][0]), DIM)
        np.testing.assert_array_equal(v, built[1][title])
    assert store.page_vectors("Nowhere").shape == (0, DIM)


def test_search_vectors_finds_the_passage(store, built):
    target = store.page_passages("Alpha Centauri")[1]
    hits = store.search_vectors(built[1]["Alpha Centauri"][1], k=3)
    assert hits[0][0] == target
    assert hits[0][1] == pytest.approx(1.0, abs=1e-5)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    assert len(store.search_vectors(built[1]["Alpha Centauri"][1], k=100)) == 5  # clamped to the store size
    with pytest.raises(ValueError):
        store.search_vectors(np.zeros(DIM + 1, dtype=np.float32), k=1)


def test_search_bm25_ranks_and_filters(store):
    hits = store.search_bm25("Southern Hemisphere visible", k=5)
    assert hits[0][0].title == "Alpha Centauri" and hits[0][0].ordinal == 1
    assert all(isinstance(p, Passage) and isinstance(s, float) for p, s in hits)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    only = store.search_bm25("Kawasaki footballer system", k=5, title="Ko Itakura")
    assert only and all(p.title == "Kō Itakura" for p, _ in only)
    assert store.search_bm25("Kawasaki", k=5, title="Nowhere") == []
    assert store.search_bm25("kawasaki", k=5)[0][0].ordinal == 1  # case-insensitive


@pytest.mark.parametrize("query,top", [
    ('"unbalanced', None), ("NEAR AND NOT", "NEAR AND NOT"), ("*really*", "NEAR AND NOT"), ("(sic)", "NEAR AND NOT"),
    ("title:Kō", "Kō Itakura is a Japanese"), ("Frontale OR (b", "Kawasaki Frontale"), ("^x -y", None), ("'", None),
])
def test_search_bm25_escapes_fts_syntax(store, query, top):
    """FTS5 syntax in a query is read as plain words: no syntax error, and the passage holding
    the words ranks first (no passage holds them: no hit)."""
    hits = store.search_bm25(query, k=3)
    if top is None:
        assert hits == []
    else:
        assert hits and top in hits[0][0].text


def test_search_bm25_operators_are_words(store):
    hits = store.search_bm25("NEAR", k=3)
    assert hits and "NEAR AND NOT" in hits[0][0].text
    assert store.search_bm25("", k=3) == [] and store.search_bm25("?!", k=3) == []
    assert fts_query('say "hi" hi') == '"say" OR "hi"'


def test_markers_and_embedding_text():
    assert strip_markers("<s>One.</s><s>Two.</s>") == "One.Two."
    assert passage_embedding_text("T", "<s>One.</s>") == "T One."


def test_info(store):
    info = store.info()
    assert info["pages"] == 3 and info["passages"] == 5 and info["aliases"] == 2
    assert info["dim"] == DIM and info["store_sha256"] == store.sha256
    assert set(info["files"]) == {"store.sqlite", "hnsw.bin"}
    json.dumps(info)


def test_threads_can_share_a_store(store):
    errors = []

    def work():
        try:
            for _ in range(20):
                assert len(store.page_passages("Kō Itakura")) == 3
                store.search_bm25("footballer", k=2)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_closed_store_says_so(built):
    s = open_store(built[0])
    s.close()
    with pytest.raises(StoreError, match="closed"):
        s.titles()


# --- refusing missing, malformed or modified stores -------------------------------------


def test_missing_store(tmp_path):
    with pytest.raises(StoreError, match="does not exist"):
        open_store(tmp_path / "nope")
    with pytest.raises(StoreError, match="manifest.json is missing"):
        open_store(tmp_path)


def test_hash_mismatch_is_refused(tmp_path):
    path = tmp_path / "s"
    write_store(path)
    db = path / DB_NAME
    data = bytearray(db.read_bytes())
    data[-10] ^= 0xFF  # same size, different content
    db.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="sha256"):
        open_store(path)
    open_store(path, verify=False).close()  # sizes still match: opening without hashing works


def test_size_mismatch_and_malformed_manifest(tmp_path):
    path = tmp_path / "s"
    write_store(path)
    with open(path / "hnsw.bin", "ab") as f:
        f.write(b"x")
    with pytest.raises(StoreError, match="bytes"):
        open_store(path, verify=False)
    (path / MANIFEST_NAME).write_text("{not json")
    with pytest.raises(StoreError, match="malformed"):
        open_store(path)


def test_tampered_manifest_is_refused(tmp_path):
    path = tmp_path / "s"
    write_store(path)
    m = json.loads((path / MANIFEST_NAME).read_text())
    m["files"]["store.sqlite"]["sha256"] = "0" * 64
    (path / MANIFEST_NAME).write_text(json.dumps(m))
    with pytest.raises(StoreError, match="inconsistent"):
        open_store(path)


def test_writer_refuses_to_overwrite_and_replaces_with_force(tmp_path):
    path = tmp_path / "s"
    write_store(path)
    before = open_store(path).sha256
    with pytest.raises(FscoreError, match="--force"):
        StoreWriter(path, DIM)
    w = StoreWriter(path, DIM, overwrite=True)
    w.add_page("Only", ["<s>Only page.</s>"], _vectors(1, 9))
    w.finish({"embed_model": "m", "embed_sha256": "b" * 64, "dim": DIM, "passage_count": 1})
    s = open_store(path)
    assert s.titles() == ["Only"] and s.sha256 != before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]  # no temporary folders left


def test_aborted_writer_leaves_nothing(tmp_path):
    w = StoreWriter(tmp_path / "s", DIM)
    w.add_page("A", ["<s>a</s>"], _vectors(1, 1))
    with pytest.raises(ValueError):
        w.add_page("B", ["<s>b</s>"], _vectors(2, 1))  # wrong number of vectors
    w.abort()
    assert list(tmp_path.iterdir()) == []


def test_check_embedder(store):
    class Fake:
        name, sha256 = "test-embed", "a" * 64

    store.check_embedder(Fake())
    Fake.sha256 = "b" * 64
    with pytest.raises(StoreError, match="sha256"):
        store.check_embedder(Fake())


# --- the HNSW index is optional ------------------------------------------------------------


def test_store_without_hnsw_opens_and_says_how_to_add_it(tmp_path):
    path = tmp_path / "s"
    w = StoreWriter(path, DIM, hnsw=False)
    vecs = _vectors(2, 3)
    w.add_page("Alpha Centauri", PAGES["Alpha Centauri"][0], vecs, ("Alpha Cen",))
    w.finish({"embed_model": "test-embed", "embed_sha256": "a" * 64, "dim": DIM, "passage_count": 2})
    assert sorted(p.name for p in path.iterdir()) == ["manifest.json", "store.sqlite"]
    assert set(json.loads((path / MANIFEST_NAME).read_text())["files"]) == {"store.sqlite"}
    with open_store(path) as s:
        assert not s.has_hnsw and s.info()["hnsw"] is False and set(s.info()["files"]) == {"store.sqlite"}
        # everything topic-restricted works without the index
        np.testing.assert_array_equal(s.page_vectors("Alpha Cen"), vecs)
        assert s.search_bm25("Southern Hemisphere", k=1, title="Alpha Centauri")[0][0].ordinal == 1
        with pytest.raises(StoreError, match=r"no HNSW index.*--search-all.*kb build .*--hnsw --force"):
            s.search_vectors(vecs[0], k=1)


def test_store_with_hnsw_says_so(store):
    assert store.has_hnsw and store.info()["hnsw"] is True


def test_manifest_must_list_the_database(tmp_path):
    path = tmp_path / "s"
    write_store(path)
    m = json.loads((path / MANIFEST_NAME).read_text())
    del m["files"]["store.sqlite"]
    (path / MANIFEST_NAME).write_text(json.dumps(m))
    with pytest.raises(StoreError, match="does not list store.sqlite"):
        open_store(path)
