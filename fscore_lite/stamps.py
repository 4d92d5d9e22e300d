"""Verified stamps: remember a file's sha256 across runs, keyed by what identifies its bytes.

Hashing a 1.1 GB GGUF file or a large store on every run costs seconds to minutes. After a file
has been hashed, its stamp — resolved path, size, ``mtime_ns``, ``ctime_ns``, inode and device —
is kept with the digest in ``$FSCORE_LITE_HOME/verified.sqlite``. A later check whose ``stat()``
gives the same stamp uses the recorded digest; any write to the file (which changes its mtime and
ctime, or its inode when replaced) makes it hash again. ``fscore-lite models verify`` and
``fscore-lite kb verify`` always hash fully (``use_stamp=False``) and refresh the stamp.

A file changed within ``RACY_NS`` of being hashed is not stamped: a second write in the same
clock tick could otherwise leave its stamp unchanged (git's "racily clean" problem).
If the stamp file cannot be read or written (read-only home, locked), checks simply hash.
"""
from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from pathlib import Path

STAMPS_NAME = "verified.sqlite"
RACY_NS = 2_000_000_000  # a file must be this much older than its hashing to be stamped

_lock = threading.Lock()
_memory: dict[str, tuple[tuple[int, ...], str]] = {}


def stamps_path() -> Path:
    """``$FSCORE_LITE_HOME/verified.sqlite`` (the home of :class:`fscore_lite.settings.Settings`)."""
    from .settings import _home

    return _home() / STAMPS_NAME


def _stamp(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def _connect(create: bool) -> sqlite3.Connection | None:
    path = stamps_path()
    try:
        if not path.exists():
            if not create:
                return None
            path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(str(path), timeout=10)
        db.execute(
            "CREATE TABLE IF NOT EXISTS stamps (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER,"
            " ctime_ns INTEGER, inode INTEGER, device INTEGER, sha256 TEXT NOT NULL, hashed_at REAL)"
        )
        return db
    except (OSError, sqlite3.Error):
        return None


def _lookup(key: str, stamp: tuple[int, ...]) -> str | None:
    with _lock:
        hit = _memory.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    db = _connect(create=False)
    if db is None:
        return None
    try:
        row = db.execute(
            "SELECT size, mtime_ns, ctime_ns, inode, device, sha256 FROM stamps WHERE path = ?", (key,)
        ).fetchone()
    except sqlite3.Error:
        row = None
    finally:
        db.close()
    if row is None or tuple(row[:5]) != stamp:
        return None
    with _lock:
        _memory[key] = (stamp, row[5])
    return row[5]


def _record(key: str, stamp: tuple[int, ...], digest: str, hashed_at_ns: int) -> None:
    size, mtime_ns, ctime_ns = stamp[:3]
    if hashed_at_ns - max(mtime_ns, ctime_ns) < RACY_NS:
        with _lock:  # too fresh to trust a stamp; also drop what this process knew
            _memory.pop(key, None)
        return
    with _lock:
        _memory[key] = (stamp, digest)
    db = _connect(create=True)
    if db is None:
        return
    try:
        with db:
            db.execute("INSERT OR REPLACE INTO stamps VALUES (?,?,?,?,?,?,?,?)", (key, *stamp, digest, time.time()))
    except sqlite3.Error:
        pass
    finally:
        db.close()


def sha256_file(path: str | Path, chunk: int = 8 * 1024 * 1024) -> str:
    """The sha256 of a file, read in chunks: the one hashing of model and store files."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def verified_sha256(path: str | Path, *, use_stamp: bool = True) -> str:
    """The sha256 of ``path``: from its stamp when the file is unchanged, else hashed (and stamped).

    With ``use_stamp=False`` the file is always hashed and its stamp refreshed.
    """
    p = Path(path)
    key = str(p.resolve())
    before = os.stat(p)
    stamp = _stamp(before)
    if use_stamp:
        digest = _lookup(key, stamp)
        if digest is not None:
            return digest
    hashed_at = time.time_ns()
    digest = sha256_file(p)
    if _stamp(os.stat(p)) == stamp:  # unchanged while hashing
        _record(key, stamp, digest, hashed_at)
    return digest


def forget_memory() -> None:
    """Drop the stamps this process keeps in memory (the file is untouched); for tests."""
    with _lock:
        _memory.clear()
