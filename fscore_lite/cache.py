"""SQLite cache of model calls: (model sha256, kind, exact input) → JSON output.

A rerun with the same model files and inputs makes no model calls. The schema carries a
version so that later releases can migrate it.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable

SCHEMA_VERSION = 1


class CallCache:
    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        if self.path is None:
            self._db = sqlite3.connect(":memory:", check_same_thread=False)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=60)
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS calls (model TEXT, kind TEXT, key TEXT, input TEXT, output TEXT,"
            " PRIMARY KEY (model, kind, key))"
        )
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        self._db.commit()

    @staticmethod
    def _key(payload: Any) -> tuple[str, str]:
        text = payload if isinstance(payload, str) else json.dumps(payload, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest(), text

    def get(self, model: str, kind: str, payload: Any) -> Any | None:
        key, _ = self._key(payload)
        with self._lock:
            row = self._db.execute(
                "SELECT output FROM calls WHERE model=? AND kind=? AND key=?", (model, kind, key)
            ).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, model: str, kind: str, payload: Any, output: Any) -> None:
        key, text = self._key(payload)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO calls VALUES (?,?,?,?,?)",
                (model, kind, key, text, json.dumps(output, ensure_ascii=False)),
            )
            self._db.commit()

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
