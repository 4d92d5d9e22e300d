"""Keyword retrieval of a :class:`~fscore_lite.store.PassageStore`: passages ranked by the
store's SQLite FTS5 index with BM25 (store-wide statistics)."""
from __future__ import annotations

import re
import sqlite3

from ..errors import StoreError
from .pages import PageLookup
from .schema import Passage

_FTS_TERM = re.compile(r"\w+", re.UNICODE)


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


class FullTextSearch(PageLookup):
    """Mixed into ``PassageStore`` (uses its ``_q`` and the page lookups)."""

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
