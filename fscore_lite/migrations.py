"""Older records, brought up to date in one place when they are read.

Each kind of record this program reads from disk that was written by an earlier version has one
ordered list of upgrades, ``(version it upgrades, what it does, function)``. A reader calls
:func:`upgrade` (or a helper below) and then reads only the current form: no reader branches on a
record's age. An upgrade that cannot be done without rebuilding raises, naming what to run.

* ``verifier``: a trained verifier's manifest entry (``extra``), versioned by its build recipe.
* ``store meta``: a passage store's ``meta`` table, versioned by its ``schema_version``.
"""
from __future__ import annotations

from typing import Callable

from .errors import ModelIntegrityError
from .page_vectors import DEFAULT_BATCH

VERIFIER_RECIPE = 7  # the recipe `models train verifier` writes (models/verifier/build.py)


class Refused(Exception):
    """An upgrade that needs a rebuild; the reader turns it into its own error with the command."""


def _verifier_recipe(extra: dict) -> int:
    return int(extra.get("recipe", extra.get("training", {}).get("builder", 1)))


def _refuse_pacc(extra: dict) -> dict:
    raise Refused("it was built by recipe {version}, whose share estimate (PACC means, share lines and decision "
                  "thresholds fitted on the training LMs' bios) this version no longer applies")


def _store_meta_v1(meta: dict) -> dict:
    # schema 1 stores embedded every page at build time, with the default batch
    return {"vectors": "all", "embed_batch_size": str(DEFAULT_BATCH), **meta}


UPGRADES: dict[str, list[tuple[int, str, Callable[[dict], dict]]]] = {
    "verifier": [(v, "refused: rebuild (the run share replaced PACC)", _refuse_pacc) for v in range(1, VERIFIER_RECIPE)],
    "store meta": [(1, f"vectors = all, embed_batch_size = {DEFAULT_BATCH} (what schema 1 stores were built with)", _store_meta_v1)],
}
VERSION: dict[str, tuple[Callable[[dict], int], Callable[[dict, int], dict]]] = {
    "verifier": (_verifier_recipe, lambda d, v: {**d, "recipe": v}),
    "store meta": (lambda d: int(d.get("schema_version", 1)), lambda d, v: d),  # the meta keeps its stored schema
}


def upgrade(kind: str, record: dict) -> dict:
    """``record`` with every upgrade of ``kind`` from its version on applied, in order."""
    version_of, _ = VERSION[kind]
    version = version_of(record)
    for start, _what, step in UPGRADES[kind]:
        if start >= version:
            try:
                record = step(record)
            except Refused as e:
                raise Refused(str(e).format(version=version)) from None
    return record


def upgrade_verifier(entry, manifest_path) -> dict:
    """A verifier entry's ``extra`` in the current recipe's form, or ModelIntegrityError saying how to rebuild."""
    try:
        return upgrade("verifier", dict(entry.extra))
    except Refused as e:
        raise ModelIntegrityError(f"the verifier '{entry.name}' in {manifest_path} cannot be used: {e}; rebuild it "
                                  "with `fscore-lite models train verifier`") from None


def upgrade_store_meta(meta: dict) -> dict:
    return upgrade("store meta", dict(meta))
