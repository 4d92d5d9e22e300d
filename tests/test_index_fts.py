"""The full-text index a `kb build` writes: built for speed (SQL marker stripping, a large FTS5
pending-terms hash, one 'optimize'), it must hold exactly what the plain way gives: every passage's
text without <s>/</s>, tokenized by unicode61, with the same BM25 scores."""
from __future__ import annotations

import json
import random
import sqlite3

import pytest

import fscore_lite_index.writer as writer_mod
from fscore_lite.store import fts_query, open_store, strip_markers
from fscore_lite_index.build import build_store

WIKI = "wiki-factscore-dev/pages.jsonl"
TOKENIZE = "unicode61 remove_diacritics 2"


@pytest.mark.parametrize("text", [
    "", "<s>a</s>", "<</s>s>", "<<s>/s>", "</<s>s>", "<s<s>>", "<s>></s>", "<//s>", "<s/>", "x</s</s>>y",
    "<S>kept</S>", "é<s>ü</s>ß", "<s>\x00</s>",
])
def test_fts_text_sql_removes_what_strip_markers_removes(text):
    db = sqlite3.connect(":memory:")
    got = db.execute(f"SELECT {writer_mod.FTS_TEXT_SQL} FROM (SELECT ? AS text)", (text,)).fetchone()[0]
    assert got == strip_markers(text)


def test_fts_text_sql_agrees_with_strip_markers_on_random_strings():
    rng = random.Random(3)
    db = sqlite3.connect(":memory:")
    pieces = ["<", "s", "/", ">", "<s>", "</s>", "a", " "]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 20))) for _ in range(3000)]
    got = [r[0] for r in db.execute(
        f"SELECT {writer_mod.FTS_TEXT_SQL} FROM (SELECT value AS text, key FROM json_each(?)) ORDER BY key",
        (json.dumps(texts),))]
    assert got == [strip_markers(t) for t in texts]
    assert sum(t != strip_markers(t) for t in texts) > 1000  # the strings did have markers to remove


def _reference_fts(passages: list[tuple[int, str]]) -> sqlite3.Connection:
    """The index built the plain way: default FTS5 settings, markers removed in Python."""
    ref = sqlite3.connect(":memory:")
    ref.execute(f"CREATE VIRTUAL TABLE passages_fts USING fts5(text, content='', tokenize='{TOKENIZE}')")
    ref.executemany("INSERT INTO passages_fts (rowid, text) VALUES (?, ?)",
                    [(i, strip_markers(t)) for i, t in passages])
    ref.execute("INSERT INTO passages_fts (passages_fts) VALUES ('optimize')")
    return ref


def _instances(db: sqlite3.Connection) -> list[tuple]:
    db.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, passages_fts, instance)")
    rows = db.execute("SELECT term, doc, col, offset FROM temp.v ORDER BY term, doc, offset").fetchall()
    db.execute("DROP TABLE temp.v")
    return rows


@pytest.mark.parametrize("hash_bytes", [writer_mod.FTS_HASH_BYTES, 2048])
def test_built_index_equals_the_plain_one(data_dir, minilm_embedder, tmp_path, monkeypatch, hash_bytes):
    """2 KiB of pending terms: dozens of segments, merged as they pile up, then optimized."""
    monkeypatch.setattr(writer_mod, "FTS_HASH_BYTES", hash_bytes)
    out = tmp_path / "store"
    build_store(data_dir / WIKI, out, embedder=minilm_embedder, progress=False, embed=False, workers=0)
    db = sqlite3.connect(out / "store.sqlite")
    passages = db.execute("SELECT id, text FROM passages ORDER BY id").fetchall()
    assert len(passages) > 500 and any("<s>" in t for _, t in passages)
    ref = _reference_fts(passages)
    assert _instances(db) == _instances(ref)
    # the build's hash size is not left in the store's FTS5 configuration
    assert db.execute("SELECT k, v FROM passages_fts_config").fetchall() == [("version", 4)]
    sql = "SELECT rowid, bm25(passages_fts) FROM passages_fts WHERE passages_fts MATCH ? ORDER BY 2, rowid LIMIT 20"
    rng = random.Random(5)
    words = [w for _, t in rng.sample(passages, 40) for w in strip_markers(t).split()[:3] if w.isalpha()]
    queries = ["Southern Hemisphere", "born footballer", "university of"] + words[:40]
    for q in queries:
        assert db.execute(sql, (fts_query(q),)).fetchall() == ref.execute(sql, (fts_query(q),)).fetchall(), q
    db.close()
    with open_store(out) as store:  # and through the reader
        hits = store.search_bm25("university", k=5)
        assert hits and [h[0].id for h in hits] == [r[0] for r in ref.execute(sql, (fts_query("university"),))][:5]
