"""``fscore-lite kb``: build, inspect and search passage stores."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..distributed import RAY_ACTORS_HELP, ray_build_options
from ..settings import Settings

app = typer.Typer(no_args_is_help=True)


def _echo_json(obj) -> None:
    typer.echo(json.dumps(obj, ensure_ascii=False, indent=2))


@app.command()
def build(
    source: Annotated[Path, typer.Argument(help="FActScore knowledge DB (.db), TSV (id, text, title), JSONL pages or a "
                                           "MediaWiki XML dump (*-pages-articles*.xml.bz2).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Store folder to create.")],
    format: Annotated[
        str, typer.Option("--format", help="auto | factscore-db | jsonl | tsv | mediawiki (auto: by file header "
                          "and suffix).")
    ] = "auto",
    source_label: Annotated[
        Optional[str], typer.Option("--source", help="Where the text comes from, recorded in the store's meta.")
    ] = None,
    snapshot: Annotated[Optional[str], typer.Option("--snapshot", help="Snapshot date of the text, recorded in meta.")] = None,
    chunking: Annotated[
        str,
        typer.Option(
            "--chunking",
            help="JSONL and dumps: 'reference' (default, parity: sections filled to 256 tokens and cut like "
            "FActScore's build_db) or 'sentences' (whole sentences packed into <=256-token passages).",
        ),
    ] = "reference",
    threads: Annotated[Optional[int], typer.Option("--threads", help="CPU threads for embedding.")] = None,
    models_dir: Annotated[Optional[Path], typer.Option("--models-dir", help="Model bundle folder.")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Passages per embedding batch.")] = 32,
    embed: Annotated[
        bool,
        typer.Option(
            "--embed",
            help="Embed every passage now (slow: 10-20 passages/s per core). Off by default: a page is embedded "
            "the first time a run retrieves from it and its vectors are kept beside the store (same bytes).",
        ),
    ] = False,
    hnsw: Annotated[
        bool,
        typer.Option(
            "--hnsw",
            help="With --embed, also build an HNSW index over all passages (hnsw.bin), needed only for "
            "store-wide search (`score --search-all`, `kb search` without --title). Retrieval for a known "
            "topic ranks the page's vectors exactly without it.",
        ),
    ] = False,
    resume: Annotated[
        bool,
        typer.Option("--resume", help="Continue an interrupted build of OUTPUT (same input and options); the "
                     "store is the same bytes as an uninterrupted build."),
    ] = False,
    workers: Annotated[
        Optional[int],
        typer.Option("--workers", help="Processes parsing and chunking text (JSONL, dumps); default: CPUs - 1; 0: "
                     "none."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing store at OUTPUT.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress line.")] = False,
    ray: Annotated[Optional[str], typer.Option("--ray", help="Embed the passages on Ray actors (local, auto or a "
                                               "cluster address; needs fscore-lite[ray]): the same store bytes.")] = None,
    ray_actors: Annotated[Optional[int], typer.Option("--ray-actors", help=RAY_ACTORS_HELP)] = None,
) -> None:
    """Build a passage store: chunk pages (JSONL, dumps) or keep DB passages, index them (and embed them).

    The store is written next to OUTPUT (.OUTPUT.building) and renamed into place only when complete;
    after a kill, the same command with --resume continues where the last commit left off.

    Prints the build summary as JSON. An existing store built from the same input, model and settings is kept (up_to_date).
    """
    from ..build_step import build_store  # build code, imported only when building

    stats = build_store(
        source,
        output,
        fmt=format,
        source_label=source_label,
        snapshot=snapshot,
        threads=threads,
        models_dir=models_dir,
        chunking=chunking,
        batch_size=batch_size,
        overwrite=force,
        progress=not quiet,
        hnsw=hnsw,
        embed=embed,
        resume=resume,
        workers=workers,
        **ray_build_options(ray, ray_actors, threads, models_dir, embed),
    )
    _echo_json(stats.to_json())


@app.command()
def info(
    store: Annotated[Optional[Path], typer.Argument(help="Store folder (default: the configured store).")] = None,
    no_verify: Annotated[bool, typer.Option("--no-verify", help="Check file sizes only, not sha256.")] = False,
) -> None:
    """Print a store's counts, meta, files and identity as JSON (verifies its hashes)."""
    from ..store import open_store

    path = store or Settings().store
    with open_store(path, verify=not no_verify) as s:
        _echo_json(s.info())


@app.command()
def verify(
    store: Annotated[Optional[Path], typer.Argument(help="Store folder (default: the configured store).")] = None,
) -> None:
    """Recompute the sha256 of every store file (ignoring verified stamps); exit 1 naming any file that fails.

    Opening a store (score, kb info, kb search) re-hashes a file only when it changed since it was last
    verified; this command always hashes everything.
    """
    from ..store import open_store, verify_store

    path = store or Settings().store
    results = verify_store(path)
    failed = [name for name, problem in results if problem]
    for name, problem in results:
        if problem:
            typer.echo(f"FAILED {name}: {problem}", err=True)
        typer.echo(f"{'FAILED' if problem else 'ok    '} {name}")
    if failed:
        typer.echo(f"{len(failed)} file(s) of {path} failed verification: {', '.join(failed)}", err=True)
        raise typer.Exit(1)
    from ..page_vectors import VECTORS_NAME, VectorFile

    side = Path(path) / VECTORS_NAME
    if side.exists():  # the lazily embedded page vectors: each row checked against its own hash
        vf = VectorFile(side)
        try:
            bad = vf.bad_rows()
        finally:
            vf.close()
        if bad:
            typer.echo(f"FAILED {VECTORS_NAME}: {bad} page vector row(s) do not match their hash; runs drop and "
                       "re-embed them (or delete the file)", err=True)
            raise typer.Exit(1)
        typer.echo(f"ok     {VECTORS_NAME}")
    with open_store(path, verify=False) as s:  # the database opens and has the store's schema
        typer.echo(f"ok     {path} (store_sha256 {s.sha256})")


@app.command()
def search(
    store: Annotated[Path, typer.Argument(help="Store folder.")],
    query: Annotated[str, typer.Argument(help="Query text.")],
    k: Annotated[int, typer.Option("--k", "-k", help="Number of hits.")] = 5,
    title: Annotated[Optional[str], typer.Option("--title", help="Only this page (title or alias).")] = None,
    bm25: Annotated[bool, typer.Option("--bm25", help="Full-text BM25 instead of dense vectors.")] = False,
    preview: Annotated[int, typer.Option("--preview", help="Characters of text to show (0 = all).")] = 160,
    threads: Annotated[Optional[int], typer.Option("--threads", help="CPU threads for embedding the query.")] = None,
    models_dir: Annotated[Optional[Path], typer.Option("--models-dir", help="Model bundle folder.")] = None,
) -> None:
    """Search a store; prints one JSON line per hit, best first.

    Dense search embeds the query with the store's model and refuses to run if the installed model's sha256 differs.

    With --title only that page's passages are ranked (as FActScore's retrieval does).
    """
    import numpy as np

    from ..backends.embed import SentenceEmbedder
    from ..errors import FscoreError
    from ..manifest import Bundle
    from ..store import open_store

    settings = Settings().with_(threads=threads, models_dir=models_dir)
    with open_store(store) as s:
        if bm25:
            hits = s.search_bm25(query, k, title=title)
        else:
            embedder = SentenceEmbedder.from_bundle(Bundle(settings.models_dir), s.embed_model, settings.threads)
            s.check_embedder(embedder)
            q = embedder.encode([query])[0]
            if title is None:
                hits = s.search_vectors(q, k)
            else:
                passages = s.page_passages(title)
                if not passages:
                    raise FscoreError(f"no page {title!r} in {store}")
                scores = s.page_vectors(title, embedder) @ q
                order = np.argsort(-scores, kind="stable")[:k]
                hits = [(passages[i], float(scores[i])) for i in order]
        for rank, (p, score) in enumerate(hits, start=1):
            text = p.text if preview <= 0 or len(p.text) <= preview else p.text[:preview] + "…"
            typer.echo(
                json.dumps(
                    {"rank": rank, "id": p.id, "title": p.title, "ordinal": p.ordinal, "score": round(score, 6), "text": text},
                    ensure_ascii=False,
                )
            )
