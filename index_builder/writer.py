"""Writing a passage store: everything goes into a sibling folder ``.<name>.building``, which is
renamed onto the target only when complete (SQLite, HNSW index and manifest all written and
synced). An interrupted or failed build leaves the target as it was, and a killed one can resume.

Reproducible: the same pages in the same order give the same bytes (and store_sha256). SQLite is
written in id order and vacuumed; the optional HNSW index is built with a fixed seed and, by
default, one insertion thread, because hnswlib's multi-threaded inserts link the graph in
whatever order the threads happen to run.
"""
from __future__ import annotations

import json
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
    LAZY_SCHEMA_VERSION,
    MANIFEST_NAME,
    SCHEMA_SQL,
    SCHEMA_VERSION,
    files_store_sha256,
)

HNSW_M = 16
HNSW_EF_CONSTRUCTION = 200
HNSW_SEED = 100
CHECKPOINT_KEY = "build_checkpoint"  # meta row while building: how far the source was read
LOCK_NAME = ".lock"
REDIRECTS_SQL = "CREATE TABLE build_redirects (alias TEXT NOT NULL, target TEXT NOT NULL);"
# The full-text index is the build's one big cost (docs/WIKIPEDIA.md, "Build speed"). FTS5 keeps
# pending terms in memory and writes a segment whenever they pass ``hashsize`` (1 MiB by default),
# then merges segments as they pile up; 64 MiB of pending terms write and merge far fewer segments
# (indexing 765,295 passages: about 12 % less CPU than 1 MiB; 256 MiB saved no more and held 230
# MiB more), and the final 'optimize' leaves one segment either way (same postings, same BM25).
FTS_HASH_BYTES = 64 << 20
# strip_markers(text) in SQL: every "</s>" becomes "<s>" (a one-pass replace cannot make a new
# "<s>"), then every "<s>" goes, which removes exactly what re.sub(r"</?s>", "", text) removes,
# without a Python call per passage (tests/test_index_fts.py checks the two agree).
FTS_TEXT_SQL = "replace(replace(text, '</s>', '<s>'), '<s>', '')"


class StoreWriter:
    """Adds pages with their passages (and vectors); :meth:`finish` publishes the store.

    The store is assembled in ``.<name>.building`` beside the target, committed every
    :meth:`checkpoint` with a record of how far the source was read, so a killed build continues
    with ``resume=True``. What reaches the final file does not depend on where the commits fell:
    the full-text index and the HNSW index are built in :meth:`finish` from the committed rows
    (in passage id order), and ``VACUUM`` rewrites every table in key order.
    """

    def __init__(self, target: str | Path, dim: int, *, overwrite: bool = False, threads: int = 1,
                 hnsw: bool = True, vectors: bool = True, resume: bool = False):
        """``hnsw``: also write ``hnsw.bin`` (needed only for store-wide search; needs ``vectors``).
        ``vectors``: pages come with their vectors (``kb build --embed``); without, the store is
        written with the lazy schema. ``threads``: HNSW insertion threads; 1 (the default, and what
        ``kb build`` uses) makes ``hnsw.bin`` the same for the same input. ``resume``: continue
        the interrupted build found beside the target, if any (see :attr:`checkpoint_state`)."""
        self.target = Path(target)
        if hnsw and not vectors:
            raise FscoreError("an HNSW index needs the passages' vectors: build with --embed")
        if self.target.exists() and not overwrite:
            raise FscoreError(f"{self.target} already exists; pass --force to replace it")
        if self.target.exists() and not (self.target / MANIFEST_NAME).exists():
            raise FscoreError(f"{self.target} exists and is not a passage store; refusing to replace it")
        try:
            self.target.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise FscoreError(f"{self.target}: cannot create the store there: {self.target.parent} (or a folder "
                              "above it) is a file, not a folder") from None
        except OSError as e:
            raise FscoreError(f"{self.target}: cannot create the folder {self.target.parent} "
                              f"({e.strerror or e})") from None
        self.tmp = self.target.parent / f".{self.target.name}.building"
        self._lock_fd = None
        fresh = not (resume and (self.tmp / DB_NAME).exists())
        if fresh and self.tmp.exists():
            self._lock()
            shutil.rmtree(self.tmp)
        self.tmp.mkdir(exist_ok=True)
        self._lock()
        self.dim = int(dim)
        self.threads = max(1, int(threads))
        self.hnsw = hnsw
        self.vectors = vectors
        self.db = sqlite3.connect(self.tmp / DB_NAME, isolation_level=None)
        # WAL without syncs: a killed process loses at most the open transaction (not a power cut)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = OFF")
        self.db.execute("PRAGMA cache_size = -65536")
        if fresh:
            self.db.executescript(SCHEMA_SQL + REDIRECTS_SQL)
            self.checkpoint_state: dict = {}
        else:
            row = self.db.execute("SELECT value FROM meta WHERE key = ?", (CHECKPOINT_KEY,)).fetchone()
            self.checkpoint_state = json.loads(row[0]) if row else {}
        self.next_page_id = 1 + self.db.execute("SELECT coalesce(max(id), 0) FROM pages").fetchone()[0]
        self.next_passage_id = 1 + self.db.execute("SELECT coalesce(max(id), 0) FROM passages").fetchone()[0]
        self.alias_total = 0
        self.db.execute("BEGIN")

    def _lock(self) -> None:
        """One builder per target: a second one (or a resume while the first runs) is refused."""
        if self._lock_fd is not None:
            return
        import fcntl

        self.tmp.mkdir(exist_ok=True)
        fd = os.open(self.tmp / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise FscoreError(f"another `kb build` is writing {self.target} ({self.tmp} is locked)") from None
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    @property
    def passage_count(self) -> int:
        return self.next_passage_id - 1

    @property
    def page_count(self) -> int:
        return self.next_page_id - 1

    @property
    def alias_count(self) -> int:
        return self.db.execute("SELECT count(*) FROM aliases").fetchone()[0]

    def has_title(self, title: str) -> bool:
        return self.db.execute("SELECT 1 FROM pages WHERE title = ?", (title,)).fetchone() is not None

    def add_page(self, title: str, passages: list[str] | tuple[str, ...], vectors: np.ndarray | None = None,
                 aliases=()) -> int:
        """Store one page; its passages get consecutive ids in order. Returns the page id."""
        if self.vectors:
            vectors = np.ascontiguousarray(vectors, dtype="<f4")
            if vectors.shape != (len(passages), self.dim):
                raise ValueError(f"vectors of shape {vectors.shape} for {len(passages)} passages of dim {self.dim}")
        page_id = self.next_page_id
        try:  # the UNIQUE title refuses a duplicate before anything of the page is written
            self.db.execute("INSERT INTO pages (id, title) VALUES (?, ?)", (page_id, title))
        except sqlite3.IntegrityError:
            raise ValueError(f"duplicate page title {title!r}") from None
        self.next_page_id += 1
        first = self.next_passage_id
        self.next_passage_id += len(passages)
        self.db.executemany(
            "INSERT INTO passages (id, page_id, ordinal, text) VALUES (?, ?, ?, ?)",
            [(first + i, page_id, i, text) for i, text in enumerate(passages)],
        )
        if self.vectors:
            self.db.execute("INSERT INTO page_vectors (page_id, dim, vectors) VALUES (?, ?, ?)",
                            (page_id, self.dim, vectors.tobytes()))
        for alias in aliases:
            if alias != title:
                self.db.execute("INSERT OR IGNORE INTO aliases (alias, page_id) VALUES (?, ?)", (alias, page_id))
        return page_id

    def add_redirect(self, alias: str, target: str) -> None:
        """A redirect (``alias`` → page ``target``), resolved in :meth:`finish` once every page is in."""
        self.db.execute("INSERT INTO build_redirects (alias, target) VALUES (?, ?)", (alias, target))

    def checkpoint(self, state: dict) -> None:
        """Commit what was added, with ``state`` (how far the source was read) for a resume."""
        self.db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                        (CHECKPOINT_KEY, json.dumps(state, sort_keys=True)))
        self.db.execute("COMMIT")
        self.db.execute("BEGIN")

    def reserve(self, n: int) -> None:
        """Kept for callers of the incremental writer; the index is now sized in :meth:`finish`."""

    def finish(self, meta: dict[str, object]) -> dict:
        """Resolve redirects, index the text (and vectors), write meta and the manifest, publish."""
        schema = SCHEMA_VERSION if self.vectors else LAZY_SCHEMA_VERSION
        meta = {"schema_version": schema, "vectors": "all" if self.vectors else "lazy", **meta}
        db = self.db
        db.execute("DELETE FROM meta WHERE key = ?", (CHECKPOINT_KEY,))
        db.execute("COMMIT")
        db.execute("PRAGMA journal_mode = DELETE")  # the published file is a plain rollback-journal database
        db.execute("BEGIN")
        # a redirect never shadows a page title; the first redirect of an alias wins
        db.execute(
            "INSERT OR IGNORE INTO aliases (alias, page_id) SELECT r.alias, p.id FROM build_redirects r "
            "JOIN pages p ON p.title = r.target WHERE r.alias NOT IN (SELECT title FROM pages) ORDER BY r.rowid"
        )
        db.execute("DROP TABLE build_redirects")
        self.alias_total = db.execute("SELECT count(*) FROM aliases").fetchone()[0]
        meta = {**meta, "alias_count": self.alias_total}
        db.execute("INSERT INTO passages_fts (passages_fts, rank) VALUES ('hashsize', ?)", (FTS_HASH_BYTES,))
        db.execute(f"INSERT INTO passages_fts (rowid, text) SELECT id, {FTS_TEXT_SQL} FROM passages ORDER BY id")
        db.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", [(k, str(v)) for k, v in meta.items()])
        db.execute("INSERT INTO passages_fts (passages_fts) VALUES ('optimize')")
        # a setting of this build, not of the store: its FTS5 configuration stays the default one
        db.execute("DELETE FROM passages_fts_config WHERE k = 'hashsize'")
        db.execute("COMMIT")
        if self.hnsw:
            self._write_hnsw(self.tmp / HNSW_NAME)
        # a fresh file, written in key order: its bytes hold the content, not the history of commits
        # and resumes (an in-place VACUUM keeps the old file's change counter)
        compact = self.tmp / (DB_NAME + ".compact")
        compact.unlink(missing_ok=True)
        db.execute("VACUUM INTO ?", (str(compact),))
        db.close()
        os.replace(compact, self.tmp / DB_NAME)
        names = [DB_NAME] + ([HNSW_NAME] if self.hnsw else [])
        files = {}
        for name in names:
            p = self.tmp / name
            with open(p, "rb+") as f:
                os.fsync(f.fileno())
            files[name] = {"sha256": sha256_file(p), "size": p.stat().st_size}
        manifest = {"schema_version": schema, "files": files, "store_sha256": files_store_sha256(files)}
        atomic_write_json(self.tmp / MANIFEST_NAME, manifest)
        self._unlock()
        (self.tmp / LOCK_NAME).unlink()
        _usual_modes(self.tmp)
        self._publish()
        return manifest

    def _write_hnsw(self, path: Path) -> None:
        """The HNSW index over all vectors, inserted in passage id order with a fixed seed."""
        import hnswlib

        n = max(1, self.passage_count)
        index = hnswlib.Index(space="ip", dim=self.dim)
        index.init_index(max_elements=n, ef_construction=HNSW_EF_CONSTRUCTION, M=HNSW_M, random_seed=HNSW_SEED)
        rows = self.db.execute("SELECT page_vectors.vectors, min(passages.id) FROM page_vectors JOIN passages "
                               "ON passages.page_id = page_vectors.page_id GROUP BY page_vectors.page_id "
                               "ORDER BY page_vectors.page_id")
        for blob, first in rows:
            vecs = np.frombuffer(blob, dtype="<f4").reshape(-1, self.dim)
            index.add_items(vecs, np.arange(first, first + len(vecs), dtype=np.int64), num_threads=self.threads)
        index.save_index(str(path))

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

    def abort(self, keep: bool = False) -> None:
        """Stop; the target is untouched. ``keep``: leave the committed part for a resume."""
        try:
            self.db.close()
        except sqlite3.Error:
            pass
        self._unlock()
        if not keep:
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
