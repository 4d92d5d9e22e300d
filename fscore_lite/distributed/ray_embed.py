"""Passage embedding on Ray actors (``kb build --embed --ray``).

:class:`RayEncoder` stands in for ``SentenceEmbedder.encode``: it orders the texts by token
length and cuts them into batches exactly as ``encode`` does, sends each batch to an actor
whose embedder (same model, same threads) encodes that one batch, and puts the rows back in
input order. Every batch is the same padded matrix a local build would run, so the vectors, and
the store the one writer makes of them, are the same bytes.
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

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.embedder.encode(texts, batch_size=len(texts))  # one batch, already length-ordered


class RayEncoder(RayPool):
    """``encode(texts, batch_size) -> vectors`` on a pool of :class:`EmbedActor` s.

    ``embedder`` is the driver's (it tokenizes, to order the texts as ``encode`` would)."""

    # passages per call from build_store: 128 batches of 32, work for up to 128 actors at once
    # (the store's bytes do not depend on it: pages are written in the same order)
    FLUSH_PASSAGES = 4096

    def __init__(self, embedder, models_dir: str | Path, address: str = "local", actors: int | None = None):
        super().__init__(address, actors)
        self.embedder, self.models_dir = embedder, Path(models_dir)
        self.batches = 0  # batches embedded by the actors

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

    def __call__(self, texts, batch_size: int = 32) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return self.embedder.encode(texts)
        self.start()
        ids = self.embedder._ids(texts)  # the token lengths encode() orders by
        order = sorted(range(len(texts)), key=lambda i: len(ids[i]))
        step = max(1, batch_size)
        batches = [order[b:b + step] for b in range(0, len(order), step)]
        result = np.zeros((len(texts), self.embedder.dim), dtype=np.float32)
        vectors = self._results("encode", ([texts[i] for i in idx] for idx in batches), "embedding")
        for idx, vecs in zip(batches, vectors):
            result[idx] = vecs
            self.batches += 1
        return result
