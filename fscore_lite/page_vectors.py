"""Page vectors, embedded once and kept: what a store built without ``--embed`` retrieves with.

A Wikipedia-sized store is built without vectors (``kb build``); the first run that retrieves
from a page embeds that page's passages and keeps the vectors in a side file, so every later run
reads them. The vectors are the bytes an eager build (``kb build --embed``) writes, because both
go through :func:`embed_page`: the page's texts alone, in batches of the store's batch size (the
int8 model quantises each batch as a whole, so a page embedded beside other pages would differ).

The side file is ``vectors.sqlite`` in the store's folder, or, when that folder is read-only,
``<home>/vectors/<store_sha256>.sqlite``. One row per page, keyed by the sha256 of the
embedder's sha256, the batch size and the page's embedding texts: a row never goes stale, and a
store rebuilt with other text simply misses. Concurrent runs share it safely: SQLite in WAL mode,
``INSERT OR IGNORE`` (two runs that embed the same page write the same bytes; one row stays).
Each row carries the sha256 of its key, dimension and vectors, checked on every read: a row that
does not match (flipped bytes, a file from before the hash) is dropped and the page embedded again.
"""
from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
import threading
from pathlib import Path

import numpy as np

from .errors import StoreError

VECTORS_NAME = "vectors.sqlite"
DEFAULT_BATCH = 32
_SCHEMA = ("CREATE TABLE IF NOT EXISTS page_vectors (key TEXT PRIMARY KEY, dim INTEGER NOT NULL, vectors BLOB NOT NULL, "
           "sha256 TEXT)")


def row_sha256(key: str, dim: int, blob: bytes) -> str:
    """The hash a page-vector row carries: of its key, dimension and vector bytes."""
    return hashlib.sha256(f"{key}\n{int(dim)}\n".encode() + bytes(blob)).hexdigest()


def embed_page(embedder, texts: list[str], batch_size: int = DEFAULT_BATCH) -> np.ndarray:
    """float32 ``(len(texts), dim)``: one page's embedding texts, embedded on their own."""
    vectors = embedder.encode(list(texts), batch_size=batch_size)
    return np.ascontiguousarray(vectors, dtype="<f4").reshape(len(texts), embedder.dim)


def page_key(embed_sha256: str, batch_size: int, texts: list[str]) -> str:
    h = hashlib.sha256(f"{embed_sha256}\n{batch_size}\n{len(texts)}\n".encode())
    for t in texts:
        b = t.encode("utf-8")
        h.update(len(b).to_bytes(8, "little") + b)
    return h.hexdigest()


def side_file(store_path: Path, store_sha256: str, home: Path | None = None) -> Path:
    """Where a store's lazily embedded vectors live: its folder if writable, else the user's home."""
    store_path = Path(store_path)
    own = store_path / VECTORS_NAME
    if own.exists() or os.access(store_path, os.W_OK):
        return own
    if home is None:
        from .settings import Settings

        home = Settings().home
    return Path(home) / "vectors" / f"{store_sha256}.sqlite"


class VectorFile:
    """The side file of page vectors; thread-safe, shared by concurrent processes."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._warned = False

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
                db.execute("PRAGMA journal_mode = WAL")
                db.execute("PRAGMA synchronous = NORMAL")
                db.execute(_SCHEMA)
                if "sha256" not in {r[1] for r in db.execute("PRAGMA table_info(page_vectors)")}:
                    db.execute("ALTER TABLE page_vectors ADD COLUMN sha256 TEXT")  # older rows: unhashed, re-embedded
            except (sqlite3.Error, OSError) as e:
                raise StoreError(f"cannot open the page-vector file {self.path}: {e}") from None
            self._db = db
        return self._db

    def get(self, key: str) -> np.ndarray | None:
        with self._lock:
            try:
                row = self._conn().execute("SELECT dim, vectors, sha256 FROM page_vectors WHERE key = ?",
                                           (key,)).fetchone()
                if row is not None and row[2] != row_sha256(key, row[0], row[1]):
                    self._conn().execute("DELETE FROM page_vectors WHERE key = ?", (key,))
                    if not self._warned:
                        self._warned = True
                        sys.stderr.write(f"warning: {self.path}: page vectors that do not match their hash were "
                                         "dropped and are embedded again\n")
                    return None
            except sqlite3.DatabaseError as e:
                raise StoreError(f"the page-vector file {self.path} is unreadable ({e}); delete it, "
                                 "it is rebuilt as pages are retrieved") from None
        if row is None:
            return None
        dim, blob, _ = row
        return np.frombuffer(blob, dtype="<f4").reshape(-1, dim).astype(np.float32, copy=True)

    def put(self, key: str, vectors: np.ndarray) -> None:
        blob = np.ascontiguousarray(vectors, dtype="<f4")
        with self._lock:
            try:
                data = blob.tobytes()
                self._conn().execute("INSERT OR IGNORE INTO page_vectors (key, dim, vectors, sha256) VALUES (?, ?, ?, ?)",
                                     (key, int(blob.shape[1]), data, row_sha256(key, blob.shape[1], data)))
            except sqlite3.Error as e:
                raise StoreError(f"cannot write the page-vector file {self.path}: {e}") from None

    def bad_rows(self) -> int:
        """How many rows do not match their hash (each is dropped and re-embedded when read)."""
        with self._lock:
            try:
                rows = self._conn().execute("SELECT key, dim, vectors, sha256 FROM page_vectors")
                return sum(h != row_sha256(k, d, v) for k, d, v, h in rows)
            except sqlite3.DatabaseError as e:
                raise StoreError(f"the page-vector file {self.path} is unreadable ({e}); delete it, "
                                 "it is rebuilt as pages are retrieved") from None

    def count(self) -> int:
        with self._lock:
            return int(self._conn().execute("SELECT count(*) FROM page_vectors").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
