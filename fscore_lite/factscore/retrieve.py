"""Evidence retrieval (SPEC FActScore §4).

Parity: only the topic page's passages are candidates; query = ``topic + " " + fact``;
passage text for embedding = ``title + " " + text`` (when the store is built with ``--embed``, else
the first time a page is retrieved, kept beside the store: :mod:`fscore_lite.page_vectors`); exact
inner-product ranking over the page's vectors; k = 5. With ``search_all`` a topic missing from
the store is searched store-wide through the HNSW index instead.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cache import CallCache
from ..store import Passage, PassageStore

K = 5


@dataclass(frozen=True)
class Evidence:
    passage: Passage
    score: float
    rank: int  # 0 = best


def retrieval_query(topic: str, fact: str) -> str:
    """SPEC §4: query = topic + " " + fact."""
    return topic + " " + fact.strip()


class Retriever:
    def __init__(self, store: PassageStore, embedder, k: int = K, search_all: bool = False,
                 cache: CallCache | None = None):
        self.store = store
        self.embedder = embedder
        self.k = k
        self.search_all = search_all
        self.cache = cache if cache is not None else CallCache(None)
        self._pages: dict[str, tuple[list[Passage], np.ndarray]] = {}
        self._by_id: dict[int, Passage] = {}
        self.calls = 0

    def has_topic(self, topic: str) -> bool:
        """Whether the store has the topic's page (exact, alias, NFC or trimmed; see the store)."""
        return self.store.has_page(topic)

    def missing_topic_message(self, topic: str) -> str:
        """The ``topic_not_found`` message, naming close titles of the store when there are any."""
        msg = f"topic {topic!r} is not a page of the store (use --search-all to search the whole store)"
        close = self.store.close_titles(topic) if hasattr(self.store, "close_titles") else []
        return msg + (f"; close titles: {', '.join(repr(t) for t in close)}" if close else "")

    def _page(self, topic: str) -> tuple[list[Passage], np.ndarray]:
        if topic not in self._pages:
            passages = self.store.page_passages(topic)
            self._pages[topic] = (passages, self.store.page_vectors(topic, self.embedder))
            for p in passages:
                self._by_id[p.id] = p
        return self._pages[topic]

    def rank(self, topic: str, query: str) -> list[tuple[int, float]]:
        """(passage id, score) of the k best passages for ``query``, computed (never from the cache)."""
        self.calls += 1
        qvec = self.embedder.encode([query])[0]
        if self.store.has_page(topic):
            passages, vectors = self._page(topic)
            scores = vectors @ qvec
            order = np.argsort(-scores, kind="stable")[: self.k]
            return [(passages[i].id, float(scores[i])) for i in order]
        if not self.search_all:
            return []
        hits = self.store.search_vectors(qvec, self.k)
        for p, _ in hits:
            self._by_id[p.id] = p
        return [(p.id, float(s)) for p, s in hits]

    def retrieve(self, topic: str, fact: str) -> list[Evidence]:
        """The k best passages for a fact, best first."""
        query = retrieval_query(topic, fact)
        payload = {"store": self.store.sha256, "topic": topic, "query": query, "k": self.k,
                   "search_all": self.search_all}
        ranked = self.cache.cached(self.embedder.sha256, "retrieve", payload, lambda: self.rank(topic, query))
        out = []
        for rank, (pid, score) in enumerate(ranked):
            if pid not in self._by_id:
                if self.store.has_page(topic):
                    self._page(topic)
                if pid not in self._by_id:
                    self._by_id.update(self.store.passages_by_id([pid]))
            out.append(Evidence(self._by_id[pid], score, rank))
        return out
