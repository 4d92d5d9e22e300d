"""The store's file names, SQLite schema and passage text layout, shared by the runtime (which
reads stores) and the index builder (which writes them)."""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

SCHEMA_VERSION = 1  # a store with every page's vectors (`kb build --embed`)
LAZY_SCHEMA_VERSION = 2  # page_vectors empty: vectors are embedded when a page is first retrieved
SCHEMA_VERSIONS = (SCHEMA_VERSION, LAZY_SCHEMA_VERSION)
DB_NAME = "store.sqlite"
HNSW_NAME = "hnsw.bin"
MANIFEST_NAME = "manifest.json"
STORE_FILES = (DB_NAME, HNSW_NAME)  # the files a store may hold
REQUIRED_FILES = (DB_NAME,)  # hnsw.bin is optional: only store-wide search needs it
SEPARATOR = "####SPECIAL####SEPARATOR####"  # FActScore's passage separator in documents.text

SCHEMA_SQL = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE pages (id INTEGER PRIMARY KEY, title TEXT NOT NULL UNIQUE);
CREATE TABLE aliases (alias TEXT PRIMARY KEY, page_id INTEGER NOT NULL REFERENCES pages(id));
CREATE TABLE passages (
    id INTEGER PRIMARY KEY,
    page_id INTEGER NOT NULL REFERENCES pages(id),
    ordinal INTEGER NOT NULL,
    text TEXT NOT NULL,
    UNIQUE (page_id, ordinal)
);
CREATE TABLE page_vectors (
    page_id INTEGER PRIMARY KEY REFERENCES pages(id),
    dim INTEGER NOT NULL,
    vectors BLOB NOT NULL
);
CREATE VIRTUAL TABLE passages_fts USING fts5(text, content='', tokenize='unicode61 remove_diacritics 2');
"""
REQUIRED_TABLES = ("meta", "pages", "aliases", "passages", "page_vectors", "passages_fts")
REQUIRED_META = ("schema_version", "embed_model", "embed_sha256", "dim", "passage_count")

_MARKERS = re.compile(r"</?s>")


@dataclass(frozen=True)
class Passage:
    id: int  # passage id, stable within the store
    title: str  # page title
    text: str  # as stored, may contain <s>...</s> markers (FActScore DB layout)
    ordinal: int  # position within its page


def title_variants(title: str) -> list[str]:
    """A topic as given, then in Unicode NFC form, then trimmed, then both (each once)."""
    nfc = unicodedata.normalize("NFC", title)
    out: list[str] = []
    for t in (title, nfc, title.strip(), nfc.strip()):
        if t and t not in out:
            out.append(t)
    return out


def strip_markers(text: str) -> str:
    """Passage text with FActScore's ``<s>``/``</s>`` sentence markers removed."""
    return _MARKERS.sub("", text)


def passage_embedding_text(title: str, text: str) -> str:
    """SPEC FActScore 4: the text embedded for a passage is ``title + " " + text``, markers removed."""
    return title + " " + strip_markers(text)
