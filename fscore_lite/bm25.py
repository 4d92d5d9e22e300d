"""BM25 Okapi with the constants and IDF floor of the ``rank_bm25`` package the reference uses.

FActScore ranks a handful of candidates (21 demo sentences, one page's passages) with
``rank_bm25.BM25Okapi`` (k1=1.5, b=0.75, epsilon=0.25: a negative IDF is replaced by
epsilon × the average IDF). Store-wide keyword search uses SQLite FTS5 instead; this class
exists only so that parity-mode rankings over small candidate sets match the reference.
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np


class BM25Okapi:
    def __init__(self, corpus: list[list[str]], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25):
        self.k1, self.b = k1, b
        self.doc_freqs = [Counter(doc) for doc in corpus]
        self.doc_len = np.array([len(doc) for doc in corpus], dtype=np.float64)
        self.n = len(corpus)
        self.avgdl = float(self.doc_len.sum()) / max(self.n, 1)
        df: Counter = Counter()
        for freqs in self.doc_freqs:
            df.update(freqs.keys())
        self.idf: dict[str, float] = {}
        negative = []
        for word, freq in df.items():
            idf = math.log(self.n - freq + 0.5) - math.log(freq + 0.5)
            self.idf[word] = idf
            if idf < 0:
                negative.append(word)
        average_idf = sum(self.idf.values()) / len(self.idf) if self.idf else 0.0
        for word in negative:
            self.idf[word] = epsilon * average_idf

    def get_scores(self, query: list[str]) -> np.ndarray:
        scores = np.zeros(self.n)
        if self.n == 0 or self.avgdl == 0:
            return scores
        norm = self.k1 * (1 - self.b + self.b * self.doc_len / self.avgdl)
        for q in query:
            idf = self.idf.get(q)
            if not idf:
                continue
            tf = np.array([freqs.get(q, 0) for freqs in self.doc_freqs], dtype=np.float64)
            scores += idf * (tf * (self.k1 + 1) / (tf + norm))
        return scores

    def top_n(self, query: list[str], n: int) -> list[int]:
        """Indices of the ``n`` best documents, best first; ties go to the later document."""
        scores = self.get_scores(query)
        return [int(i) for i in np.argsort(scores, kind="stable")[::-1][:n]]
