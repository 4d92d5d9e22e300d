"""Pages → passages, in worker processes where it pays (wikitext parsing and chunking).

The main process reads the source and writes SQLite (one writer); ``workers`` processes turn
text into passages. Work goes out in batches and comes back in source order, with at most a
few batches in flight, so memory stays flat however long the source, and the passages are the
same for any number of workers (each page is chunked on its own, by the same tokenizer).
"""
from __future__ import annotations

import multiprocessing
from collections import deque
from typing import Iterable, Iterator

from fscore_lite.backends.embed import SentenceEmbedder, TokenSpan

from .chunking import MAX_TOKENS, chunk_page
from .mediawiki import wikitext_to_text
from .sources import SourcePage

BATCH_PAGES = 64


class _LastEncoding:
    """A tokenizer that remembers its last encoding: chunking counts a unit's tokens, then, when it
    overflows, asks for the same unit's offsets; this tokenizes it once."""

    def __init__(self, tokenizer):
        self.tokenizer, self.text, self.enc = tokenizer, None, None

    def encode(self, text: str):
        if text != self.text:
            self.text, self.enc = text, self.tokenizer.encode(text)
        return self.enc


class _Spans:
    """What :meth:`SentenceEmbedder.token_spans` returns (the non-special tokens as
    :class:`TokenSpan`), read from the encoding only at the tokens chunking looks at: a long unit
    is cut at a few places, and making a TokenSpan for each of its tokens cost about 0.9 ms on top
    of 2.2 ms of tokenizing for a 6,000-character unit."""

    __slots__ = ("_offsets", "_tokens", "_index")

    def __init__(self, enc):
        self._offsets, self._tokens = enc.offsets, enc.tokens
        self._index = [i for i, special in enumerate(enc.special_tokens_mask) if not special]

    def __len__(self) -> int:
        return len(self._index)

    def __getitem__(self, j: int) -> TokenSpan:
        i = self._index[j]
        start, end = self._offsets[i]
        return TokenSpan(start, end, not self._tokens[i].startswith("##"))


class TokenCounter:
    """The embedder's tokenizer alone (all that chunking needs), rebuilt in a worker from its JSON;
    counts and offsets are the embedder's own (its method and tokenizer; the spans read lazily)."""

    count_tokens = SentenceEmbedder.count_tokens

    def token_spans(self, text: str) -> _Spans:
        return _Spans(self.tokenizer.encode(text))

    def __init__(self, tokenizer_json: str):
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_str(tokenizer_json)
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self.tokenizer = _LastEncoding(tokenizer)


def page_passages(page: SourcePage, tok, rule: str) -> list[str] | None:
    """The page's passages (None for a redirect): as given, or chunked from its text."""
    if page.redirect is not None:
        return None
    if page.passages is not None:
        return list(page.passages)
    text = wikitext_to_text(page.text or "") if page.markup == "wikitext" else page.text or ""
    return chunk_page(page.title, text, tok, rule, MAX_TOKENS)


_TOK = None
_RULE = "reference"


def _init(tokenizer_json: str, rule: str) -> None:
    global _TOK, _RULE
    _TOK, _RULE = TokenCounter(tokenizer_json), rule


def _batch(pages: list[SourcePage]) -> list[list[str] | None]:
    return [page_passages(p, _TOK, _RULE) for p in pages]


def prepared_pages(pages: Iterable[SourcePage], tok: SentenceEmbedder, rule: str,
                   workers: int = 0) -> Iterator[tuple[SourcePage, list[str] | None]]:
    """``(page, passages)`` in source order; ``workers`` > 0 chunks in that many processes."""
    if workers <= 0:
        counter = TokenCounter(tok.tokenizer.to_str())
        for page in pages:
            yield page, page_passages(page, counter, rule)
        return
    ctx = multiprocessing.get_context("spawn")  # no fork of a process holding ONNX Runtime threads
    with ctx.Pool(workers, initializer=_init, initargs=(tok.tokenizer.to_str(), rule)) as pool:
        inflight: deque = deque()
        batch: list[SourcePage] = []

        def submit() -> None:
            nonlocal batch
            inflight.append((batch, pool.apply_async(_batch, (batch,))))
            batch = []

        for page in pages:
            batch.append(page)
            if len(batch) >= BATCH_PAGES:
                submit()
                while len(inflight) > 2 * workers:
                    done, result = inflight.popleft()
                    yield from zip(done, result.get())
        if batch:
            submit()
        while inflight:
            done, result = inflight.popleft()
            yield from zip(done, result.get())
