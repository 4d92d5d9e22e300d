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
"""
from __future__ import annotations

import difflib
import hashlib
import json
import re
import sqlite3
import threading
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import StoreError
from .page_vectors import DEFAULT_BATCH, VectorFile, embed_page, page_key, side_file
from .stamps import verified_sha256

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
_FTS_TERM = re.compile(r"\w+", re.UNICODE)


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


def fts_query(query: str) -> str:
    """An FTS5 MATCH expression: every word of ``query`` as a quoted term, joined by OR.

    Quoting each word makes FTS5 syntax in user text (quotes, ``AND``/``NOT``/``NEAR``,
    ``*``, ``^``, column filters) plain words; OR keeps BM25's any-term matching.
    """
    terms = []
    seen = set()
    for w in _FTS_TERM.findall(query):
        if w.lower() not in seen:
            seen.add(w.lower())
            terms.append('"' + w.replace('"', '""') + '"')
    return " OR ".join(terms)


def files_store_sha256(files: dict[str, dict]) -> str:
    """The store's identity: sha256 over the sorted ``name sha256`` lines of its files."""
    lines = "".join(f"{name} {files[name]['sha256']}\n" for name in sorted(files))
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Passage:
    id: int  # passage id, stable within the store
    title: str  # page title
    text: str  # as stored, may contain <s>...</s> markers (FActScore DB layout)
    ordinal: int  # position within its page


def _check_file(root: Path, name: str, info: dict, verify: bool, use_stamp: bool = True) -> None:
    """Raise StoreError unless the store file has the manifest's size (and, with ``verify``, sha256).

    The sha256 comes from the file's verified stamp when it is unchanged since it was last hashed
    (:mod:`fscore_lite.stamps`); ``use_stamp=False`` always hashes (``kb verify``).
    """
    p = root / name
    mpath = root / MANIFEST_NAME
    if not p.exists():
        raise StoreError(f"store file {p} is missing (listed in {mpath})")
    st = p.stat()
    if st.st_size != info.get("size"):
        raise StoreError(
            f"store file {p} has {st.st_size} bytes, the manifest says {info.get('size')}: "
            "the store was modified or damaged; rebuild it"
        )
    if verify:
        digest = verified_sha256(p, use_stamp=use_stamp)
        if digest != info.get("sha256"):
            raise StoreError(
                f"store file {p} has sha256 {digest}, the manifest says {info.get('sha256')}: "
                "the store was modified or damaged; rebuild it"
            )


def _read_manifest(root: Path) -> dict:
    """The store's manifest, checked for structure and consistency (no file is read)."""
    mpath = root / MANIFEST_NAME
    if not root.exists():
        raise StoreError(f"passage store {root} does not exist; build one with `fscore-lite kb build`")
    if not root.is_dir():
        raise StoreError(f"passage store {root} is not a folder")
    if not mpath.exists():
        raise StoreError(f"{root} is not a passage store: {MANIFEST_NAME} is missing")
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
        files = manifest["files"]
        store_sha = manifest["store_sha256"]
        if not isinstance(files, dict) or not isinstance(store_sha, str):
            raise TypeError
    except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError):
        raise StoreError(f"{mpath} is malformed: expected JSON with 'files' and 'store_sha256'") from None
    if manifest.get("schema_version") not in SCHEMA_VERSIONS:
        raise StoreError(
            f"{root} has store schema {manifest.get('schema_version')!r}; this fscore-lite reads "
            f"schemas {', '.join(map(str, SCHEMA_VERSIONS))}. Rebuild the store with `fscore-lite kb build`."
        )
    for name in REQUIRED_FILES:
        if name not in files:
            raise StoreError(f"{mpath} does not list {name}")
    for name, info in files.items():
        if "/" in name or "\\" in name or name.startswith("."):
            raise StoreError(f"{mpath} lists an unexpected path {name!r}")
        if not isinstance(info, dict) or not isinstance(info.get("sha256"), str) or not isinstance(info.get("size"), int):
            raise StoreError(f"{mpath} is malformed: the entry for {name} needs 'sha256' and 'size'")
    if files_store_sha256(files) != store_sha:
        raise StoreError(f"{mpath} is inconsistent: store_sha256 does not match its file hashes")
    return manifest


def _check_manifest(root: Path, verify: bool) -> dict:
    """Read the manifest and check every file it lists (size; sha256 with ``verify``)."""
    manifest = _read_manifest(root)
    for name, info in manifest["files"].items():
        _check_file(root, name, info, verify)
    return manifest


def verify_store(path: str | Path) -> list[tuple[str, str | None]]:
    """Hash every file of a store fully (no stamps): ``[(file name, problem or None)]``.

    A missing or malformed manifest raises StoreError; a file that is missing, has another size
    or another sha256 is reported with its problem. Fresh hashes refresh the verified stamps.
    """
    root = Path(path)
    manifest = _read_manifest(root)
    results: list[tuple[str, str | None]] = []
    for name in sorted(manifest["files"]):
        try:
            _check_file(root, name, manifest["files"][name], verify=True, use_stamp=False)
            results.append((name, None))
        except StoreError as e:
            results.append((name, str(e)))
    return results


class PassageStore:
    """Read-only access to a passage store folder (see the module docstring for the layout).

    Opening checks the manifest: every file present with its recorded size, and with
    ``verify=True`` (the default) its sha256, hashed only when the file changed since it was last
    verified (:mod:`fscore_lite.stamps`; :func:`verify_store` always hashes). A store without
    ``hnsw.bin`` opens normally; only :meth:`search_vectors` needs it. Methods are safe to call
    from several threads.
    """

    def __init__(self, path: str | Path, verify: bool = True):
        self.path = Path(path)
        manifest = _check_manifest(self.path, verify)
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
        self.meta: dict[str, str] = dict(self._db.execute("SELECT key, value FROM meta"))
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
        self.embed_batch_size = int(self.meta.get("embed_batch_size", DEFAULT_BATCH))
        self._hnsw = None
        self._vector_file = None

    @property
    def has_hnsw(self) -> bool:
        """Whether the store has an HNSW index (``kb build --hnsw``) for store-wide search."""
        return HNSW_NAME in self.manifest["files"]

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

    # -- pages ----------------------------------------------------------------------------
    def _page(self, title: str) -> tuple[int, str] | None:
        """(page id, page title) for a title, or for an alias (e.g. a FActScore topic); failing an
        exact match, for the title in Unicode NFC form and with surrounding whitespace trimmed."""
        for variant in title_variants(title):
            row = self._q("SELECT id, title FROM pages WHERE title = ?", (variant,))
            if not row:
                row = self._q(
                    "SELECT pages.id, pages.title FROM aliases JOIN pages ON pages.id = aliases.page_id "
                    "WHERE aliases.alias = ?",
                    (variant,),
                )
            if row:
                return (row[0][0], row[0][1])
        return None

    def close_titles(self, title: str, n: int = 3) -> list[str]:
        """Up to ``n`` page titles or aliases that look like ``title`` (case ignored), best first:
        the "did you mean" of a ``topic_not_found``. Stores of over 200,000 pages compare only
        the titles that share the first two characters."""
        key = unicodedata.normalize("NFC", title).strip()
        if not key:
            return []
        if self._q("SELECT count(*) FROM pages")[0][0] <= 200_000:
            names = [r[0] for r in self._q("SELECT title FROM pages UNION SELECT alias FROM aliases")]
        else:
            prefix = key[:2].replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            names = [r[0] for r in self._q("SELECT title FROM pages WHERE title LIKE ? ESCAPE '\\' LIMIT 20000",
                                           (prefix + "%",))]
        by_lower: dict[str, str] = {}
        for name in sorted(names):
            by_lower.setdefault(name.lower(), name)
        return [by_lower[m] for m in difflib.get_close_matches(key.lower(), list(by_lower), n=n, cutoff=0.6)]

    def titles(self) -> list[str]:
        return [r[0] for r in self._q("SELECT title FROM pages ORDER BY id")]

    def has_page(self, title: str) -> bool:
        return self._page(title) is not None

    def resolve_title(self, title: str) -> str | None:
        """The page title a title or alias names, or None."""
        page = self._page(title)
        return page[1] if page else None

    def page_passages(self, title: str) -> list[Passage]:
        """The page's passages in ordinal order; [] when the store has no such page."""
        page = self._page(title)
        if page is None:
            return []
        rows = self._q("SELECT id, ordinal, text FROM passages WHERE page_id = ? ORDER BY ordinal", (page[0],))
        return [Passage(id=r[0], title=page[1], text=r[2], ordinal=r[1]) for r in rows]

    def page_vectors(self, title: str, embedder=None) -> np.ndarray:
        """float32 ``(n, dim)``, row i belonging to ``page_passages(title)[i]``.

        A store built without vectors (``lazy``) needs ``embedder``: the page is embedded the
        first time and its vectors kept in the side file (:mod:`fscore_lite.page_vectors`)."""
        page = self._page(title)
        if page is None:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.lazy:
            return self._lazy_vectors(page, embedder)
        row = self._q("SELECT dim, vectors FROM page_vectors WHERE page_id = ?", (page[0],))
        if not row:
            return np.zeros((0, self.dim), dtype=np.float32)
        dim, blob = row[0]
        return np.frombuffer(blob, dtype="<f4").reshape(-1, dim).astype(np.float32, copy=True)

    def vector_file(self) -> VectorFile:
        with self._lock:
            if self._vector_file is None:
                self._vector_file = VectorFile(side_file(self.path, self.sha256))
            return self._vector_file

    def _lazy_vectors(self, page: tuple[int, str], embedder) -> np.ndarray:
        rows = self._q("SELECT text FROM passages WHERE page_id = ? ORDER BY ordinal", (page[0],))
        texts = [passage_embedding_text(page[1], r[0]) for r in rows]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        key = page_key(self.embed_sha256, self.embed_batch_size, texts)
        vf = self.vector_file()
        found = vf.get(key)
        if found is None:
            if embedder is None:
                raise StoreError(f"the store {self.path} was built without vectors: embedding the page "
                                 f"{page[1]!r} needs the store's model {self.embed_model}")
            self.check_embedder(embedder)
            found = embed_page(embedder, texts, self.embed_batch_size)
            vf.put(key, found)
        return found

    def passages_by_id(self, ids: list[int]) -> dict[int, Passage]:
        out: dict[int, Passage] = {}
        ids = [int(i) for i in ids]
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for pid, ordinal, text, title in self._q(
                "SELECT passages.id, passages.ordinal, passages.text, pages.title FROM passages "
                f"JOIN pages ON pages.id = passages.page_id WHERE passages.id IN ({marks})",
                chunk,
            ):
                out[pid] = Passage(id=pid, title=title, text=text, ordinal=ordinal)
        return out

    # -- search ---------------------------------------------------------------------------
    def _index(self):
        with self._lock:
            if self._hnsw is None:
                if not self.has_hnsw:
                    raise StoreError(
                        f"the passage store {self.path} has no HNSW index ({HNSW_NAME}), which store-wide "
                        "search (--search-all, `kb search` without --title) needs; topic-restricted retrieval "
                        "works without it. Add it by rebuilding the store with "
                        f"`fscore-lite kb build SOURCE -o {self.path} --embed --hnsw --force`"
                    )
                import hnswlib

                index = hnswlib.Index(space="ip", dim=self.dim)
                try:
                    index.load_index(str(self.path / HNSW_NAME))
                except RuntimeError as e:
                    raise StoreError(f"{self.path / HNSW_NAME} could not be loaded: {e}") from None
                index.set_num_threads(1)
                self._hnsw = index
            return self._hnsw

    def search_vectors(self, query: np.ndarray, k: int) -> list[tuple[Passage, float]]:
        """Store-wide nearest passages by inner product (HNSW), best first."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise ValueError(f"query has dimension {q.shape[0]}, the store's vectors have {self.dim}")
        index = self._index()
        with self._lock:
            n = index.get_current_count()
            k = min(int(k), n)
            if k <= 0:
                return []
            index.set_ef(max(64, 2 * k))
            labels, distances = index.knn_query(q[None, :], k=k)
        found = self.passages_by_id(labels[0].tolist())
        # hnswlib's 'ip' distance is 1 - inner product
        return [(found[int(l)], float(1.0 - d)) for l, d in zip(labels[0], distances[0]) if int(l) in found]

    def search_bm25(self, query: str, k: int, title: str | None = None) -> list[tuple[Passage, float]]:
        """Passages ranked by FTS5 BM25 (store-wide statistics), best first; higher is better.

        Every word of ``query`` is matched as a plain term (any term may match). With
        ``title``, only that page's passages (title or alias) are ranked; [] if absent.
        """
        match = fts_query(query)
        if not match or k <= 0:
            return []
        sql = "SELECT rowid, bm25(passages_fts) AS s FROM passages_fts WHERE passages_fts MATCH ?"
        params: list = [match]
        if title is not None:
            page = self._page(title)
            if page is None:
                return []
            lo, hi = self._q("SELECT min(id), max(id) FROM passages WHERE page_id = ?", (page[0],))[0]
            if lo is None:
                return []
            sql += " AND rowid BETWEEN ? AND ?"
            params += [lo, hi]
        sql += " ORDER BY s, rowid LIMIT ?"
        params.append(int(k))
        try:
            rows = self._q(sql, params)
        except sqlite3.OperationalError as e:
            raise StoreError(f"full-text search failed for {query!r}: {e}") from None
        found = self.passages_by_id([r[0] for r in rows])
        # FTS5's bm25() is negative, lower = better; flip it so that higher = better
        return [(found[r[0]], -float(r[1])) for r in rows if r[0] in found]

    # -- checks and info ------------------------------------------------------------------
    def check_embedder(self, embedder) -> None:
        """Raise StoreError unless ``embedder`` is the model the store's vectors were made with."""
        if embedder.sha256 != self.embed_sha256:
            raise StoreError(
                f"the store {self.path} was embedded with {self.embed_model} (sha256 {self.embed_sha256}), "
                f"but the installed model {embedder.name} has sha256 {embedder.sha256}: vectors would not "
                "be comparable. Install the store's model or rebuild the store."
            )

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
