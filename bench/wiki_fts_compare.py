"""Do two passage stores hold the same full-text index? Compares every FTS5 term with its document
and instance counts (fts5vocab), the BM25 top 50 of a few queries, and the passages' text.

    python -m bench.wiki_fts_compare STORE_A STORE_B
"""
from __future__ import annotations

import sqlite3
import sys

QUERIES = ["Southern Hemisphere", "French national football team", "university professor born",
           "album released 1999", "Kawasaki Frontale"]
BM25 = "SELECT rowid, bm25(passages_fts) FROM passages_fts WHERE passages_fts MATCH ? ORDER BY 2, rowid LIMIT 50"


def main(argv: list[str]) -> int:
    from fscore_lite.store import fts_query

    dbs = [sqlite3.connect(f"file:{path}/store.sqlite?mode=ro", uri=True) for path in argv[:2]]
    for db in dbs:
        db.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, passages_fts, row)")
    vocab = [db.execute("SELECT term, doc, cnt FROM temp.v ORDER BY term").fetchall() for db in dbs]
    bm25 = all(dbs[0].execute(BM25, (fts_query(q),)).fetchall() == dbs[1].execute(BM25, (fts_query(q),)).fetchall()
               for q in QUERIES)
    text = [db.execute("SELECT group_concat(text, char(10)) FROM (SELECT text FROM passages ORDER BY id)").fetchone()
            for db in dbs]
    print(f"terms {len(vocab[0]):,} / {len(vocab[1]):,}, the same with their counts: {vocab[0] == vocab[1]}; "
          f"BM25 top 50 of {len(QUERIES)} queries the same: {bm25}; passages the same: {text[0] == text[1]}")
    return 0 if vocab[0] == vocab[1] and bm25 and text[0] == text[1] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
