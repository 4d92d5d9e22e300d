"""A store's manifest and the checks that refuse a damaged or modified store.

``manifest.json`` records the sha256 and size of each store file and ``store_sha256``, the
store's identity. Opening a store checks every file's size and (by default) its sha256, taken
from the file's verified stamp when it is unchanged (:mod:`fscore_lite.stamps`);
:func:`verify_store` (``kb verify``) always hashes.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..errors import StoreError
from ..stamps import verified_sha256
from .schema import MANIFEST_NAME, REQUIRED_FILES, SCHEMA_VERSIONS


def files_store_sha256(files: dict[str, dict]) -> str:
    """The store's identity: sha256 over the sorted ``name sha256`` lines of its files."""
    lines = "".join(f"{name} {files[name]['sha256']}\n" for name in sorted(files))
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()


def _check_file(root: Path, name: str, info: dict, verify: bool, use_stamp: bool = True) -> None:
    """Raise StoreError unless the store file has the manifest's size (and, with ``verify``, sha256).

    The sha256 comes from the file's verified stamp when it is unchanged since it was last hashed
    (:mod:`fscore_lite.stamps`); ``use_stamp=False`` always hashes (``kb verify``).
    """
    p = root / name
    mpath = root / MANIFEST_NAME
    if not p.exists():
        raise StoreError(f"store file {p} is missing (listed in {mpath})")
    st = p.stat()
    if st.st_size != info.get("size"):
        raise StoreError(
            f"store file {p} has {st.st_size} bytes, the manifest says {info.get('size')}: "
            "the store was modified or damaged; rebuild it"
        )
    if verify:
        digest = verified_sha256(p, use_stamp=use_stamp)
        if digest != info.get("sha256"):
            raise StoreError(
                f"store file {p} has sha256 {digest}, the manifest says {info.get('sha256')}: "
                "the store was modified or damaged; rebuild it"
            )


def _read_manifest(root: Path) -> dict:
    """The store's manifest, checked for structure and consistency (no file is read)."""
    mpath = root / MANIFEST_NAME
    if not root.exists():
        raise StoreError(f"passage store {root} does not exist; build one with `fscore-lite kb build`")
    if not root.is_dir():
        raise StoreError(f"passage store {root} is not a folder")
    if not mpath.exists():
        raise StoreError(f"{root} is not a passage store: {MANIFEST_NAME} is missing")
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
        files = manifest["files"]
        store_sha = manifest["store_sha256"]
        if not isinstance(files, dict) or not isinstance(store_sha, str):
            raise TypeError
    except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError):
        raise StoreError(f"{mpath} is malformed: expected JSON with 'files' and 'store_sha256'") from None
    if manifest.get("schema_version") not in SCHEMA_VERSIONS:
        raise StoreError(
            f"{root} has store schema {manifest.get('schema_version')!r}; this fscore-lite reads "
            f"schemas {', '.join(map(str, SCHEMA_VERSIONS))}. Rebuild the store with `fscore-lite kb build`."
        )
    for name in REQUIRED_FILES:
        if name not in files:
            raise StoreError(f"{mpath} does not list {name}")
    for name, info in files.items():
        if "/" in name or "\\" in name or name.startswith("."):
            raise StoreError(f"{mpath} lists an unexpected path {name!r}")
        if not isinstance(info, dict) or not isinstance(info.get("sha256"), str) or not isinstance(info.get("size"), int):
            raise StoreError(f"{mpath} is malformed: the entry for {name} needs 'sha256' and 'size'")
    if files_store_sha256(files) != store_sha:
        raise StoreError(f"{mpath} is inconsistent: store_sha256 does not match its file hashes")
    return manifest


def check_manifest(root: Path, verify: bool) -> dict:
    """Read the manifest and check every file it lists (size; sha256 with ``verify``)."""
    manifest = _read_manifest(root)
    for name, info in manifest["files"].items():
        _check_file(root, name, info, verify)
    return manifest


def verify_store(path: str | Path) -> list[tuple[str, str | None]]:
    """Hash every file of a store fully (no stamps): ``[(file name, problem or None)]``.

    A missing or malformed manifest raises StoreError; a file that is missing, has another size
    or another sha256 is reported with its problem. Fresh hashes refresh the verified stamps.
    """
    root = Path(path)
    manifest = _read_manifest(root)
    results: list[tuple[str, str | None]] = []
    for name in sorted(manifest["files"]):
        try:
            _check_file(root, name, manifest["files"][name], verify=True, use_stamp=False)
            results.append((name, None))
        except StoreError as e:
            results.append((name, str(e)))
    return results
