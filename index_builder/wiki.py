"""The passage store of a data folder's wiki pages (``wiki-*/pages.jsonl``), built once and reused:
the store that training and meta-evaluation retrieve from."""
from __future__ import annotations

import hashlib
from pathlib import Path

from fscore_lite.io import atomic_write_text
from fscore_lite.settings import Settings


def ensure_store(files: list[Path], settings: Settings, store: Path | None) -> Path:
    """The store of the wiki text: reuse it when present, else build it."""
    h = hashlib.sha256()
    for f in files:
        h.update(f.read_bytes())
    path = store or settings.home / "stores" / f"wiki-{h.hexdigest()[:12]}"
    if (path / "manifest.json").exists():
        return path
    from .build import build_store  # imported only when a store is missing

    source = path.with_name(path.name + ".source.jsonl")
    atomic_write_text(source, "".join(f.read_text(encoding="utf-8") for f in files))
    build_store(source, path, source_label=", ".join(str(f) for f in files), snapshot="2026 (MediaWiki extracts)",
                threads=settings.threads, models_dir=settings.models_dir)
    return path
