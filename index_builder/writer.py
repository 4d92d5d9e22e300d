"""Writing a passage store: everything goes into a temporary sibling folder, which is renamed
onto the target only when complete (SQLite, HNSW index and manifest all written and synced).
An interrupted or failed build leaves the target as it was.

Reproducible: the same pages in the same order give the same bytes (and store_sha256). SQLite is
written in id order and vacuumed; the optional HNSW index is built with a fixed seed and, by
default, one insertion thread, because hnswlib's multi-threaded inserts link the graph in
whatever order the threads happen to run.
"""
from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

import numpy as np

from fscore_lite.errors import FscoreError
from fscore_lite.io import atomic_write_json
from fscore_lite.manifest import sha256_file
from fscore_lite.store import (
    DB_NAME,
    HNSW_NAME,
    MANIFEST_NAME,
    SCHEMA_SQL,
    SCHEMA_VERSION,
    files_store_sha256,
    strip_markers,
)

HNSW_M = 16
HNSW_EF_CONSTRUCTION = 200
HNSW_SEED = 100


class StoreWriter:
    """Adds pages with their passages and vectors; :meth:`finish` publishes the store."""

    def __init__(self, target: str | Path, dim: int, *, overwrite: bool = False, threads: int = 1,
                 hnsw: bool = True):
        """``hnsw``: also write ``hnsw.bin`` (needed only for store-wide search). ``threads``: HNSW
        insertion threads; 1 (the default, and what ``kb build`` uses) makes ``hnsw.bin`` the same
        for the same input; more threads insert faster but the index then varies between builds."""
        self.target = Path(target)
        if self.target.exists() and not overwrite:
            raise FscoreError(f"{self.target} already exists; pass --force to replace it")
        if self.target.exists() and not (self.target / MANIFEST_NAME).exists():
            raise FscoreError(f"{self.target} exists and is not a passage store; refusing to replace it")
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.building-", dir=self.target.parent))
        self.dim = int(dim)
        self.threads = max(1, int(threads))
        self.next_page_id = 1
        self.next_passage_id = 1
        self.alias_count = 0
        self._titles: set[str] = set()
        self.db = sqlite3.connect(self.tmp / DB_NAME)
        self.db.execute("PRAGMA journal_mode = OFF")
        self.db.execute("PRAGMA synchronous = OFF")
        self.db.executescript(SCHEMA_SQL)
        self.index = None
        self._capacity = 1024
        if hnsw:
            import hnswlib

            self.index = hnswlib.Index(space="ip", dim=self.dim)
            self.index.init_index(
                max_elements=self._capacity, ef_construction=HNSW_EF_CONSTRUCTION, M=HNSW_M, random_seed=HNSW_SEED
            )

    @property
    def passage_count(self) -> int:
        return self.next_passage_id - 1

    @property
    def page_count(self) -> int:
        return self.next_page_id - 1

    def has_title(self, title: str) -> bool:
        return title in self._titles

    def add_page(self, title: str, passages: list[str] | tuple[str, ...], vectors: np.ndarray, aliases=()) -> int:
        """Store one page; its passages get consecutive ids in order. Returns the page id."""
        if title in self._titles:
            raise ValueError(f"duplicate page title {title!r}")
        vectors = np.ascontiguousarray(vectors, dtype="<f4")
        if vectors.shape != (len(passages), self.dim):
            raise ValueError(f"vectors of shape {vectors.shape} for {len(passages)} passages of dim {self.dim}")
        page_id = self.next_page_id
        self.next_page_id += 1
        self._titles.add(title)
        first = self.next_passage_id
        ids = list(range(first, first + len(passages)))
        self.next_passage_id += len(passages)
        self.db.execute("INSERT INTO pages (id, title) VALUES (?, ?)", (page_id, title))
        self.db.executemany(
            "INSERT INTO passages (id, page_id, ordinal, text) VALUES (?, ?, ?, ?)",
            [(pid, page_id, i, text) for i, (pid, text) in enumerate(zip(ids, passages))],
        )
        self.db.executemany(
            "INSERT INTO passages_fts (rowid, text) VALUES (?, ?)",
            [(pid, strip_markers(text)) for pid, text in zip(ids, passages)],
        )
        self.db.execute(
            "INSERT INTO page_vectors (page_id, dim, vectors) VALUES (?, ?, ?)", (page_id, self.dim, vectors.tobytes())
        )
        for alias in aliases:
            if alias != title:
                cur = self.db.execute("INSERT OR IGNORE INTO aliases (alias, page_id) VALUES (?, ?)", (alias, page_id))
                self.alias_count += cur.rowcount
        if ids and self.index is not None:
            need = self.index.get_current_count() + len(ids)
            if need > self._capacity:
                self._capacity = max(need, 2 * self._capacity)
                self.index.resize_index(self._capacity)
            self.index.add_items(vectors, np.asarray(ids, dtype=np.int64), num_threads=self.threads)
        return page_id

    def reserve(self, n: int) -> None:
        """Make room in the HNSW index for ``n`` vectors in all (one resize instead of doublings)."""
        if self.index is not None and n > self._capacity:
            self._capacity = n
            self.index.resize_index(n)

    def finish(self, meta: dict[str, object]) -> dict:
        """Write meta, the index and the manifest; move the store onto the target. Returns the manifest."""
        meta = {"schema_version": SCHEMA_VERSION, **meta}
        self.db.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", [(k, str(v)) for k, v in meta.items()])
        self.db.execute("INSERT INTO passages_fts (passages_fts) VALUES ('optimize')")
        self.db.commit()
        self.db.execute("VACUUM")
        self.db.close()
        names = [DB_NAME]
        if self.index is not None:
            self.index.resize_index(max(1, self.index.get_current_count()))
            self.index.save_index(str(self.tmp / HNSW_NAME))
            names.append(HNSW_NAME)
        files = {}
        for name in names:
            p = self.tmp / name
            with open(p, "rb+") as f:
                os.fsync(f.fileno())
            files[name] = {"sha256": sha256_file(p), "size": p.stat().st_size}
        manifest = {"schema_version": SCHEMA_VERSION, "files": files, "store_sha256": files_store_sha256(files)}
        atomic_write_json(self.tmp / MANIFEST_NAME, manifest)
        _usual_modes(self.tmp)
        self._publish()
        return manifest

    def _publish(self) -> None:
        old = None
        if self.target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.old-", dir=self.target.parent))
            os.rmdir(old)
            os.rename(self.target, old)
        try:
            os.rename(self.tmp, self.target)
        except BaseException:
            if old is not None:
                os.rename(old, self.target)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        _fsync_dir(self.target.parent)

    def abort(self) -> None:
        """Drop the unfinished store; the target is untouched."""
        try:
            self.db.close()
        except sqlite3.Error:
            pass
        shutil.rmtree(self.tmp, ignore_errors=True)


def _usual_modes(folder: Path) -> None:
    """Temporary files are private (0600/0700); give the store the umask's usual modes."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(folder, 0o777 & ~umask)
    for p in folder.iterdir():
        os.chmod(p, 0o666 & ~umask)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
