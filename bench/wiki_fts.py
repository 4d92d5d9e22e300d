"""FTS5 settings for `kb build`'s full-text indexing, measured on the passages of a built store.

Copies the first N passages of STORE into a scratch database, then times (CPU seconds of this
process) the one ``INSERT ... SELECT`` into a contentless FTS5 table like the store's and the
final 'optimize', with the given settings. Settings: FTS5 options (``hashsize=67108864``,
``automerge=0``, ``pgsz=16000``, ...), ``cache_size=-262144``, and how markers are stripped:
``strip=python`` (a Python function per passage), ``strip=sql`` (the builder's
:data:`fscore_lite_index.writer.FTS_TEXT_SQL`) or ``strip=none`` (not stripped: the floor).

    nice -n 10 python -m bench.wiki_fts STORE 200000 hashsize=67108864 strip=sql
"""
from __future__ import annotations

import os
import re
import resource
import sqlite3
import sys
import time


def main(argv: list[str]) -> None:
    store, n, opts = argv[0], int(argv[1]), dict(o.split("=", 1) for o in argv[2:])
    from fscore_lite_index.writer import FTS_TEXT_SQL

    path = "/tmp/fts-settings-scratch.sqlite"
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(path + suffix):
            os.unlink(path + suffix)
    db = sqlite3.connect(path, isolation_level=None)
    markers = re.compile(r"</?s>")
    db.create_function("strip_markers", 1, lambda t: markers.sub("", t), deterministic=True)
    db.execute("PRAGMA synchronous = OFF")
    db.execute("PRAGMA journal_mode = WAL")
    strip = opts.pop("strip", "python")
    for key in ("cache_size", "page_size"):
        if key in opts:
            db.execute(f"PRAGMA {key} = {int(opts.pop(key))}")
    db.execute("CREATE TABLE passages (id INTEGER PRIMARY KEY, text TEXT)")
    db.execute("CREATE VIRTUAL TABLE passages_fts USING fts5(text, content='', tokenize='unicode61 remove_diacritics 2')")
    db.execute("ATTACH ? AS s", (f"file:{store}/store.sqlite?mode=ro",))
    db.execute("INSERT INTO passages SELECT id, text FROM s.passages WHERE id <= ?", (n,))
    for key, value in opts.items():
        db.execute("INSERT INTO passages_fts (passages_fts, rank) VALUES (?, ?)", (key, int(value)))
    expr = {"python": "strip_markers(text)", "sql": FTS_TEXT_SQL, "none": "text"}[strip]
    t0, c0 = time.perf_counter(), time.process_time()
    db.execute("BEGIN")
    db.execute(f"INSERT INTO passages_fts (rowid, text) SELECT id, {expr} FROM passages ORDER BY id")
    db.execute("COMMIT")
    t1, c1 = time.perf_counter(), time.process_time()
    db.execute("INSERT INTO passages_fts (passages_fts) VALUES ('optimize')")
    t2, c2 = time.perf_counter(), time.process_time()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with open("/proc/loadavg", encoding="ascii") as f:
        load = f.read().split()[0]
    print(f"{' '.join(argv[2:]) or 'defaults'}: insert {c1 - c0:.2f} CPU s ({t1 - t0:.1f} s wall), optimize "
          f"{c2 - c1:.2f} CPU s ({t2 - t1:.1f} s wall), peak RSS {rss:.0f} MiB, load average {load}")
    db.close()
    os.unlink(path)


if __name__ == "__main__":
    main(sys.argv[1:])
