"""Model bundle manifest: a folder with ``manifest.json`` and the model files it lists.

Each entry names a model, its role (``llm``, ``embed``, ``qg``, ``qa``, ``nli``, ``mlm``, ``verifier``,
``decomposer``), its files with sha256 and size, and where it came from (source, licence). The runtime refuses
a file whose hash does not match; build code (``models/``) writes the manifest.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .errors import ModelIntegrityError, ModelNotInstalled
from .stamps import sha256_file, verified_sha256

MANIFEST_NAME = "manifest.json"
# In ``extra``: the sha256 of the entry's decision settings (combiner weights, intercept,
# threshold, calibration means, label maps, windows, ... : everything in ``extra`` but the
# build reports under "training"), written by the build so that a hand edit is caught.
DECISIONS_KEY = "decisions_sha256"
REPORT_KEY = "training"
SCHEMA_VERSION = 1
ROLES = ("llm", "embed", "qg", "qa", "nli", "mlm", "verifier", "decomposer")


@dataclass(frozen=True)
class ModelFile:
    path: str  # relative to the bundle root
    sha256: str
    size: int
    kind: str = "weights"  # weights | tokenizer | config | ... (the kinds exports write: models/export.py)


@dataclass(frozen=True)
class ModelEntry:
    name: str
    role: str
    architecture: str
    files: tuple[ModelFile, ...]
    quantization: str = ""
    license: str = ""
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def file(self, kind: str = "weights") -> ModelFile:
        for f in self.files:
            if f.kind == kind:
                return f
        raise ModelNotInstalled(f"model '{self.name}' has no {kind} file in its manifest entry")

    @property
    def sha256(self) -> str:
        """The identity of the model: the hash of its (first) weights file.

        An entry made of several graphs and no single ``weights`` file (a T5 export:
        ``encoder``, ``decoder``, ``decoder_with_past``) is identified by the sha256 of the
        lines ``"<kind> <sha256>"`` of all its files, in manifest order.
        """
        for f in self.files:
            if f.kind == "weights":
                return f.sha256
        if not self.files:
            raise ModelNotInstalled(f"model '{self.name}' lists no files in its manifest entry")
        lines = "".join(f"{f.kind} {f.sha256}\n" for f in self.files)
        return hashlib.sha256(lines.encode("utf-8")).hexdigest()

    @property
    def decisions_sha256(self) -> str:
        """The sha256 of this entry's decision settings as they are now (see :func:`decisions_sha256`)."""
        return decisions_sha256(self.extra)

    @property
    def recorded_decisions_sha256(self) -> str | None:
        """The sha256 the build recorded (None for entries built before it was recorded)."""
        return self.extra.get(DECISIONS_KEY)

    def to_json(self) -> dict:
        d = asdict(self)
        d["files"] = [asdict(f) for f in self.files]
        return d

    @staticmethod
    def from_json(d: dict) -> "ModelEntry":
        files = tuple(ModelFile(**f) for f in d["files"])
        return ModelEntry(**{**d, "files": files})


DECISION_KEYS = ("combiner", "llm_combiners", "calibration", "calibrations")


def holds_decisions(entry: "ModelEntry") -> bool:
    """Whether an entry's settings change decisions (a verifier's, or any with a combiner or
    calibration), so that its build must have recorded their hash."""
    return entry.role == "verifier" or any(k in entry.extra for k in DECISION_KEYS)


def decision_settings(extra: dict) -> dict:
    """``extra`` without the recorded hash and the build reports (they change no decision)."""
    out = {k: v for k, v in extra.items() if k not in (DECISIONS_KEY, REPORT_KEY)}
    if isinstance(out.get("llm_combiners"), dict):  # per-LLM stacked combiners carry reports too
        out["llm_combiners"] = {sha: ({k: v for k, v in rec.items() if k != REPORT_KEY} if isinstance(rec, dict)
                                      else rec) for sha, rec in out["llm_combiners"].items()}
    return out


def decisions_sha256(extra: dict) -> str:
    """sha256 of the canonical JSON of :func:`decision_settings`."""
    text = json.dumps(decision_settings(extra), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def stamp_decisions(extra: dict) -> dict:
    """``extra`` with its decision-settings hash recorded (build code calls this when it writes an entry)."""
    return {**extra, DECISIONS_KEY: decisions_sha256(extra)}


def describe_file(root: str | Path, rel_path: str | Path, kind: str) -> ModelFile:
    """A :class:`ModelFile` for ``root/rel_path`` with its size and sha256 computed now."""
    p = Path(root) / rel_path
    return ModelFile(path=Path(rel_path).as_posix(), sha256=sha256_file(p), size=p.stat().st_size, kind=kind)


class Bundle:
    """A model bundle folder. Entries are looked up by name or role."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.entries: dict[str, ModelEntry] = {}
        mpath = self.root / MANIFEST_NAME
        if mpath.exists():
            try:
                data = json.loads(mpath.read_text(encoding="utf-8"))
                for e in data.get("models", []):
                    entry = ModelEntry.from_json(e)
                    self.entries[entry.name] = entry
            except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
                raise ModelIntegrityError(
                    f"the model manifest {mpath} is damaged ({type(e).__name__}: {e}); reinstall the models "
                    "(`fscore-lite models install-default`) or restore the file") from None

    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST_NAME

    def save(self) -> None:
        from .io import atomic_write_json

        data = {"schema_version": SCHEMA_VERSION, "models": [e.to_json() for e in self.entries.values()]}
        atomic_write_json(self.manifest_path, data)

    def add(self, entry: ModelEntry) -> None:
        self.entries[entry.name] = entry

    def get(self, name: str) -> ModelEntry:
        """The entry to use, its decision settings checked (:meth:`check_decisions`)."""
        if name not in self.entries:
            have = ", ".join(sorted(self.entries)) or "none"
            raise ModelNotInstalled(
                f"model '{name}' is not in {self.manifest_path} (installed: {have}). "
                "Run `fscore-lite models install-default` or `fscore-lite models export`."
            )
        return self.check_decisions(self.entries[name])

    def check_decisions(self, entry: ModelEntry) -> ModelEntry:
        """``entry``, or ModelIntegrityError when its decision settings no longer match the hash
        its build recorded, or when an entry that holds decision settings (a verifier, a combiner)
        records no hash at all: a deleted key is not told apart from an edit."""
        recorded = entry.recorded_decisions_sha256
        if recorded is None and holds_decisions(entry):
            raise ModelIntegrityError(
                f"model '{entry.name}' in {self.manifest_path} holds decision settings (combiner, calibration, "
                f"threshold) but no '{DECISIONS_KEY}' to check them against: the key was removed, or the entry "
                "was not written by `models train`; refusing to use it. Restore the manifest, or rebuild the model.")
        if recorded is not None and recorded != entry.decisions_sha256:
            raise ModelIntegrityError(
                f"the decision settings of model '{entry.name}' in {self.manifest_path} (combiner weights, "
                f"intercept, threshold and the rest of its settings) have sha256 {entry.decisions_sha256[:12]}…, "
                f"but its build recorded {recorded[:12]}…: they were changed after the build; refusing to use "
                "them. Restore the manifest, or rebuild the model.")
        return entry

    def for_role(self, role: str) -> list[ModelEntry]:
        return [e for e in self.entries.values() if e.role == role]

    def first_for_role(self, role: str) -> ModelEntry | None:
        found = self.for_role(role)
        return self.check_decisions(found[0]) if found else None

    def path(self, entry: ModelEntry, kind: str = "weights") -> Path:
        return self.root / entry.file(kind).path

    def verify_file(self, f: ModelFile, *, use_cache: bool = True) -> Path:
        """Check one file's size and sha256; return its path or raise ModelIntegrityError.

        A file hashed before (in any run) and unchanged since — same path, size, mtime, ctime,
        inode — is not hashed again: its verified stamp (:mod:`fscore_lite.stamps`) gives the
        sha256. With ``use_cache=False`` it is always hashed (``fscore-lite models verify``).
        """
        p = self.root / f.path
        if not p.exists():
            raise ModelIntegrityError(f"model file {p} is missing (listed in {self.manifest_path})")
        st = p.stat()
        if st.st_size != f.size:
            raise ModelIntegrityError(
                f"model file {p} has {st.st_size} bytes, the manifest says {f.size}: refusing to use it"
            )
        digest = verified_sha256(p, use_stamp=use_cache)
        if digest != f.sha256:
            raise ModelIntegrityError(
                f"model file {p} has sha256 {digest}, the manifest says {f.sha256}: refusing to use it. "
                "Reinstall it (`fscore-lite models install-default`) or re-export it."
            )
        return p

    def verify(self, entry: ModelEntry) -> None:
        for f in entry.files:
            self.verify_file(f)

    def verified_path(self, entry: ModelEntry, kind: str = "weights") -> Path:
        """Verify every file of the entry, then return the path of the requested one."""
        self.verify(entry)
        return self.path(entry, kind)
