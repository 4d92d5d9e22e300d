"""``fscore-lite kb build | info | search`` through the real entry point."""
from __future__ import annotations

import json

import numpy as np
import pytest

from fscore_lite.cli import main
from fscore_lite.store import open_store
from fscore_lite_index.writer import StoreWriter

PAGES = [
    {"topic": "Ko Itakura", "title": "Kō Itakura",
     "text": "Kō Itakura (born 27 January 1997) is a Japanese professional footballer who plays as a centre-back.\n\n\n"
             "== Club career ==\nItakura joined Kawasaki Frontale in 2015.\nHe moved to FC Groningen in the Netherlands in 2019."},
    {"title": "Travis Oliphant",
     "text": "Travis Oliphant is an American data scientist and businessman.\n\n\n== Career ==\n"
             "He created NumPy and contributed to SciPy. He founded Anaconda, first called Continuum Analytics."},
]


def run(capsys, *argv) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    out, err = capsys.readouterr()
    return exc.value.code or 0, out, err


@pytest.fixture(scope="module")
def built(tmp_path_factory, minilm_bundle_dir):
    tmp = tmp_path_factory.mktemp("kbcli")
    src = tmp / "pages.jsonl"
    src.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in PAGES), encoding="utf-8")
    return tmp, src


def test_build_info_search(built, capsys, minilm_bundle_dir):
    tmp, src = built
    store = tmp / "store"
    code, out, err = run(capsys, "kb", "build", str(src), "-o", str(store), "--threads", "1", "--embed", "--hnsw",
                         "--models-dir", str(minilm_bundle_dir), "--source", "test pages", "--snapshot", "2026")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["pages"] == 2 and summary["passages"] >= 2 and summary["aliases"] == 1
    assert "passages/s" in err  # the progress line
    assert summary["store_sha256"] == open_store(store).sha256

    code, out, err = run(capsys, "kb", "info", str(store))
    assert code == 0, err
    info = json.loads(out)
    assert info["pages"] == 2 and info["meta"]["source"] == "test pages" and info["meta"]["snapshot"] == "2026"
    assert info["embed_model"] == "all-minilm-l6-v2-int8"

    code, out, err = run(capsys, "kb", "search", str(store), "Who created NumPy?", "--k", "2",
                         "--models-dir", str(minilm_bundle_dir), "--threads", "1")
    assert code == 0, err
    hits = [json.loads(line) for line in out.splitlines()]
    assert len(hits) == 2 and hits[0]["title"] == "Travis Oliphant" and hits[0]["rank"] == 1
    assert hits[0]["score"] >= hits[1]["score"]
    assert {"id", "title", "ordinal", "score", "text"} <= set(hits[0])

    code, out, err = run(capsys, "kb", "search", str(store), 'Groningen "Netherlands', "--bm25", "--title", "Ko Itakura",
                         "--preview", "0")
    assert code == 0, err
    hits = [json.loads(line) for line in out.splitlines()]
    assert hits and all(h["title"] == "Kō Itakura" for h in hits) and "Groningen" in hits[0]["text"]

    code, out, err = run(capsys, "kb", "search", str(store), "football club", "--title", "Ko Itakura",
                         "--models-dir", str(minilm_bundle_dir), "--threads", "1", "--preview", "0")
    assert code == 0, err
    hits = [json.loads(line) for line in out.splitlines()]
    assert hits and all(h["title"] == "Kō Itakura" for h in hits)

    # the same build again is a no-op; a different input does not replace the store without --force
    code, out, err = run(capsys, "kb", "build", str(src), "-o", str(store), "--models-dir", str(minilm_bundle_dir),
                         "--source", "test pages", "--snapshot", "2026")
    assert code == 0 and json.loads(out)["up_to_date"] is True and "up to date" in err
    assert json.loads(out)["store_sha256"] == summary["store_sha256"]
    code, out, err = run(capsys, "kb", "build", str(src), "-o", str(store), "--models-dir", str(minilm_bundle_dir))
    assert code == 2 and "--force" in err  # the --source label differs


def test_search_refuses_other_embedding_model(tmp_path, capsys, minilm_bundle_dir):
    store = tmp_path / "store"
    w = StoreWriter(store, 384)
    v = np.ones((1, 384), dtype=np.float32) / np.sqrt(384)
    w.add_page("A", ["<s>A page.</s>"], v)
    w.finish({"embed_model": "all-minilm-l6-v2-int8", "embed_sha256": "0" * 64, "dim": 384, "passage_count": 1})
    code, out, err = run(capsys, "kb", "search", str(store), "page", "--models-dir", str(minilm_bundle_dir))
    assert code == 2 and "sha256" in err and "rebuild" in err and out == ""
    code, out, err = run(capsys, "kb", "search", str(store), "page", "--bm25")  # BM25 needs no model
    assert code == 0 and json.loads(out.splitlines()[0])["title"] == "A"


def test_errors_are_one_line(tmp_path, capsys):
    code, out, err = run(capsys, "kb", "info", str(tmp_path / "missing"))
    assert code == 2 and err.startswith("error: ") and "does not exist" in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"title": "A", "text": "x"}\nnot json\n', encoding="utf-8")
    code, out, err = run(capsys, "kb", "build", str(bad), "-o", str(tmp_path / "s"), "--quiet")
    assert code == 2 and f"{bad}:2" in err
    assert not (tmp_path / "s").exists()


def test_hnsw_is_opt_in(built, capsys, minilm_bundle_dir):
    tmp, src = built
    store = tmp / "plain"
    code, out, err = run(capsys, "kb", "build", str(src), "-o", str(store), "--threads", "1", "--quiet",
                         "--embed", "--models-dir", str(minilm_bundle_dir))
    assert code == 0, err
    assert sorted(p.name for p in store.iterdir()) == ["manifest.json", "store.sqlite"]
    code, out, err = run(capsys, "kb", "info", str(store))
    assert code == 0 and json.loads(out)["hnsw"] is False and json.loads(out)["meta"]["hnsw"] == "no"
    # topic-restricted search works; store-wide search says how to add the index
    code, out, err = run(capsys, "kb", "search", str(store), "football club", "--title", "Ko Itakura",
                         "--models-dir", str(minilm_bundle_dir), "--threads", "1")
    assert code == 0 and json.loads(out.splitlines()[0])["title"] == "Kō Itakura"
    code, out, err = run(capsys, "kb", "search", str(store), "Who created NumPy?",
                         "--models-dir", str(minilm_bundle_dir), "--threads", "1")
    assert code == 2 and err.startswith("error: ") and "no HNSW index" in err and "--hnsw" in err and out == ""
    # asking for the index on the same input without --force says what to do
    code, out, err = run(capsys, "kb", "build", str(src), "-o", str(store), "--embed", "--hnsw", "--quiet",
                         "--models-dir", str(minilm_bundle_dir))
    assert code == 2 and "without an HNSW index" in err and "--force" in err
    code, out, err = run(capsys, "kb", "build", str(src), "-o", str(store), "--embed", "--hnsw", "--force", "--quiet",
                         "--threads", "1", "--models-dir", str(minilm_bundle_dir))
    assert code == 0, err
    assert (store / "hnsw.bin").exists() and open_store(store).has_hnsw


def test_kb_verify_hashes_every_file(tmp_path, capsys, monkeypatch):
    import fscore_lite.stamps as stamps

    monkeypatch.setenv("FSCORE_LITE_HOME", str(tmp_path / "home"))
    store = tmp_path / "store"
    w = StoreWriter(store, 4)
    w.add_page("A", ["<s>A page.</s>"], np.eye(4, dtype=np.float32)[:1])
    w.finish({"embed_model": "m", "embed_sha256": "0" * 64, "dim": 4, "passage_count": 1})
    open_store(store).close()  # may stamp the files
    calls = []
    real = stamps.sha256_file
    monkeypatch.setattr(stamps, "sha256_file", lambda p, *a, **k: calls.append(str(p)) or real(p, *a, **k))
    code, out, err = run(capsys, "kb", "verify", str(store))
    assert code == 0, err
    assert sorted(calls) == sorted(str(store / n) for n in ("store.sqlite", "hnsw.bin"))  # hashed, not stamped
    assert "ok     hnsw.bin" in out and "ok     store.sqlite" in out and "store_sha256" in out
    db = store / "store.sqlite"
    data = bytearray(db.read_bytes())
    data[-10] ^= 0xFF  # same size, other bytes
    db.write_bytes(bytes(data))
    code, out, err = run(capsys, "kb", "verify", str(store))
    assert code == 1 and "FAILED store.sqlite" in out and "ok     hnsw.bin" in out and "sha256" in err
    code, out, err = run(capsys, "kb", "verify", str(tmp_path / "missing"))
    assert code == 2 and err.startswith("error: ") and "does not exist" in err


def test_default_build_is_lazy_and_embeds_on_first_search(built, capsys, minilm_bundle_dir):
    """`kb build` writes no vectors; `kb search --title` embeds that page once, with the eager bytes."""
    tmp, src = built
    lazy, eager = tmp / "lazy", tmp / "eager"
    code, out, err = run(capsys, "kb", "build", str(src), "-o", str(lazy), "--quiet", "--threads", "1",
                         "--models-dir", str(minilm_bundle_dir))
    assert code == 0, err
    code, out, err = run(capsys, "kb", "info", str(lazy))
    info = json.loads(out)
    assert info["vectors"] == "lazy" and info["schema_version"] == 2 and info["meta"]["vectors"] == "lazy"
    code, out, err = run(capsys, "kb", "build", str(src), "-o", str(lazy), "--hnsw", "--force", "--quiet",
                         "--models-dir", str(minilm_bundle_dir))
    assert code == 2 and "--hnsw" in err and "--embed" in err
    assert open_store(lazy).info()["vectors"] == "lazy"  # the refused build left the store alone
    code, out, err = run(capsys, "kb", "search", str(lazy), "football club", "--title", "Ko Itakura",
                         "--models-dir", str(minilm_bundle_dir), "--threads", "1")
    assert code == 0, err
    assert (lazy / "vectors.sqlite").exists()
    code, _, err = run(capsys, "kb", "build", str(src), "-o", str(eager), "--embed", "--quiet", "--threads", "1",
                       "--models-dir", str(minilm_bundle_dir))
    assert code == 0, err
    code, eager_out, err = run(capsys, "kb", "search", str(eager), "football club", "--title", "Ko Itakura",
                               "--models-dir", str(minilm_bundle_dir), "--threads", "1")
    assert code == 0 and eager_out == out
    with open_store(eager) as e, open_store(lazy) as s:
        assert s.vector_file().count() == 1  # one page embedded, once
        assert s.page_vectors("Kō Itakura").tobytes() == e.page_vectors("Kō Itakura").tobytes()


def test_resume_keeps_a_store_of_another_input(tmp_path, capsys, minilm_bundle_dir):
    """`kb build --resume` over a finished store built from another input: refused, the store kept;
    with the same input it is up to date."""
    a, b, store = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "store"
    a.write_text(json.dumps(PAGES[0], ensure_ascii=False) + "\n", encoding="utf-8")
    b.write_text(json.dumps(PAGES[1], ensure_ascii=False) + "\n", encoding="utf-8")
    common = ["-o", str(store), "--models-dir", str(minilm_bundle_dir), "--quiet", "--threads", "1", "--workers", "0"]
    code, out, err = run(capsys, "kb", "build", str(a), *common)
    assert code == 0, err
    before = {p.name: p.read_bytes() for p in store.iterdir()}
    code, out, err = run(capsys, "kb", "build", str(b), *common, "--embed", "--resume")
    assert code == 2 and "built from another input" in err and "--force" in err, err
    assert {p.name: p.read_bytes() for p in store.iterdir()} == before
    code, out, err = run(capsys, "kb", "build", str(a), *common, "--resume")
    assert code == 0 and json.loads(out)["up_to_date"] is True, err


def test_flipped_page_vector_bytes_are_caught(tmp_path, capsys, minilm_bundle_dir):
    """A byte flipped in a lazily embedded page's vectors (vectors.sqlite): `kb verify` fails naming
    the file; retrieval drops the row, embeds the page again and ranks as before the flip."""
    import sqlite3

    src, store = tmp_path / "pages.jsonl", tmp_path / "store"
    src.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in PAGES), encoding="utf-8")
    common = ["--models-dir", str(minilm_bundle_dir), "--threads", "1"]
    code, out, err = run(capsys, "kb", "build", str(src), "-o", str(store), "--quiet", "--workers", "0", *common)
    assert code == 0, err
    query = ["kb", "search", str(store), "football club", "--title", "Ko Itakura", *common]
    code, clean, err = run(capsys, *query)
    assert code == 0, err
    code, out, err = run(capsys, "kb", "verify", str(store))
    assert code == 0 and "ok     vectors.sqlite" in out, err
    con = sqlite3.connect(store / "vectors.sqlite")
    (key, blob), = con.execute("SELECT key, vectors FROM page_vectors").fetchall()
    flipped = bytearray(blob)
    flipped[5] ^= 0x40
    con.execute("UPDATE page_vectors SET vectors = ? WHERE key = ?", (bytes(flipped), key))
    con.commit()
    con.close()
    code, out, err = run(capsys, "kb", "verify", str(store))
    assert code == 1 and "FAILED vectors.sqlite: 1 page vector row(s) do not match their hash" in err
    code, again, err = run(capsys, *query)
    assert code == 0 and again == clean and "do not match their hash were dropped" in err
    code, out, err = run(capsys, "kb", "verify", str(store))
    assert code == 0, err


def test_duplicate_titles_are_reported_even_quiet(tmp_path, capsys, minilm_bundle_dir):
    src, store = tmp_path / "pages.jsonl", tmp_path / "store"
    src.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in [PAGES[1], PAGES[1] | {"text": "Other."}]),
                   encoding="utf-8")
    code, out, err = run(capsys, "kb", "build", str(src), "-o", str(store), "--models-dir", str(minilm_bundle_dir),
                         "--quiet", "--workers", "0")
    assert code == 0 and json.loads(out)["duplicate_titles_skipped"] == 1, err
    assert f"warning: {src}: 1 page(s) skipped because an earlier page has the same title" in err
