"""``fscore-lite cache``: inspect and prune the SQLite cache of model calls (``calls.sqlite``).

The cache stores every model call's full input and output keyed by the model's sha256, so it
grows with every new input. ``info`` shows its size and what it holds per model; ``prune``
deletes rows by age and/or by model and shrinks the file.
"""
from __future__ import annotations

from .common import human_size

import json
import re
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import FscoreError
from ..settings import Settings

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Inspect and prune the model-call cache.")

CACHE_HELP = "Cache file (default: $FSCORE_LITE_HOME/calls.sqlite)."
MODELS_DIR_HELP = "Model bundle folder, to show and resolve model names (default: the configured bundle)."
_HEX = re.compile(r"[0-9a-fA-F]{6,64}")




def _names(models_dir: Optional[Path]) -> dict[str, str]:
    """sha256 → model name for the models of the bundle (empty when there is none)."""
    from ..manifest import Bundle

    root = Settings().with_(models_dir=models_dir).models_dir
    try:
        bundle = Bundle(root)
    except (OSError, ValueError, KeyError, TypeError, FscoreError):  # no readable manifest: sha256s only
        return {}
    out = {}
    for entry in bundle.entries.values():
        try:
            out.setdefault(entry.sha256, entry.name)
        except FscoreError:
            pass
    return out


def resolve_models(wanted: list[str], cached: list[str], names: dict[str, str]) -> list[str]:
    """The model sha256s that ``wanted`` (names of the bundle, sha256s or sha256 prefixes of at
    least 6 hex digits) stand for. A name or prefix that matches nothing the cache or the bundle
    knows, or a prefix that matches several models, is an error."""
    by_name = {name: sha for sha, name in names.items()}
    out: list[str] = []
    for w in wanted:
        if w in by_name:
            out.append(by_name[w])
        elif _HEX.fullmatch(w):
            w = w.lower()
            found = sorted({m for m in cached if m.startswith(w)} | ({w} if len(w) == 64 else set()))
            if len(found) > 1:
                raise FscoreError(f"model prefix {w!r} matches {len(found)} cached models: {', '.join(found)}; give more digits")
            if not found:
                raise FscoreError(f"no cached rows for a model whose sha256 starts with {w!r} "
                                  "(`fscore-lite cache info` lists the cached models)")
            out.append(found[0])
        else:
            known = ", ".join(sorted(by_name)) or "none"
            raise FscoreError(f"unknown model {w!r}: not a model name of the bundle (known: {known}) nor a sha256 "
                              "or sha256 prefix of 6 or more hex digits")
    return out


@app.command("info")
def info(
    cache: Optional[Path] = typer.Option(None, "--cache", help=CACHE_HELP),
    models_dir: Optional[Path] = typer.Option(None, "--models-dir", help=MODELS_DIR_HELP),
) -> None:
    """Print the cache's path, size on disk and rows per model (sha256, name, kinds, age) as JSON."""
    from ..cache import cache_info

    path = cache or Settings().cache_path
    result = cache_info(path, _names(models_dir))
    result["size"] = human_size(result["size_bytes"])
    typer.echo(json.dumps(result, ensure_ascii=False, indent=2))


@app.command("prune")
def prune(
    older_than: Optional[float] = typer.Option(
        None, "--older-than", metavar="DAYS",
        help="Delete rows written more than DAYS days ago (rows from before the cache recorded times count as older).",
    ),
    model: Optional[List[str]] = typer.Option(
        None, "--model", metavar="SHA_OR_NAME",
        help="Delete rows of this model: a bundle name or a sha256 (prefix of 6+ hex digits). Repeatable. "
        "With --older-than, only that model's old rows.",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Count the rows that would go; delete nothing."),
    cache: Optional[Path] = typer.Option(None, "--cache", help=CACHE_HELP),
    models_dir: Optional[Path] = typer.Option(None, "--models-dir", help=MODELS_DIR_HELP),
) -> None:
    """Delete cache rows by age and/or model, then compact the file; prints what was deleted as JSON."""
    from ..cache import cache_models
    from ..cache import prune as prune_cache

    if older_than is None and not model:
        raise FscoreError("cache prune needs --older-than DAYS and/or --model SHA_OR_NAME")
    path = cache or Settings().cache_path
    shas = resolve_models(list(model), cache_models(path), _names(models_dir)) if model else None
    result = prune_cache(path, older_than_days=older_than, models=shas, dry_run=dry_run)
    result["models"] = shas
    result["size_before_h"], result["size_after_h"] = human_size(result["size_before"]), human_size(result["size_after"])
    typer.echo(json.dumps(result, ensure_ascii=False, indent=2))
