"""Vector access of a :class:`~fscore_lite.store.PassageStore`: a page's passage vectors (stored,
or embedded at first retrieval for a store built without ``--embed``), the embedder check, and
store-wide nearest-passage search over the optional HNSW index."""
from __future__ import annotations

import numpy as np

from ..errors import StoreError
from ..page_vectors import VectorFile, embed_page, page_key, side_file
from .pages import PageLookup
from .schema import HNSW_NAME, Passage, passage_embedding_text


class VectorSearch(PageLookup):
    """Mixed into ``PassageStore``, which sets the attributes used here (``path``, ``sha256``,
    ``manifest``, ``dim``, ``lazy``, ``embed_model``, ``embed_sha256``, ``embed_batch_size``,
    ``_lock``, ``_hnsw``, ``_vector_file``)."""

    @property
    def has_hnsw(self) -> bool:
        """Whether the store has an HNSW index (``kb build --hnsw``) for store-wide search."""
        return HNSW_NAME in self.manifest["files"]

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

    def check_embedder(self, embedder) -> None:
        """Raise StoreError unless ``embedder`` is the model the store's vectors were made with."""
        if embedder.sha256 != self.embed_sha256:
            raise StoreError(
                f"the store {self.path} was embedded with {self.embed_model} (sha256 {self.embed_sha256}), "
                f"but the installed model {embedder.name} has sha256 {embedder.sha256}: vectors would not "
                "be comparable. Install the store's model or rebuild the store."
            )

    # -- store-wide search (HNSW) -------------------------------------------------------------
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
