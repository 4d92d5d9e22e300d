"""Readers for the knowledge sources ``kb build`` ingests; each yields :class:`SourcePage`.

- ``factscore-db``: FActScore's SQLite ``documents(title PRIMARY KEY, text)``, a page's
  passages joined by ``####SPECIAL####SEPARATOR####``; passages are kept exactly as stored.
- ``tsv``: ``id <TAB> text <TAB> title`` rows, ``text`` in the same layout (the RAGLAB
  enwiki-20230401 sample); no header, though an ``id text title`` header line is skipped.
- ``jsonl``: ``{"title", "text"}`` pages of MediaWiki plain text, to be chunked; a ``topic``
  key that differs from ``title`` becomes an alias of the page. Other keys are ignored.
- ``mediawiki``: a MediaWiki XML dump (``*-pages-articles*.xml.bz2`` or plain ``.xml``); see
  :mod:`index_builder.mediawiki`.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Iterator

from fscore_lite.errors import InputError
from fscore_lite.io import read_jsonl, require_text
from fscore_lite.store import SEPARATOR

from .mediawiki import is_mediawiki_dump, read_mediawiki
from .pages import SourcePage

FORMATS = ("auto", "factscore-db", "jsonl", "tsv", "mediawiki")
CHUNKED_FORMATS = ("jsonl", "mediawiki")  # pages given as text, chunked by the builder


def detect_format(path: str | Path) -> str:
    """``factscore-db`` for an SQLite file, ``jsonl`` or ``tsv`` by suffix, else by content."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, None, "file not found")
    if path.is_dir():
        raise InputError(path, None, "is a folder; give a .db, .jsonl or .tsv file")
    with open(path, "rb") as f:
        head = f.read(4096)
    if head.startswith(b"SQLite format 3\x00"):
        return "factscore-db"
    if (head.startswith(b"BZh") or path.suffix.lower() == ".xml") and is_mediawiki_dump(path, head):
        return "mediawiki"
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    if suffix in (".tsv", ".tab"):
        return "tsv"
    first = next((ln for ln in head.splitlines() if ln.strip()), b"")
    if first.lstrip().startswith(b"{"):
        return "jsonl"
    if first.count(b"\t") >= 2:
        return "tsv"
    raise InputError(path, None, "cannot tell the format; pass --format factscore-db, jsonl, tsv or mediawiki")


def read_pages(path: str | Path, fmt: str = "auto", position: list[int] | None = None) -> Iterator[SourcePage]:
    """The source's pages in order. ``position``: kept at ``[bytes read, total]`` where the
    reader can tell (dumps, TSV), ``[rows read, rows]`` for a FActScore DB, for the ETA."""
    if fmt not in FORMATS:
        raise InputError(path, None, f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt == "mediawiki":
        return read_mediawiki(path, position)
    if fmt == "factscore-db":
        return read_factscore_db(path, position)
    if fmt == "tsv":
        return read_tsv(path, position)
    return read_jsonl_pages(path)


def read_factscore_db(path: str | Path, position: list[int] | None = None) -> Iterator[SourcePage]:
    """Pages of a FActScore knowledge DB, passages split on the separator, unchanged."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, None, "file not found")
    try:
        con = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
        cols = [r[1] for r in con.execute("PRAGMA table_info(documents)")]
    except sqlite3.DatabaseError as e:
        raise InputError(path, None, f"not a readable SQLite database: {e}") from None
    try:
        if not {"title", "text"} <= set(cols):
            raise InputError(path, None, "no table documents(title, text): not a FActScore knowledge DB")
        total = con.execute("SELECT count(*) FROM documents").fetchone()[0] if position is not None else 0
        for n, (rowid, title, text) in enumerate(con.execute("SELECT rowid, title, text FROM documents ORDER BY rowid")):
            if position is not None:
                position[:] = [n + 1, total]
            where = f"{path}: documents row {rowid}"
            if not isinstance(title, str) or not title.strip():
                raise InputError(path, None, f"documents row {rowid}: title is not a non-empty string")
            if not isinstance(text, str):
                raise InputError(path, None, f"documents row {rowid} ({title!r}): text is not a string")
            yield SourcePage(title=title, where=where, passages=tuple(text.split(SEPARATOR)))
    except sqlite3.DatabaseError as e:
        raise InputError(path, None, f"reading documents failed: {e}") from None
    finally:
        con.close()


def read_tsv(path: str | Path, position: list[int] | None = None) -> Iterator[SourcePage]:
    """Pages of an ``id<TAB>text<TAB>title`` file in the knowledge-DB text layout."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, None, "file not found")
    size, done = path.stat().st_size, 0
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            done += len(raw)
            if position is not None:
                position[:] = [done, size]
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError(path, lineno, f"not valid UTF-8 (byte {e.start})") from None
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != 3:
                raise InputError(path, lineno, f"expected 3 tab-separated fields (id, text, title), got {len(fields)}")
            _id, text, title = fields
            if lineno == 1 and [x.strip().lower() for x in fields] == ["id", "text", "title"]:
                continue  # a header line
            if not title.strip():
                raise InputError(path, lineno, "empty title")
            if not text.strip():
                raise InputError(path, lineno, "empty text")
            yield SourcePage(title=title, where=f"{path}:{lineno}", passages=tuple(text.split(SEPARATOR)))


def read_jsonl_pages(path: str | Path) -> Iterator[SourcePage]:
    """Pages of a JSONL file: ``title`` and ``text`` required, ``topic`` an optional alias."""
    for rec in read_jsonl(path):
        title = require_text(path, rec, "title")
        text = require_text(path, rec, "text")
        aliases: tuple[str, ...] = ()
        if "topic" in rec.data and rec.data["topic"] is not None:
            topic = require_text(path, rec, "topic")
            if topic != title:
                aliases = (topic,)
        yield SourcePage(title=title, where=f"{path}:{rec.line}", text=text, aliases=aliases)
