"""SQLite cache of model calls: (model sha256, kind, exact input) → JSON output.

A rerun with the same model files and inputs makes no model calls. The schema carries a
version so that later releases can migrate it. Each row records when it was written
(``created``, Unix seconds; schema 2), so that ``fscore-lite cache prune`` can drop rows by age
and by model; ``cache info`` shows the file's size and what it holds (:func:`cache_info`).
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable

SCHEMA_VERSION = 2  # 2: calls.created


def damaged(path, problem, row: bool = False) -> "FscoreError":
    """The error for a call cache that cannot be used, with the ways out (the cache only saves
    time: every entry can be recomputed)."""
    from .errors import FscoreError

    fix = ("drop the damaged rows with `fscore-lite cache prune --older-than 0` (or --model SHA), "
           if row else "")
    return FscoreError(
        f"the call cache {path} cannot be used: {problem}. The cache only saves time: {fix}run with "
        f"--no-cache, or move {path} aside (a new, empty cache is then created)")


def check_cache(path: str | Path) -> str | None:
    """What is wrong with the cache file at ``path`` (None when it is fine or absent), read-only:
    a folder, not SQLite, a failed integrity check, or no calls table."""
    p = Path(path)
    if not p.exists():
        return None
    if not p.is_file():
        return "it is a folder, not an SQLite file" if p.is_dir() else "it is not a regular file"
    try:
        db = sqlite3.connect(f"file:{p}?mode=ro", uri=True, timeout=10)
    except sqlite3.Error as e:
        return f"it cannot be opened ({e})"
    try:
        rows = [r[0] for r in db.execute("PRAGMA quick_check")]
        if rows != ["ok"]:
            return f"its integrity check failed ({'; '.join(map(str, rows[:3]))})"
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if tables and "calls" not in tables:
            return "it is an SQLite file without the cache's calls table"
    except sqlite3.Error as e:
        return f"it is not a readable SQLite database ({e})"
    finally:
        db.close()
    return None


class CallCache:
    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        try:
            self._open()
        except sqlite3.OperationalError as e:
            if "locked" in str(e):
                raise
            raise damaged(self.path, e) from None
        except sqlite3.DatabaseError as e:
            raise damaged(self.path, e) from None
        except IsADirectoryError:
            raise damaged(self.path, "it is a folder, not an SQLite file") from None
        except OSError as e:
            raise damaged(self.path, e.strerror or e) from None

    def _open(self) -> None:
        if self.path is not None and self.path.is_dir():
            raise IsADirectoryError(str(self.path))
        if self.path is None:
            self._db = sqlite3.connect(":memory:", check_same_thread=False)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=60)
            self._db.execute("PRAGMA journal_mode=WAL")
            # In WAL mode NORMAL still keeps the file consistent through a crash; only the last
            # calls may be lost on power failure (they are recomputed). FULL syncs on every call.
            self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS calls (model TEXT, kind TEXT, key TEXT, input TEXT, output TEXT,"
            " created REAL, PRIMARY KEY (model, kind, key))"
        )
        _migrate(self._db)
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        self._db.commit()

    @staticmethod
    def _key(payload: Any) -> tuple[str, str]:
        text = payload if isinstance(payload, str) else json.dumps(payload, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest(), text

    def get(self, model: str, kind: str, payload: Any) -> Any | None:
        key, _ = self._key(payload)
        try:
            with self._lock:
                row = self._db.execute(
                    "SELECT output FROM calls WHERE model=? AND kind=? AND key=?", (model, kind, key)
                ).fetchone()
        except sqlite3.DatabaseError as e:  # a page damaged after opening
            if isinstance(e, sqlite3.OperationalError) and "locked" in str(e):
                raise
            raise damaged(self.path or ":memory:", e) from None
        try:
            return None if row is None else json.loads(row[0])
        except (ValueError, TypeError) as e:
            raise damaged(self.path or ":memory:", f"a stored {kind} result is not JSON ({e})", row=True) from None

    def put(self, model: str, kind: str, payload: Any, output: Any) -> None:
        key, text = self._key(payload)
        try:
            with self._lock:
                self._db.execute(
                    "INSERT OR REPLACE INTO calls (model, kind, key, input, output, created) VALUES (?,?,?,?,?,?)",
                    (model, kind, key, text, json.dumps(output, ensure_ascii=False), time.time()),
                )
                self._db.commit()
        except sqlite3.DatabaseError as e:
            if isinstance(e, sqlite3.OperationalError) and "locked" in str(e):
                raise
            raise damaged(self.path or ":memory:", e) from None

    def cached(self, model: str, kind: str, payload: Any, compute: Callable[[], Any]) -> Any:
        """Return the cached output for this call, or compute, store and return it."""
        hit = self.get(model, kind, payload)
        if hit is not None:
            self.hits += 1
            return hit
        self.misses += 1
        out = compute()
        self.put(model, kind, payload, out)
        return out

    def close(self) -> None:
        self._db.close()


def _migrate(db: sqlite3.Connection) -> None:
    """Schema 1 → 2: add ``calls.created`` (rows from before have NULL: their age is unknown)."""
    columns = {r[1] for r in db.execute("PRAGMA table_info(calls)")}
    if "created" not in columns:
        db.execute("ALTER TABLE calls ADD COLUMN created REAL")
    db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))


def cache_files(path: str | Path) -> list[Path]:
    """The cache database and its WAL/shared-memory companions that exist."""
    p = Path(path)
    return [f for f in (p, p.with_name(p.name + "-wal"), p.with_name(p.name + "-shm")) if f.exists()]


def cache_size(path: str | Path) -> int:
    """Bytes on disk of the cache (database plus WAL files)."""
    return sum(f.stat().st_size for f in cache_files(path))


def _open_existing(path: Path) -> sqlite3.Connection:
    problem = check_cache(path)
    if problem:
        raise damaged(path, problem)
    return CallCache(path)._db  # creates nothing new for an existing file; migrates schema 1


def cache_info(path: str | Path, names: dict[str, str] | None = None) -> dict:
    """What the cache at ``path`` holds: size on disk, rows, and per model (sha256) rows by kind,
    bytes of stored input/output and the oldest/newest row (Unix seconds; None when unknown).
    ``names`` maps model sha256s to names for display. A missing cache is reported, not created."""
    p = Path(path)
    names = names or {}
    if not p.exists():
        return {"path": str(p), "exists": False, "size_bytes": 0, "rows": 0, "models": []}
    db = _open_existing(p)
    try:
        models = []
        for model, rows, nbytes, oldest, newest, unknown in db.execute(
            "SELECT model, count(*), sum(length(CAST(input AS BLOB)) + length(CAST(output AS BLOB))),"
            " min(created), max(created), sum(created IS NULL) FROM calls GROUP BY model ORDER BY model"
        ):
            kinds = dict(db.execute("SELECT kind, count(*) FROM calls WHERE model = ? GROUP BY kind ORDER BY kind",
                                    (model,)))
            models.append({"model": model, "name": names.get(model), "rows": rows, "kinds": kinds,
                           "stored_bytes": nbytes or 0, "oldest": oldest, "newest": newest,
                           "rows_of_unknown_age": unknown})
        rows = db.execute("SELECT count(*) FROM calls").fetchone()[0]
    finally:
        db.close()
    return {"path": str(p), "exists": True, "size_bytes": cache_size(p), "rows": rows, "models": models}


def cache_models(path: str | Path) -> list[str]:
    """The distinct model sha256s with rows in the cache (empty for a missing cache)."""
    p = Path(path)
    if not p.exists():
        return []
    db = _open_existing(p)
    try:
        return [r[0] for r in db.execute("SELECT DISTINCT model FROM calls ORDER BY model")]
    finally:
        db.close()


def prune(path: str | Path, *, older_than_days: float | None = None, models: list[str] | None = None,
          dry_run: bool = False, now: float | None = None) -> dict:
    """Delete the cache rows written more than ``older_than_days`` days ago (rows of unknown age,
    from before schema 2, count as older) and/or belonging to ``models`` (sha256s); with both,
    only rows matching both. The file is then vacuumed, so that it shrinks. Returns counts and sizes."""
    from .errors import FscoreError

    if older_than_days is None and models is None:
        raise FscoreError("cache prune needs --older-than DAYS and/or --model SHA_OR_NAME")
    if older_than_days is not None and not older_than_days >= 0:
        raise FscoreError(f"--older-than must be 0 or more days, not {older_than_days}")
    p = Path(path)
    if not p.exists():
        return {"path": str(p), "deleted": 0, "remaining": 0, "size_before": 0, "size_after": 0, "dry_run": dry_run}
    where, params = [], []
    if older_than_days is not None:
        cutoff = (time.time() if now is None else now) - older_than_days * 86400.0
        where.append("(created IS NULL OR created < ?)")
        params.append(cutoff)
    if models is not None:
        where.append(f"model IN ({','.join('?' * len(models))})" if models else "0")
        params.extend(models)
    size_before = cache_size(p)
    db = _open_existing(p)
    try:
        cond = " AND ".join(where)
        if dry_run:
            deleted = db.execute(f"SELECT count(*) FROM calls WHERE {cond}", params).fetchone()[0]
        else:
            with db:
                deleted = db.execute(f"DELETE FROM calls WHERE {cond}", params).rowcount
            if deleted:
                db.execute("VACUUM")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        remaining = db.execute("SELECT count(*) FROM calls").fetchone()[0] - (deleted if dry_run else 0)
    except sqlite3.OperationalError as e:
        raise FscoreError(f"could not prune the call cache {p}: {e} (is a run using it right now?)") from None
    finally:
        db.close()
    return {"path": str(p), "deleted": deleted, "remaining": remaining, "size_before": size_before,
            "size_after": size_before if dry_run else cache_size(p), "dry_run": dry_run}
