"""Passage embedding on Ray actors (``kb build --embed --ray``).

A store's vectors are embedded page by page (:func:`fscore_lite.page_vectors.embed_page`: the
int8 model quantises a whole batch, so mixing pages in one batch would change the bytes).
:meth:`RayEncoder.embed_pages` sends each page's texts to an actor whose embedder (same model,
same threads) runs exactly that call, and returns the vectors in page order; the one writer
then makes the same store bytes as a local build.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import FscoreError
from .ray_runner import RayPool


class EmbedActor:
    """One Ray actor: the embedder, loaded and hash-verified once."""

    def __init__(self, models_dir: str, name: str, threads: int):
        from ..backends.embed import SentenceEmbedder
        from ..manifest import Bundle

        self.error = None
        self.sha256 = None
        try:
            self.embedder = SentenceEmbedder.from_bundle(Bundle(Path(models_dir)), name, threads)
            self.sha256 = self.embedder.sha256
        except FscoreError as e:
            self.error = str(e)

    def ready(self) -> tuple[int, str | None, str | None]:
        return os.getpid(), self.sha256, self.error

    def embed_page(self, job: tuple[list[str], int]) -> np.ndarray:
        from ..page_vectors import embed_page

        texts, batch_size = job
        return embed_page(self.embedder, texts, batch_size)


class RayEncoder(RayPool):
    """``embed_pages(pages, batch_size) -> vectors per page`` on a pool of :class:`EmbedActor` s.

    ``embedder`` is the driver's (its sha256 is what every actor must load)."""

    # pages handed over at a time by build_store: work for many actors at once (the store's
    # bytes do not depend on it: pages are written in the same order)
    WINDOW_PAGES = 256

    def __init__(self, embedder, models_dir: str | Path, address: str = "local", actors: int | None = None):
        super().__init__(address, actors)
        self.embedder, self.models_dir = embedder, Path(models_dir)
        self.batches = 0  # pages embedded by the actors

    def start(self) -> None:
        if self.actors is not None:
            return
        e = self.embedder
        for _, sha256, error in self._start(EmbedActor, (str(self.models_dir), e.name, e.threads), e.threads):
            if error:
                raise FscoreError(error)
            if sha256 != e.sha256:
                raise FscoreError(f"a Ray worker's {e.name} is {sha256[:12]}…, not this machine's {e.sha256[:12]}…: "
                                  "install the same model bundle on every machine")

    def embed_pages(self, pages: list[list[str]], batch_size: int) -> list[np.ndarray]:
        """Each page's vectors, as ``embed_page`` makes them, computed on the actors."""
        if not pages:
            return []
        self.start()
        out = list(self._results("embed_page", ((texts, batch_size) for texts in pages), "embedding"))
        self.batches += len(out)
        return out
