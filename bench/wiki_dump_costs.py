"""Where a MediaWiki dump build's CPU goes, per page: bz2, mwxml, mwparserfromhell, chunking.

Each stage is timed on its own (CPU seconds of this process) over the first N pages of a dump:
the whole file's bz2 decompression alone, reading pages (bz2 + mwxml), wikitext to text
(mwparserfromhell), and chunking with the builder's tokenizer (the reference rule).

    nice -n 10 python -m bench.wiki_dump_costs ~/.cache/fscore-lite/bench/wiki/synthetic-3000-pages-articles.xml.bz2 3000
"""
from __future__ import annotations

import bz2
import itertools
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> None:
    from fscore_lite.backends.embed import SentenceEmbedder
    from fscore_lite.manifest import Bundle
    from fscore_lite.settings import DEFAULT_EMBED, Settings
    from fscore_lite_index.chunking import MAX_TOKENS, chunk_page
    from fscore_lite_index.mediawiki import read_mediawiki, wikitext_to_text
    from fscore_lite_index.parallel import TokenCounter

    src, n = Path(argv[0]), int(argv[1])
    c = time.process_time()
    size = 0
    with bz2.open(src, "rb") as f:
        while block := f.read(1 << 20):
            size += len(block)
    bz2_s = time.process_time() - c
    c = time.process_time()
    pages = list(itertools.islice(read_mediawiki(src), n))
    read_s = time.process_time() - c
    articles = [p for p in pages if p.redirect is None]
    c = time.process_time()
    texts = [wikitext_to_text(p.text) for p in articles]
    parse_s = time.process_time() - c
    tok = TokenCounter(SentenceEmbedder.from_bundle(Bundle(Settings().models_dir), DEFAULT_EMBED, 1).tokenizer.to_str())
    c = time.process_time()
    passages = [chunk_page(p.title, t, tok, "reference", MAX_TOKENS) for p, t in zip(articles, texts)]
    chunk_s = time.process_time() - c
    print(f"bz2 alone, whole file: {bz2_s:.2f} CPU s for {size / 1e6:.0f} MB")
    print(f"{len(pages)} pages ({len(articles)} articles, {sum(map(len, passages))} passages): "
          f"read (bz2 + mwxml) {read_s / len(pages) * 1000:.2f} ms/page, mwparserfromhell "
          f"{parse_s / len(articles) * 1000:.2f} ms/article, chunking {chunk_s / len(articles) * 1000:.2f} ms/article")


if __name__ == "__main__":
    main(sys.argv[1:])
