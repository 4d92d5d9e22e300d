"""The passage store: a read-only folder of pages, passages, BM25 index and vectors.

Layout of a store folder::

    store.sqlite   meta, pages, aliases, passages, passages_fts (FTS5), page_vectors
    hnsw.bin       optional (``kb build --hnsw``): hnswlib index over all passage vectors
                   (space 'ip', labels = passage ids), used only by store-wide search (--search-all)
    manifest.json  sha256 and size of each file, and store_sha256 naming the whole store
    vectors.sqlite not part of the store: page vectors embedded at first retrieval for a store
                   built without ``--embed`` (schema 2, meta ``vectors = lazy``; see page_vectors.py)

Passage texts keep FActScore's knowledge-DB layout (sentences wrapped in ``<s>...</s>``).
A page's passages have consecutive ids in ordinal order, and its vectors are one float32
blob, so reading a page and its vectors is two indexed queries. Index builders
(``index_builder``) write stores with the schema defined here; the runtime only reads.

The package, by responsibility: :mod:`.schema` (file names, SQLite schema, passage text layout),
:mod:`.integrity` (the manifest and the checks that refuse a damaged store), :mod:`.pages` (title,
alias and passage lookups), :mod:`.vectors` (page vectors, the embedder check, HNSW search) and
:mod:`.fts` (FTS5 BM25 search). :class:`PassageStore` opens the database and combines them; every
public name is importable from ``fscore_lite.store``.
"""
from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from ..errors import StoreError
from ..page_vectors import DEFAULT_BATCH
from .fts import FullTextSearch, fts_query
from .integrity import check_manifest, files_store_sha256, verify_store
from .schema import (
    DB_NAME,
    HNSW_NAME,
    LAZY_SCHEMA_VERSION,
    MANIFEST_NAME,
    REQUIRED_FILES,
    REQUIRED_META,
    REQUIRED_TABLES,
    SCHEMA_SQL,
    SCHEMA_VERSION,
    SCHEMA_VERSIONS,
    SEPARATOR,
    STORE_FILES,
    Passage,
    passage_embedding_text,
    strip_markers,
    title_variants,
)
from .vectors import VectorSearch

__all__ = [
    "DB_NAME", "HNSW_NAME", "LAZY_SCHEMA_VERSION", "MANIFEST_NAME", "REQUIRED_FILES", "REQUIRED_META",
    "REQUIRED_TABLES", "SCHEMA_SQL", "SCHEMA_VERSION", "SCHEMA_VERSIONS", "SEPARATOR", "STORE_FILES",
    "Passage", "PassageStore", "files_store_sha256", "fts_query", "open_store", "passage_embedding_text",
    "strip_markers", "title_variants", "verify_store",
]


class PassageStore(VectorSearch, FullTextSearch):
    """Read-only access to a passage store folder (see the module docstring for the layout).

    Opening checks the manifest: every file present with its recorded size, and with
    ``verify=True`` (the default) its sha256, hashed only when the file changed since it was last
    verified (:mod:`fscore_lite.stamps`; :func:`verify_store` always hashes). A store without
    ``hnsw.bin`` opens normally; only :meth:`search_vectors` needs it. Methods are safe to call
    from several threads.
    """

    def __init__(self, path: str | Path, verify: bool = True):
        self.path = Path(path)
        manifest = check_manifest(self.path, verify)
        self.manifest = manifest
        self.sha256: str = manifest["store_sha256"]
        db = (self.path / DB_NAME).resolve()
        try:
            self._db = sqlite3.connect(db.as_uri() + "?mode=ro&immutable=1", uri=True, check_same_thread=False)
            tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type IN ('table')")}
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{db} is not a readable SQLite database: {e}") from None
        missing = [t for t in REQUIRED_TABLES if t not in tables]
        if missing:
            self._db.close()
            raise StoreError(f"{db} is not a passage store database (missing tables: {', '.join(missing)})")
        self._lock = threading.RLock()
        from ..migrations import upgrade_store_meta

        self.meta: dict[str, str] = upgrade_store_meta(dict(self._db.execute("SELECT key, value FROM meta")))
        lacking = [k for k in REQUIRED_META if k not in self.meta]
        if lacking:
            self._db.close()
            raise StoreError(f"{db} lacks the meta keys {', '.join(lacking)}")
        if self.meta["schema_version"] != str(manifest["schema_version"]):
            self._db.close()
            raise StoreError(f"{db} has schema {self.meta['schema_version']}, its manifest says "
                             f"{manifest['schema_version']}: the store is damaged; rebuild it")
        self.embed_model: str = self.meta["embed_model"]
        self.embed_sha256: str = self.meta["embed_sha256"]
        self.dim: int = int(self.meta["dim"])
        self.lazy: bool = manifest["schema_version"] == LAZY_SCHEMA_VERSION  # built without --embed
        self.embed_batch_size = int(self.meta["embed_batch_size"])
        self._hnsw = None
        self._vector_file = None

    # -- lifecycle ------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
            self._hnsw = None
            if self._vector_file is not None:
                self._vector_file.close()
                self._vector_file = None

    def __enter__(self) -> "PassageStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _q(self, sql: str, params=()) -> list[tuple]:
        with self._lock:
            if self._db is None:
                raise StoreError(f"passage store {self.path} is closed")
            return self._db.execute(sql, params).fetchall()

    # -- info -----------------------------------------------------------------------------
    def info(self) -> dict:
        counts = {
            "pages": self._q("SELECT count(*) FROM pages")[0][0],
            "passages": self._q("SELECT count(*) FROM passages")[0][0],
            "aliases": self._q("SELECT count(*) FROM aliases")[0][0],
        }
        files = {name: f["size"] for name, f in self.manifest["files"].items()}
        return {
            "path": str(self.path),
            "store_sha256": self.sha256,
            "schema_version": self.manifest["schema_version"],
            **counts,
            "vectors": "lazy" if self.lazy else "all",
            "dim": self.dim,
            "embed_model": self.embed_model,
            "embed_sha256": self.embed_sha256,
            "files": files,
            "hnsw": self.has_hnsw,
            "total_bytes": sum(files.values()),
            "meta": dict(self.meta),
        }

    def __repr__(self) -> str:
        return f"PassageStore({str(self.path)!r}, sha256={self.sha256[:12]})"


def open_store(path: str | Path, verify: bool = True) -> PassageStore:
    """Open a passage store folder read-only (see :class:`PassageStore`)."""
    return PassageStore(path, verify=verify)
