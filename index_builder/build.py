"""``kb build``: read a source, chunk its pages, (embed the passages,) write the store.

Pages stream through: the main process reads the source and is the one SQLite writer, worker
processes parse and chunk text (:mod:`.parallel`), commits come every ``commit_pages`` source
pages with a checkpoint for ``--resume``, so memory stays flat for a whole Wikipedia dump.
Without ``embed`` (the ``kb build`` default) no vectors are written: a page is embedded the
first time a run retrieves from it, with the bytes ``embed`` would have written (each page is
embedded on its own, by :func:`fscore_lite.page_vectors.embed_page`). Progress goes to stderr.

The HNSW index is opt-in: FActScore's retrieval ranks the topic page's vectors exactly (from
SQLite), and only store-wide search (``score --search-all``) needs it. The same input, model and
settings give the same store bytes (embedding may use many threads; HNSW insertion uses one).
"""
from __future__ import annotations

import hashlib
import itertools
import os
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import fscore_lite
from fscore_lite.backends.embed import SentenceEmbedder
from fscore_lite.errors import FscoreError, InputError
from fscore_lite.manifest import Bundle, sha256_file
from fscore_lite.progress import Progress
from fscore_lite.settings import DEFAULT_EMBED, Settings
from fscore_lite.page_vectors import DEFAULT_BATCH, embed_page
from fscore_lite.store import passage_embedding_text

from .chunking import MAX_TOKENS, RULE_DESCRIPTIONS, RULES
from .parallel import prepared_pages
from .sources import CHUNKED_FORMATS, FORMATS, detect_format, read_pages
from .mediawiki import TruncatedDump
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
    vectors: str = ""  # "all" (--embed) or "lazy" (embedded at first retrieval)
    # CPU seconds (user + system) of this process, of it while indexing and compacting (the
    # serial tail of a build), and of the chunking workers: what a build costs on any machine,
    # however busy this one was (wall seconds depend on the other jobs sharing the cores)
    cpu_main_seconds: float = 0.0
    cpu_finish_seconds: float = 0.0
    cpu_workers_seconds: float = 0.0
    finish_seconds: float = 0.0

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
            "vectors": self.vectors,
            "finish_seconds": round(self.finish_seconds, 2),
            "cpu_seconds": {"main": round(self.cpu_main_seconds, 2), "finish": round(self.cpu_finish_seconds, 2),
                            "workers": round(self.cpu_workers_seconds, 2)},
        }


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


class _Progress:
    """Pages and passages on the shared progress line (:mod:`fscore_lite.progress`)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.bar = Progress(None, "kb build", enabled=enabled, item_unit="pages")

    def note(self, line: str) -> None:
        if self.enabled:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def update(self, pages: int, passages: int, position: list[int] | None = None, final: bool = False) -> None:
        """``position`` (``[read, total]`` of the source) gives an estimated page total, hence an ETA."""
        if position and position[0] > 0 and position[1] > 0 and not final:
            self.bar.total = max(pages, int(pages * position[1] / position[0]))
        self.bar.set_counts("passages", passages)
        if pages > self.bar.done:
            self.bar.advance(pages - self.bar.done)
        if final:
            self.bar.total = self.bar.done
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
    batch_size: int = DEFAULT_BATCH,
    overwrite: bool = False,
    progress: bool = True,
    embedder: SentenceEmbedder | None = None,
    hnsw: bool = False,
    embed: bool = True,
    resume: bool = False,
    workers: int | None = None,
    commit_pages: int = 20_000,
    embed_pages=None,
    window_pages: int = 1,
) -> BuildStats:
    """Build a passage store at ``output`` from a FActScore DB, a TSV, a JSONL file or a MediaWiki dump.

    ``embed``: embed every passage now (``kb build --embed``); otherwise the store holds text
    only and a page is embedded the first time a run retrieves from it (:mod:`fscore_lite.page_vectors`).
    ``hnsw``: also build the HNSW index over all passages, which store-wide search needs (needs ``embed``).
    ``threads``: embedding threads (the HNSW index is always built with one, for reproducibility).
    ``resume``: continue an interrupted build of the same input and settings (same bytes as one run).
    ``workers``: chunking processes for text sources (default: the CPUs but one; 0 = in this process).
    ``commit_pages``: source pages between commits (how much a kill loses).
    ``embed_pages``: ``(list of pages' embedding texts, batch_size) -> list of vectors`` in place of
    :func:`embed_page` page by page, with the same bytes (``kb build --embed --ray``:
    :class:`fscore_lite.distributed.ray_embed.RayEncoder`), fed ``window_pages`` pages at a time.
    """
    source = Path(source)
    prog = _Progress(progress)
    if fmt not in FORMATS:
        raise InputError(source, None, f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    if chunking not in RULES:
        raise InputError(source, None, f"unknown chunking rule {chunking!r}; choose from {', '.join(RULES)}")
    if hnsw and not embed:
        raise FscoreError("--hnsw (store-wide search) needs every passage's vector: add --embed")
    _check_output(source, Path(output))
    fmt = detect_format(source) if fmt == "auto" else fmt
    settings = Settings().with_(threads=threads, models_dir=Path(models_dir) if models_dir else None)
    input_size = source.stat().st_size
    input_sha = sha256_file(source)
    wanted = {
        "source": source_label or source.name,
        "snapshot": snapshot or "",
        "input_format": fmt,
        "input_sha256": input_sha,
        "chunking_rule": chunking if fmt in CHUNKED_FORMATS else "as-is",
        "vectors": "all" if embed else "lazy",
        "embed_batch_size": batch_size,
    }
    if resume and not overwrite and (Path(output) / "manifest.json").exists():
        embed_sha = embedder.sha256 if embedder else Bundle(settings.models_dir).get(embed_name).sha256
        done = _existing_store(Path(output), {**wanted, "embed_sha256": embed_sha}, hnsw)
        if not isinstance(done, BuildStats):
            raise FscoreError(f"{output} already holds a store built from another input or with other settings; "
                              "--resume only continues an interrupted build of this input, so it is kept: pass "
                              "--force to replace it, or choose another output folder")
        prog.note(f"kb build: {output} is up to date (same input, model and settings); --force rebuilds it")
        return done
    if not overwrite and not resume:
        embed_sha = embedder.sha256 if embedder else Bundle(settings.models_dir).get(embed_name).sha256
        done = _existing_store(Path(output), {**wanted, "embed_sha256": embed_sha}, hnsw)
        if done == "no-hnsw":
            raise FscoreError(
                f"{output} was built from the same input without an HNSW index; pass --force (with --embed "
                "--hnsw) to rebuild it with one"
            )
        if done is not None:
            prog.note(f"kb build: {output} is up to date (same input, model and settings); --force rebuilds it")
            return done
    if embedder is None:
        embedder = SentenceEmbedder.from_bundle(Bundle(settings.models_dir), embed_name, settings.threads)
    if workers is None:
        workers = max(0, min((os.cpu_count() or 1) - 1, 8))
    if fmt not in CHUNKED_FORMATS:
        workers = 0  # passages are kept as given: nothing to farm out

    stats = BuildStats(path=str(output), vectors="all" if embed else "lazy")
    t0 = time.monotonic()
    cpu0, cpu0_children = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    writer = StoreWriter(output, embedder.dim, overwrite=overwrite or resume, threads=1, hnsw=hnsw,
                         vectors=embed, resume=resume)
    state = writer.checkpoint_state
    identity = {**wanted, "embed_sha256": embedder.sha256}
    if state and state.get("identity") != identity and _grown_since(source, state, identity):
        prog.note(f"kb build: {source} is the file the interrupted build stopped at the end of, now longer: "
                  "continuing")
    elif state and state.get("identity") != identity:
        writer.abort(keep=True)
        raise FscoreError(f"the interrupted build beside {output} was of another input or other settings; "
                          "run without --resume to start over")
    consumed = int(state.get("consumed", 0))
    stats.duplicate_titles = int(state.get("duplicates", 0))
    if consumed:
        prog.note(f"kb build: resuming after {consumed} source pages ({writer.page_count} pages written)")
        prog.bar.skip(writer.page_count)
    position: list[int] = []
    pages = itertools.islice(read_pages(source, fmt, position), consumed, None)

    def save(**more) -> None:
        writer.checkpoint({"identity": identity, "consumed": consumed, "duplicates": stats.duplicate_titles, **more})

    def embed_window(window: list) -> dict[int, np.ndarray]:
        """Vectors of the window's pages that will be written (by position in the window)."""
        wanted = [i for i, (page, psgs) in enumerate(window) if psgs and not writer.has_title(page.title)]
        texts = [[passage_embedding_text(window[i][0].title, t) for t in window[i][1]] for i in wanted]
        e0 = time.monotonic()
        if embed_pages is None:
            vectors = [embed_page(embedder, t, batch_size) for t in texts]
        else:
            vectors = embed_pages(texts, batch_size)
        stats.embed_seconds += time.monotonic() - e0
        return dict(zip(wanted, vectors))

    def write_window(window: list) -> None:
        nonlocal consumed
        vectors = embed_window(window) if embed else {}
        for i, (page, psgs) in enumerate(window):
            consumed += 1
            if psgs is None:
                writer.add_redirect(page.title, page.redirect)
            elif writer.has_title(page.title):  # first wins, as in FActScore's build_db
                stats.duplicate_titles += 1
            else:
                v = vectors.get(i, np.zeros((0, embedder.dim), dtype=np.float32)) if embed else None
                writer.add_page(page.title, psgs, v, page.aliases)
            if consumed % commit_pages == 0:  # every page up to here is written
                save()
            if consumed % 500 == 0:
                prog.update(writer.page_count, writer.passage_count, position)

    try:
        window: list = []
        for page, psgs in prepared_pages(pages, embedder, chunking, workers):
            window.append((page, psgs))
            if len(window) >= max(1, window_pages):
                write_window(window)
                window = []
        write_window(window)
        save()
        if writer.page_count == 0:
            raise InputError(source, None, "no pages found")
        prog.update(writer.page_count, writer.passage_count, position)
        prog.note(f"kb build: indexing {writer.passage_count} passages for full-text search"
                  + (" and HNSW" if hnsw else "") + ", then compacting")
        stats.pages, stats.passages = writer.page_count, writer.passage_count
        meta = {
            **wanted,
            "input_file": source.name,
            "embed_model": embedder.name,
            "embed_sha256": embedder.sha256,
            "dim": embedder.dim,
            "embed_text": EMBED_TEXT_RULE,
            "chunking": RULE_DESCRIPTIONS[chunking]
            if fmt in CHUNKED_FORMATS
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
        f0, fcpu0 = time.monotonic(), _cpu(resource.RUSAGE_SELF)
        manifest = writer.finish(meta)
        stats.finish_seconds, stats.cpu_finish_seconds = time.monotonic() - f0, _cpu(resource.RUSAGE_SELF) - fcpu0
    except TruncatedDump as e:  # the pages before the cut are good: commit them for a --resume
        save(truncated={"size": input_size, "sha256": input_sha})
        writer.abort(keep=True)
        raise InputError(e.path, None, f"{e.message}; the {writer.page_count:,} articles before the cut are committed: once "
                         "the file is complete, the same command with --resume continues from there") from None
    except (KeyboardInterrupt, SystemExit):
        writer.abort(keep=True)  # what was committed stays for --resume
        prog.note(f"kb build: interrupted; the same command with --resume continues from the last commit "
                  f"({writer.tmp})")
        raise
    except BaseException:
        writer.abort()
        raise
    stats.aliases = writer.alias_total
    if stats.duplicate_titles:  # said even with --quiet: pages of the input are not in the store
        sys.stderr.write(f"warning: {source}: {stats.duplicate_titles:,} page(s) skipped because an earlier page has "
                         "the same title (the first is kept, as FActScore's build_db does)\n")
    stats.seconds = time.monotonic() - t0
    stats.cpu_main_seconds = _cpu(resource.RUSAGE_SELF) - cpu0
    stats.cpu_workers_seconds = _cpu(resource.RUSAGE_CHILDREN) - cpu0_children  # the pool is joined by now
    stats.store_sha256 = manifest["store_sha256"]
    prog.update(stats.pages, stats.passages, final=True)
    return stats


def _grown_since(source: Path, state: dict, identity: dict) -> bool:
    """Whether an interrupted build stopped at the end of a cut-short ``source`` (its checkpoint
    records that file's size and sha256) and ``source`` is now that file with more bytes after it:
    the same build, of the completed file. Only the input's hash may differ."""
    cut = state.get("truncated")
    old = dict(state.get("identity") or {})
    if not isinstance(cut, dict) or {**old, "input_sha256": identity["input_sha256"]} != identity:
        return False
    size, h = cut.get("size"), hashlib.sha256()
    if not isinstance(size, int) or source.stat().st_size <= size or old.get("input_sha256") != cut.get("sha256"):
        return False
    with open(source, "rb") as f:
        left = size
        while left:
            chunk = f.read(min(left, 1 << 20))
            if not chunk:
                return False
            h.update(chunk)
            left -= len(chunk)
    return h.hexdigest() == cut["sha256"]


def _check_output(source: Path, output: Path) -> None:
    """Refuse a store folder that holds the input (replacing the folder would delete it) or that is
    the input, and an output path that is a lock, device or other non-folder (:func:`check_output_path`'s
    rule, for a folder)."""
    from fscore_lite.io import path_inside

    if path_inside(source, output):
        raise FscoreError(f"{output}: refusing to build the store there: the input {source} is inside it, and "
                          "replacing the folder would delete the input; move the input out or choose another folder")
    if output.is_symlink() or (output.exists() and not output.is_dir() and not output.is_file()):
        raise FscoreError(f"{output}: refusing to build the store there: it is a link, device or pipe, not a folder")
    above = next((p for p in output.absolute().parents if p.exists()), None)
    if above is not None and not above.is_dir():
        raise FscoreError(f"{output}: cannot create the store there: {above} is a file, not a folder")


def _existing_store(path: Path, wanted: dict[str, str], hnsw: bool = False) -> BuildStats | str | None:
    """Stats of the store at ``path`` if it was built from the same input with the same
    model and settings (so rebuilding would change nothing); None if there is none;
    "no-hnsw" if it matches but lacks the HNSW index that ``hnsw`` asks for. A store with an
    HNSW index (or with vectors) also serves a build that does not ask for one."""
    if not (path / "manifest.json").exists():
        return None
    from fscore_lite.errors import StoreError
    from fscore_lite.store import open_store

    try:
        with open_store(path) as store:
            have = dict(store.meta)
            if have["vectors"] == "all" and wanted.get("vectors") == "lazy":
                have["vectors"] = "lazy"  # a store with every vector serves a build that asks for none
            if any(have.get(k) != str(v) for k, v in wanted.items()):
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
        vectors=info["vectors"],
    )
