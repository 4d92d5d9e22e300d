"""Readers that name the file and line of bad input, and writers that never leave half a file.

Scoring output is written through :class:`ResumableJsonlWriter`: finished items go, one
complete line each, to ``OUT.partial`` (flushed and fsynced), and the final ``OUT`` appears
only by an atomic rename once every item is done. ``--resume`` reads the partial file back.
"""
from __future__ import annotations

import csv
import hashlib
import io
import itertools
import json
import math
import os
import tempfile
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from .errors import InputError, OutputError
from .runfiles import OutputLock, ResumableJsonlWriter, atomic_write_text, dumps_strict  # noqa: F401  (the API)

MAX_LINE_BYTES = 16 * 1024 * 1024
MAX_INT_DIGITS = 100  # an input number longer than this is no count or id anyone writes


@dataclass(frozen=True)
class Record:
    """One input item: its 1-based line (or CSV row) number and its fields."""

    line: int
    data: dict[str, Any]


BOM = "\ufeff"


@dataclass(frozen=True)
class InputFile:
    """An input file's bytes, read once: a named pipe or FIFO can be read a single time, and
    the run key (its sha256) must describe exactly the bytes that were scored."""

    path: Path
    raw: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.raw).hexdigest()


STDIN_HINT = "to read standard input, give /dev/stdin as the input and an output with -o"


def _input_file(path: str | Path) -> Path:
    """The input path, or an InputError when it is missing or not a regular file."""
    path = Path(path)
    if str(path) == "-":
        raise InputError(path, None, f"'-' is not a file name here; {STDIN_HINT}")
    if not path.exists():
        raise InputError(path, None, "file not found")
    if path.is_dir():
        raise InputError(path, None, "is a directory, not an input file")
    return path


def read_input(path: str | Path | InputFile) -> InputFile:
    """Read an input file (or pipe) once, whole, line by line: a line over :data:`MAX_LINE_BYTES`
    is an InputError naming it as soon as that much of it is read (``/dev/zero`` fails at once,
    not after filling memory)."""
    if isinstance(path, InputFile):
        return path
    path = _input_file(path)
    parts: list[bytes] = []
    try:
        with open(path, "rb") as f:
            for lineno in itertools.count(1):
                line = f.readline(MAX_LINE_BYTES + 1)
                if not line:
                    break
                if len(line) > MAX_LINE_BYTES and not (len(line) == MAX_LINE_BYTES + 1 and line.endswith(b"\n")):
                    raise InputError(path, lineno, f"line is longer than the {MAX_LINE_BYTES} byte limit "
                                     "(stopped reading there)")
                parts.append(line)
    except OSError as e:
        raise InputError(path, None, f"cannot read ({e.strerror or e})") from None
    return InputFile(path, b"".join(parts))


class _NotFinite(ValueError):
    pass


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 parses to inf
        raise _NotFinite(text)
    return value


class _TooLong(ValueError):
    pass


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _TooLong(text)
    return int(text)


def _refuse_constant(text: str):
    raise _NotFinite(text)  # NaN, Infinity, -Infinity: not JSON, and not a number a score can use


def json_error(e: json.JSONDecodeError, text: str) -> str:
    """A JSON error as one phrase with its column: ``Unterminated string starting at column 9``
    (the decoder's own message ends in "at" for some errors, and its ``line 1 column 9`` names a
    line of the one line given)."""
    msg = e.msg[:-3] if e.msg.endswith(" at") else e.msg
    end = " (end of line)" if e.pos >= len(text) else ""
    return f"{msg} at column {e.colno}{end}"


def clean_text(path, line: int | None, value: Any, nfc: bool = True, where: str = "") -> Any:
    """``value`` with every string (keys too) NFC-normalised, so that composed and decomposed
    spellings of one text are the same text; a lone surrogate (``"\\ud800"``, valid JSON but
    not encodable text) is an InputError naming the field."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            field = f"field '{where}'" if where else "a string"
            raise InputError(path, line, f"{field} contains a lone surrogate {value[e.start]!r} "
                             "(an escape such as \\ud800 that is not a character); fix the text") from None
        return unicodedata.normalize("NFC", value) if nfc else value
    if isinstance(value, dict):
        return {clean_text(path, line, k, nfc, where): clean_text(path, line, v, nfc, where or str(k))
                for k, v in value.items()}
    if isinstance(value, list):
        return [clean_text(path, line, v, nfc, where) for v in value]
    return value


def _lines(source: Path | InputFile) -> Iterator[bytes]:
    if isinstance(source, InputFile):
        yield from source.raw.split(b"\n")  # as a file iterates: only \n ends a line
        return
    try:
        f = open(source, "rb")
    except OSError as e:
        raise InputError(source, None, f"cannot read ({e.strerror or e})") from None
    with f:
        yield from f


def read_jsonl(path: str | Path | InputFile, nfc: bool = False) -> Iterator[Record]:
    """Yield JSON objects with their line numbers; blank lines are skipped.

    ``path`` is a file (read line by line) or an :class:`InputFile` already read. A UTF-8
    byte-order mark at the start is accepted. Raises :class:`InputError` naming the file and
    line for undecodable bytes, bad JSON (with the column on that line), a value that is not an
    object, NaN or an infinite number, a lone surrogate, or a line over 16 MB. With ``nfc``
    every string is NFC-normalised.
    """
    source = path if isinstance(path, InputFile) else _input_file(path)
    path = source.path if isinstance(source, InputFile) else source
    for lineno, raw in enumerate(_lines(source), start=1):
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
            obj = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float,
                             parse_int=_bounded_int)
            if not isinstance(obj, dict):
                raise InputError(path, lineno, f"expected a JSON object, got {type(obj).__name__}")
            record = Record(lineno, clean_text(path, lineno, obj, nfc))
        except json.JSONDecodeError as e:
            raise InputError(path, lineno, f"malformed JSON: {json_error(e, text)}") from None
        except _NotFinite as e:
            raise InputError(path, lineno, f"the number {e} is not finite (NaN and infinity are not JSON "
                             "numbers)") from None
        except _TooLong as e:
            raise InputError(path, lineno, f"a number of {len(str(e).lstrip('-'))} digits ({str(e)[:12]}…), over "
                             f"the limit of {MAX_INT_DIGITS}") from None
        except RecursionError:
            raise InputError(path, lineno, "JSON nested too deeply (arrays or objects inside each other "
                             "hundreds of levels down)") from None
        yield record


def decode_utf8(path, raw: bytes) -> str:
    """The text of ``raw`` (a leading byte-order mark dropped), or an InputError naming the line
    of the first undecodable byte."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise InputError(path, line, f"not valid UTF-8 (byte {raw[e.start:e.start + 1]!r})") from None
    return text[1:] if text.startswith(BOM) else text


def read_csv_rows(path: str | Path | InputFile, nfc: bool = False) -> Iterator[Record]:
    """Yield CSV rows as dicts keyed by the header; ``line`` is the file line the row starts on.

    A UTF-8 byte-order mark (as spreadsheet programs write) is accepted. A quoted field left
    open at the end of the file is an error naming the line it starts on (a lenient reader
    would swallow every line after it into one field)."""
    data = read_input(path)
    path = data.path
    reader = csv.DictReader(io.StringIO(decode_utf8(path, data.raw), newline=""), strict=True)
    start = 1
    try:
        if reader.fieldnames is None:
            raise InputError(path, 1, "empty CSV file (no header)")
        header = reader.fieldnames
        twice = sorted({name for name in header if header.count(name) > 1})
        if twice:
            raise InputError(path, 1, "the header names the column(s) " + ", ".join(repr(n) for n in twice) +
                             " more than once; which one is meant is not known: rename or remove the copies")
        start = reader.line_num + 1
        for row in reader:
            if None in row:
                raise InputError(path, start, "row has more fields than the header")
            if None in row.values():
                given = sum(v is not None for v in row.values())
                raise InputError(path, start, f"row has {given} field(s), fewer than the header's {len(header)} "
                                 f"({', '.join(header)})")
            yield Record(start, clean_text(path, start, dict(row), nfc))
            start = reader.line_num + 1
    except csv.Error as e:
        if "unexpected end of data" in str(e):
            raise InputError(path, start, "malformed CSV: a quoted field starts on this line and is never "
                             "closed (a missing \")") from None
        raise InputError(path, start, f"malformed CSV: {e}") from None


def read_records(path: str | Path | InputFile, nfc: bool = False) -> Iterator[Record]:
    """JSONL, or CSV when the file name ends in .csv."""
    name = path.path if isinstance(path, InputFile) else path
    return (read_csv_rows if str(name).lower().endswith(".csv") else read_jsonl)(path, nfc=nfc)


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


def default_output(input: str | Path, suffix: str) -> Path:
    """The output beside ``input`` (its stem + ``suffix``), for a regular input file only: a pipe
    or device (``/dev/stdin``, a FIFO) has no folder of its own to write into, so -o is needed."""
    input = Path(input)
    if str(input) == "-":
        raise InputError(input, None, f"'-' is not a file name here; {STDIN_HINT}")
    if input.exists() and not input.is_file() and not input.is_dir():
        raise OutputError(f"{input} is a pipe or device, not a file to write beside: give the output with -o OUTPUT")
    return input.with_name(input.stem + suffix)


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


def path_inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` (resolved) is ``folder`` or lies somewhere under it."""
    try:
        path, folder = path.resolve(), folder.resolve()
    except OSError:
        return False
    return path == folder or folder in path.parents


def check_output_path(out: str | Path, inputs: Iterable[str | Path] = (), protected: Iterable[str | Path] = ()) -> None:
    """The rule for every file a command writes, checked before any work: :class:`OutputError`
    (naming the path) when writing ``out`` would replace or damage something.

    Refused: an input file however it is spelled (``./../x/in.jsonl``, a symlink, a hard link),
    or an input that is this output's lock file (``OUT.lock``); a lock file (``*.lock``); a path
    inside a ``protected`` folder (a passage store, the model bundle) or a ``protected`` file;
    an existing symlink, device (``/dev/null``), FIFO or socket, which the atomic rename would
    replace with a regular file; a directory.
    """
    out = Path(out)
    for inp in map(Path, inputs):
        if same_file(out, inp):
            raise OutputError(f"{out}: refusing to write there: it is the input file {inp}; "
                              "choose another output path")
        if same_file(OutputLock.lock_path(out), inp):
            raise OutputError(f"{out}: refusing to write there: its lock file {OutputLock.lock_path(out)} is the "
                              f"input file {inp}; choose another output path")
    if out.name.endswith(".lock"):
        raise OutputError(f"{out}: refusing to write there: a .lock file is how runs keep out of each other's "
                          "outputs; choose another output path")
    for guarded in map(Path, protected):
        if guarded.is_dir() and path_inside(out, guarded):
            raise OutputError(f"{out}: refusing to write there: it is inside {guarded}, which holds a passage store "
                              "or models that a run reads; choose another output path")
        if guarded.is_file() and same_file(out, guarded):
            raise OutputError(f"{out}: refusing to write there: it is the model or store file {guarded}")
    if out.is_symlink():
        raise OutputError(f"{out}: refusing to write there: it is a symbolic link (to {os.readlink(out)}), which "
                          "the output would replace; give the real path or another one")
    if out.is_dir():
        raise OutputError(f"{out}: is a directory; give a file path (for example {out / 'out.jsonl'})")
    if out.exists() and not out.is_file():
        kind = ("a named pipe (FIFO)" if out.is_fifo() else "a device" if out.is_char_device() or
                out.is_block_device() else "a socket" if out.is_socket() else "not a regular file")
        raise OutputError(f"{out}: refusing to write there: it is {kind}, which the output would replace with "
                          "a regular file; choose a file path")


def check_writable_outputs(outputs: Iterable[str | Path], inputs: Iterable[str | Path] = (),
                           protected: Iterable[str | Path] = ()) -> None:
    """Check, before any model work, that every output path can be written and destroys nothing.

    Each output must pass :func:`check_output_path`; two outputs must not be one file; each
    output's folder must be creatable and writable (probed by creating and removing a
    temporary file in it). Creates missing parent folders.
    """
    outputs = [Path(o) for o in outputs]
    inputs = [Path(i) for i in inputs]
    protected = [Path(p) for p in protected]
    for out in outputs:
        check_output_path(out, inputs, protected)
    for i, out in enumerate(outputs):
        for other in outputs[i + 1:]:
            if same_file(out, other):
                raise OutputError(f"{out}: the output and the summary would be the same file {other}")
    for out in outputs:
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


def atomic_write_json(path: str | Path, obj: Any) -> None:
    """Strict JSON (no NaN or infinity, which other readers refuse), written atomically."""
    try:
        text = json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False, allow_nan=False)
    except ValueError as e:
        raise OutputError(f"cannot write {path}: it would hold a number that is not finite ({e}); "
                          "nothing was written") from None
    atomic_write_text(path, text + "\n")
