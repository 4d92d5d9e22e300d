"""The default decomposer's own facts of the development bios: the shipped file and its check.

``models/data/own-facts-dev.jsonl.gz`` (made by ``fscore-lite models own-facts``) holds a header
record with the settings that made the facts — the LLM's name and sha256, the atomic-fact
settings (:func:`fscore_lite.factscore.atomic_facts.describe_settings`), the thread count — and
one record per annotated bio ``{subject, topic, line, output_sha256, facts}``, sorted by subject
and line. The gzip stream is deterministic (no name, mtime 0), so the same facts give the same
bytes. Its sha256 is recorded in a small JSON beside it (``own-facts-dev.sha256.json``) and
checked whenever the file is read: a mismatch is an error naming the file.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import FscoreError, InputError
from ..factscore.score import fact_settings, same_facts  # noqa: F401  (the runtime's rules, re-exported)

FILE_NAME = "own-facts-dev.jsonl.gz"
SIDECAR_NAME = "own-facts-dev.sha256.json"
HEADER_KIND = "own-facts header"


@dataclass(frozen=True)
class OwnFacts:
    path: Path
    sha256: str
    header: dict
    records: dict[tuple[str, str], dict]  # (subject, topic) → {subject, topic, line, output_sha256, facts}

    def settings(self) -> dict:
        """What made these facts: {llm, llm_sha256, atomic_facts, threads}."""
        return {k: self.header[k] for k in ("llm", "llm_sha256", "atomic_facts", "threads")}

    def facts_of(self, bio) -> list[str] | None:
        """The facts of an :class:`~fscore_lite.training.labeled.AnnotatedBio` (None: not in the file).
        A bio whose text differs from the one the facts were made from is an error naming the file."""
        rec = self.records.get((bio.subject, bio.topic))
        if rec is None:
            return None
        if rec["output_sha256"] != text_sha256(bio.output):
            raise FscoreError(f"{self.path}: the facts of {bio.subject} '{bio.topic}' were made from another "
                              "text than the annotated bio's output; regenerate with `fscore-lite models own-facts`")
        return list(rec["facts"])


def generate_own_facts(bios: list, generator, progress: bool = True) -> list[list[str]]:
    """Each bio's facts from ``score``'s generator (cached LLM calls: a rerun costs no decoding)."""
    from ..progress import Progress

    bar = Progress(len(bios), "own facts", enabled=progress)
    out = []
    for b in bios:
        out.append([f for s in generator.run(b.output) for f in s.facts])
        bar.advance(note=b.topic[:30])
    bar.close()
    return out


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sidecar_for(path: Path) -> Path:
    path = Path(path)
    if path.name == FILE_NAME:
        return path.with_name(SIDECAR_NAME)
    stem = path.name[: -len(".jsonl.gz")] if path.name.endswith(".jsonl.gz") else path.name.split(".")[0]
    return path.with_name(stem + ".sha256.json")


def write_own_facts(path: Path, settings: dict, bios: list, facts: list[list[str]], extra: dict | None = None) -> str:
    """Write the file and its sidecar; return the file's sha256. ``bios``: AnnotatedBio, ``facts``: theirs."""
    from ..runfiles import atomic_write_text

    path = Path(path)
    records = sorted(({"subject": b.subject, "topic": b.topic, "line": b.line, "output_sha256": text_sha256(b.output),
                       "facts": list(fs)} for b, fs in zip(bios, facts)), key=lambda r: (r["subject"], r["line"]))
    header = {"kind": HEADER_KIND, **settings, **(extra or {}), "n_bios": len(records)}
    text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in [header, *records])
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as gz:
        gz.write(text.encode("utf-8"))
    data = buf.getvalue()
    sha = hashlib.sha256(data).hexdigest()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_bytes(data)
    tmp.replace(path)
    atomic_write_text(sidecar_for(path), json.dumps({"file": path.name, "sha256": sha, **settings,
                                                     "n_bios": len(records)}, indent=1, sort_keys=True) + "\n")
    return sha


def read_own_facts(path: Path) -> OwnFacts:
    """Read and check the file against the sha256 recorded beside it (errors name the file)."""
    path = Path(path)
    side = sidecar_for(path)
    if not path.is_file():
        raise FscoreError(f"{path} not found: make it with `fscore-lite models own-facts`")
    if not side.is_file():
        raise FscoreError(f"{side} not found: the sha256 of {path} is recorded there (regenerate both with "
                          "`fscore-lite models own-facts`)")
    try:
        recorded = json.loads(side.read_text(encoding="utf-8"))["sha256"]
    except (ValueError, KeyError, TypeError) as e:
        raise FscoreError(f"{side}: not a sha256 record ({e!r})") from None
    data = path.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    if sha != recorded:
        raise FscoreError(f"{path}: sha256 {sha[:12]}… does not match the {recorded[:12]}… recorded in {side.name}; "
                          "the file changed: regenerate it with `fscore-lite models own-facts`")
    lines = gzip.decompress(data).decode("utf-8").splitlines()
    header, records = None, {}
    for n, line in enumerate(lines, 1):
        try:
            rec = json.loads(line)
            if n == 1:
                if rec.get("kind") != HEADER_KIND:
                    raise KeyError("kind")
                header = rec
                for k in ("llm", "llm_sha256", "atomic_facts", "threads"):
                    header[k]  # noqa: B018 - presence check
                continue
            key = (str(rec["subject"]), str(rec["topic"]))
            if not isinstance(rec["facts"], list) or not all(isinstance(f, str) for f in rec["facts"]):
                raise TypeError("facts must be a list of strings")
            rec["output_sha256"]  # noqa: B018
        except (ValueError, KeyError, TypeError) as e:
            raise InputError(path, n, f"not an own-facts record ({e!r})") from None
        records[key] = rec
    if header is None:
        raise InputError(path, 1, "no header record")
    return OwnFacts(path, sha, header, records)


def add_own_facts(ex, paths: list[Path], fitted_for: dict, log=print) -> list[dict]:
    """Each own-facts file's facts of the training bios into ``ex`` (kind ``own:DECOMPOSER``), and what
    made them into ``fitted_for`` (the calibration records it); returns what was read, per file."""
    read = []
    for path in paths:
        own = read_own_facts(path)
        name = own.header["atomic_facts"].get("decomposer", "default")
        if name in ex.own:
            raise FscoreError(f"{path}: a second own-facts file of the decomposer {name!r}")
        found = {i: fs for i, b in enumerate(ex.bios) if (fs := own.facts_of(b)) is not None}
        ex.add_own(name, found)
        fitted_for[name] = own.settings() | {"facts_file_sha256": own.sha256}
        log(f"{Path(path).name}: {name} facts of {len(found)} of the {len(ex.bios)} training bios "
            f"({len(own.records)} bios in the file)")
        read.append({"file": Path(path).name, "decomposer": name, "sha256": own.sha256, "bios": len(found),
                     "facts": sum(map(len, found.values()))})
    return read
