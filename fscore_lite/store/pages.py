"""Page and passage lookups of a :class:`~fscore_lite.store.PassageStore`: titles, aliases,
"did you mean", a page's passages, passages by id."""
from __future__ import annotations

import difflib
import unicodedata

from .schema import Passage, title_variants


class PageLookup:
    """Lookups by title or alias and by passage id. Mixed into ``PassageStore``, whose ``_q``
    (a locked read query) it uses."""

    def _q(self, sql: str, params=()) -> list[tuple]:  # provided by PassageStore
        raise NotImplementedError

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
