"""``kb build``: read a source, chunk its pages, embed the passages, write the store.

Pages stream through: passages are embedded in batches of about ``flush_passages`` (sorted by
length inside the embedder), written with their page and, with ``hnsw=True`` (``--hnsw``), added to
the HNSW index, so memory stays flat for large sources. Progress goes to stderr.

The HNSW index is opt-in: FActScore's retrieval ranks the topic page's vectors exactly (from
SQLite), and only store-wide search (``score --search-all``) needs it. The same input, model and
settings give the same store bytes (embedding may use many threads; HNSW insertion uses one).
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import fscore_lite
from fscore_lite.backends.embed import SentenceEmbedder
from fscore_lite.errors import FscoreError, InputError
from fscore_lite.manifest import Bundle, sha256_file
from fscore_lite.progress import Progress
from fscore_lite.settings import DEFAULT_EMBED, Settings
from fscore_lite.store import passage_embedding_text

from .chunking import MAX_TOKENS, RULE_DESCRIPTIONS, RULES, chunk_page
from .sources import FORMATS, SourcePage, detect_format, read_pages
from .writer import HNSW_EF_CONSTRUCTION, HNSW_M, HNSW_SEED, StoreWriter

EMBED_TEXT_RULE = 'title + " " + text with <s>/</s> removed (FActScore retrieval)'


@dataclass
class BuildStats:
    pages: int = 0
    passages: int = 0
    aliases: int = 0
    duplicate_titles: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0
    store_sha256: str = ""
    path: str = ""
    up_to_date: bool = False  # the existing store already matched; nothing was built

    @property
    def passages_per_second(self) -> float:
        return self.passages / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "store_sha256": self.store_sha256,
            "pages": self.pages,
            "passages": self.passages,
            "aliases": self.aliases,
            "duplicate_titles_skipped": self.duplicate_titles,
            "seconds": round(self.seconds, 2),
            "embed_seconds": round(self.embed_seconds, 2),
            "passages_per_second": round(self.passages_per_second, 2),
            "up_to_date": self.up_to_date,
        }


class _Progress:
    """Pages and passages on the shared progress line (:mod:`fscore_lite.progress`)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.bar = Progress(None, "kb build", enabled=enabled, item_unit="pages")

    def note(self, line: str) -> None:
        if self.enabled:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def update(self, pages: int, passages: int, final: bool = False) -> None:
        self.bar.set_counts("passages", passages)
        if pages > self.bar.done:
            self.bar.advance(pages - self.bar.done)
        if final:
            self.bar.close()


def build_store(
    source: str | Path,
    output: str | Path,
    *,
    fmt: str = "auto",
    source_label: str | None = None,
    snapshot: str | None = None,
    threads: int | None = None,
    models_dir: str | Path | None = None,
    embed_name: str = DEFAULT_EMBED,
    chunking: str = "reference",
    batch_size: int = 32,
    flush_passages: int = 256,
    overwrite: bool = False,
    progress: bool = True,
    embedder: SentenceEmbedder | None = None,
    hnsw: bool = False,
    encode=None,
) -> BuildStats:
    """Build a passage store at ``output`` from a FActScore DB, a TSV or a JSONL file.

    ``hnsw``: also build the HNSW index over all passages, which store-wide search needs.
    ``threads``: embedding threads (the HNSW index is always built with one, for reproducibility).
    ``encode``: ``(texts, batch_size) -> vectors`` in place of ``embedder.encode`` with the same
    bytes (``kb build --ray``: :class:`fscore_lite.distributed.ray_embed.RayEncoder`).
    """
    source = Path(source)
    prog = _Progress(progress)
    if fmt not in FORMATS:
        raise InputError(source, None, f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    if chunking not in RULES:
        raise InputError(source, None, f"unknown chunking rule {chunking!r}; choose from {', '.join(RULES)}")
    fmt = detect_format(source) if fmt == "auto" else fmt
    settings = Settings().with_(threads=threads, models_dir=Path(models_dir) if models_dir else None)
    input_sha = sha256_file(source)
    wanted = {
        "source": source_label or source.name,
        "snapshot": snapshot or "",
        "input_format": fmt,
        "input_sha256": input_sha,
        "chunking_rule": chunking if fmt == "jsonl" else "as-is",
    }
    if not overwrite:
        embed_sha = embedder.sha256 if embedder else Bundle(settings.models_dir).get(embed_name).sha256
        done = _existing_store(Path(output), {**wanted, "embed_sha256": embed_sha}, hnsw)
        if done == "no-hnsw":
            raise FscoreError(
                f"{output} was built from the same input without an HNSW index; pass --force (with --hnsw) "
                "to rebuild it with one"
            )
        if done is not None:
            prog.note(f"kb build: {output} is up to date (same input, model and settings); --force rebuilds it")
            return done
    if embedder is None:
        embedder = SentenceEmbedder.from_bundle(Bundle(settings.models_dir), embed_name, settings.threads)
    pages = read_pages(source, fmt)  # a generator: errors surface while iterating

    stats = BuildStats(path=str(output))
    t0 = time.monotonic()
    writer = StoreWriter(output, embedder.dim, overwrite=overwrite, threads=1, hnsw=hnsw)
    pending: list[tuple[SourcePage, list[str]]] = []
    pending_n = 0
    seen: set[str] = set()

    def flush() -> None:
        nonlocal pending, pending_n
        if not pending:
            return
        texts = [passage_embedding_text(p.title, t) for p, psgs in pending for t in psgs]
        e0 = time.monotonic()
        vectors = (encode or embedder.encode)(texts, batch_size=batch_size)
        stats.embed_seconds += time.monotonic() - e0
        row = 0
        for page, psgs in pending:
            writer.add_page(page.title, psgs, vectors[row : row + len(psgs)], page.aliases)
            row += len(psgs)
        stats.pages = writer.page_count
        stats.passages = writer.passage_count
        pending, pending_n = [], 0
        prog.update(stats.pages, stats.passages)

    try:
        for page in pages:
            if page.title in seen:  # first wins, as in FActScore's build_db
                stats.duplicate_titles += 1
                continue
            seen.add(page.title)
            if page.passages is not None:
                psgs = list(page.passages)
            else:
                psgs = chunk_page(page.title, page.text or "", embedder, chunking, MAX_TOKENS)
            pending.append((page, psgs))
            pending_n += len(psgs)
            if pending_n >= flush_passages:
                flush()
        flush()
        if writer.page_count == 0:
            raise InputError(source, None, "no pages found")
        stats.aliases = writer.alias_count
        meta = {
            **wanted,
            "input_file": source.name,
            "embed_model": embedder.name,
            "embed_sha256": embedder.sha256,
            "dim": embedder.dim,
            "embed_text": EMBED_TEXT_RULE,
            "chunking": RULE_DESCRIPTIONS[chunking]
            if fmt == "jsonl"
            else "passages kept as in the source (FActScore knowledge-DB layout, split on ####SPECIAL####SEPARATOR####)",
            "max_tokens": MAX_TOKENS,
            "page_count": writer.page_count,
            "passage_count": writer.passage_count,
            "alias_count": writer.alias_count,
            "duplicate_titles_skipped": stats.duplicate_titles,
            "hnsw": "yes" if hnsw else "no",
            **({"hnsw_space": "ip", "hnsw_m": HNSW_M, "hnsw_ef_construction": HNSW_EF_CONSTRUCTION,
                "hnsw_seed": HNSW_SEED, "hnsw_insert_threads": 1} if hnsw else {}),
            "fts_tokenizer": "unicode61 remove_diacritics 2",
            "builder": f"fscore-lite {fscore_lite.__version__}",
        }
        manifest = writer.finish(meta)
    except BaseException:
        writer.abort()
        raise
    stats.seconds = time.monotonic() - t0
    stats.store_sha256 = manifest["store_sha256"]
    prog.update(stats.pages, stats.passages, final=True)
    return stats


def _existing_store(path: Path, wanted: dict[str, str], hnsw: bool = False) -> BuildStats | str | None:
    """Stats of the store at ``path`` if it was built from the same input with the same
    model and settings (so rebuilding would change nothing); None if there is none;
    "no-hnsw" if it matches but lacks the HNSW index that ``hnsw`` asks for. A store with an
    HNSW index also serves a build that does not ask for one."""
    if not (path / "manifest.json").exists():
        return None
    from fscore_lite.errors import StoreError
    from fscore_lite.store import open_store

    try:
        with open_store(path) as store:
            if any(store.meta.get(k) != str(v) for k, v in wanted.items()):
                return None
            if hnsw and not store.has_hnsw:
                return "no-hnsw"
            info = store.info()
    except StoreError:
        return None
    return BuildStats(
        pages=info["pages"],
        passages=info["passages"],
        aliases=info["aliases"],
        duplicate_titles=int(info["meta"].get("duplicate_titles_skipped", 0)),
        store_sha256=info["store_sha256"],
        path=str(path),
        up_to_date=True,
    )
