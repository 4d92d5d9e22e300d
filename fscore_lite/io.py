"""Readers that name the file and line of bad input, and writers that never leave half a file.

Scoring output is written through :class:`ResumableJsonlWriter`: finished items go, one
complete line each, to ``OUT.partial`` (flushed and fsynced), and the final ``OUT`` appears
only by an atomic rename once every item is done. ``--resume`` reads the partial file back.
"""
from __future__ import annotations

import csv
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from .errors import InputError, OutputError

MAX_LINE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Record:
    """One input item: its 1-based line (or CSV row) number and its fields."""

    line: int
    data: dict[str, Any]


BOM = "\ufeff"


def _input_file(path: str | Path) -> Path:
    """The input path, or an InputError when it is missing or not a regular file."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, None, "file not found")
    if path.is_dir():
        raise InputError(path, None, "is a directory, not an input file")
    return path


def read_jsonl(path: str | Path) -> Iterator[Record]:
    """Yield JSON objects with their line numbers; blank lines are skipped.

    A UTF-8 byte-order mark at the start of the file is accepted. Raises :class:`InputError`
    naming the file and line for undecodable bytes, bad JSON (with the column on that line),
    a value that is not an object, or a line over 16 MB.
    """
    path = _input_file(path)
    try:
        f = open(path, "rb")
    except OSError as e:
        raise InputError(path, None, f"cannot read ({e.strerror or e})") from None
    with f:
        for lineno, raw in enumerate(f, start=1):
            if len(raw) > MAX_LINE_BYTES:
                raise InputError(path, lineno, f"line is {len(raw)} bytes, over the {MAX_LINE_BYTES} byte limit")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError(path, lineno, f"not valid UTF-8 (byte {e.start}: {raw[e.start:e.start+1]!r})") from None
            if lineno == 1 and text.startswith(BOM):
                text = text[1:]
            text = text.rstrip("\r\n")  # so that an error at the end of the line is located on it
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as e:
                end = " (end of line)" if e.pos >= len(text) else ""
                raise InputError(path, lineno, f"malformed JSON: {e.msg} at column {e.colno}{end}") from None
            if not isinstance(obj, dict):
                raise InputError(path, lineno, f"expected a JSON object, got {type(obj).__name__}")
            yield Record(lineno, obj)


def read_csv_rows(path: str | Path) -> Iterator[Record]:
    """Yield CSV rows as dicts keyed by the header; ``line`` is the file line the row starts on.

    A UTF-8 byte-order mark (as spreadsheet programs write) is accepted."""
    path = _input_file(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames is None:
                raise InputError(path, 1, "empty CSV file (no header)")
            start = reader.line_num + 1
            for row in reader:
                if None in row:
                    raise InputError(path, start, "row has more fields than the header")
                yield Record(start, {k: v for k, v in row.items()})
                start = reader.line_num + 1
    except UnicodeDecodeError as e:
        raise InputError(path, None, f"not valid UTF-8 (byte offset {e.start})") from None
    except csv.Error as e:
        raise InputError(path, None, f"malformed CSV: {e}") from None
    except OSError as e:
        raise InputError(path, None, f"cannot read ({e.strerror or e})") from None


def read_records(path: str | Path) -> Iterator[Record]:
    """JSONL, or CSV when the file name ends in .csv."""
    return read_csv_rows(path) if str(path).lower().endswith(".csv") else read_jsonl(path)


def require_text(path, rec: Record, key: str, allow_empty: bool = False) -> str:
    """The string field ``key`` of a record, or an InputError naming the line."""
    if key not in rec.data:
        raise InputError(path, rec.line, f"missing required field '{key}'")
    value = rec.data[key]
    if not isinstance(value, str):
        raise InputError(path, rec.line, f"field '{key}' must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise InputError(path, rec.line, f"field '{key}' is empty")
    return value


def summary_path_for(output: str | Path) -> Path:
    """The default summary of an output file: ``OUT.summary.json`` for ``OUT.jsonl`` (the
    ``.jsonl`` is dropped; any other name gets ``.summary.json`` appended). Used by ``score``
    and ``q2`` alike."""
    output = Path(output)
    name = output.name[: -len(".jsonl")] if output.name.endswith(".jsonl") else output.name
    return output.with_name(name + ".summary.json")


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one file: the same file on disk (hard links and symlinks
    included) or, for paths not created yet, the same resolved path."""
    a, b = Path(a), Path(b)
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return a.resolve() == b.resolve()


def check_writable_outputs(outputs: Iterable[str | Path], inputs: Iterable[str | Path] = ()) -> None:
    """Check, before any model work, that every output path can be written and destroys nothing.

    Refuses (:class:`OutputError`, naming the path) an output that is an input file however it
    is spelled (``./../x/in.jsonl``, a symlink, a hard link), two outputs that are one file, an
    output that is a directory, and a folder that cannot be created or written (probed by
    creating and removing a temporary file in it). Creates missing parent folders.
    """
    outputs = [Path(o) for o in outputs]
    inputs = [Path(i) for i in inputs]
    for out in outputs:
        for inp in inputs:
            if same_file(out, inp):
                raise OutputError(f"{out}: refusing to write there: it is the input file {inp}; "
                                  "choose another output path")
    for i, out in enumerate(outputs):
        for other in outputs[i + 1:]:
            if same_file(out, other):
                raise OutputError(f"{out}: the output and the summary would be the same file {other}")
    for out in outputs:
        if out.is_dir():
            raise OutputError(f"{out}: is a directory; give a file path (for example {out / 'out.jsonl'})")
        parent = out.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise OutputError(f"{out}: cannot write: {parent} is not a folder") from None
        except OSError as e:
            raise OutputError(f"{out}: cannot create the folder {parent} ({e.strerror or e})") from None
        try:
            fd, probe = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".probe", dir=parent)
        except OSError as e:
            raise OutputError(f"{out}: cannot write in {parent} ({e.strerror or e})") from None
        os.close(fd)
        os.unlink(probe)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write a file by writing a temporary sibling and renaming it over the target."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise OutputError(f"cannot write {path}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; results and manifests are meant to be shared
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise OutputError(f"cannot write {path}: {e.strerror or e}") from None
        raise


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


class ResumableJsonlWriter:
    """Collects one JSON line per input item, keyed by the item's input line number.

    Lines are appended to ``OUT.partial`` as items finish. :meth:`finish` writes ``OUT``
    atomically, in input order, and removes the partial file. With ``resume=True`` the
    items already in the partial file are loaded (a torn last line is dropped) and
    :meth:`done` tells the caller to skip them.
    """

    def __init__(self, path: str | Path, resume: bool = False, run_key: str = ""):
        self.path = Path(path)
        self.partial = self.path.with_name(self.path.name + ".partial")
        self.run_key = run_key
        self.items: dict[int, dict] = {}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if resume and self.partial.exists():
                self._load_partial()
            else:
                with open(self.partial, "w", encoding="utf-8") as f:
                    f.write(json.dumps({"_run": run_key}) + "\n")
            self._fh = open(self.partial, "a", encoding="utf-8")
        except OSError as e:
            raise OutputError(f"cannot write {self.partial}: {e.strerror or e}") from None

    def _failed(self, target: Path, e: OSError) -> OutputError:
        """A write failure, naming the file; what is finished stays in the partial file."""
        msg = f"cannot write {target}: {e.strerror or e}"
        if self.items and self.partial.exists():
            msg += (f"; the {len(self.items)} finished item(s) are kept in {self.partial}: fix the cause, "
                    "then rerun with --resume")
        return OutputError(msg)

    def _load_partial(self) -> None:
        good: list[str] = []
        with open(self.partial, encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by an interruption
            if i == 0 and "_run" in obj:
                if obj["_run"] != self.run_key:
                    from .errors import FscoreError

                    raise FscoreError(
                        f"{self.partial} was written by a run with other settings or input; "
                        "remove it or run without --resume"
                    )
                good.append(line)
                continue
            self.items[int(obj["_line"])] = obj["item"]
            good.append(line)
        # rewrite without torn lines so appends start on a clean line
        with open(self.partial, "w", encoding="utf-8") as f:
            f.write("\n".join(good) + "\n")

    def done(self, line: int) -> bool:
        return line in self.items

    def add(self, line: int, item: dict) -> None:
        try:
            self._fh.write(json.dumps({"_line": line, "item": item}, ensure_ascii=False) + "\n")
            self._fh.flush()
            os.fsync(self._fh.fileno())
        except OSError as e:
            raise self._failed(self.partial, e) from None
        self.items[line] = item

    def ordered(self) -> list[dict]:
        return [self.items[k] for k in sorted(self.items)]

    def finish(self) -> None:
        """Write ``OUT`` in input order and remove the partial file (kept if the write fails)."""
        try:
            self._fh.close()
        except OSError as e:
            raise self._failed(self.partial, e) from None
        try:
            atomic_write_text(
                self.path, "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in self.ordered())
            )
        except OutputError as e:
            raise OutputError(str(e) + (f"; all {len(self.items)} item(s) are kept in {self.partial}: "
                                        "rerun with --resume to write the output without redoing them")) from None
        self.partial.unlink(missing_ok=True)

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()
