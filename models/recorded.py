"""What a build step recorded: is a model trained with these settings installed, its files intact?"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path


def trained_entry(bundle_dir: Path, name: str, builder: int, cfg, data: Path | None):
    """The bundle's entry ``name`` when its training record names ``builder``, the config ``cfg`` (a
    dataclass) and the same data, and its files verify; else None."""
    from fscore_lite.errors import ModelIntegrityError
    from fscore_lite.manifest import Bundle

    bundle = Bundle(bundle_dir)
    entry = bundle.entries.get(name)
    training = (entry.extra.get("training") or {}) if entry is not None else {}
    if (entry is None or training.get("builder") != builder or training.get("config") != asdict(cfg)
            or training.get("data") != (str(data) if data else "shipped")):
        return None
    try:
        bundle.verify(entry)
    except ModelIntegrityError:
        return None
    return entry
