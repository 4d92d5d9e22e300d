"""A run's output files: one writer at a time (:class:`OutputLock`) and a resumable JSONL
writer whose partial file is checked line by line before it is trusted (:class:`ResumableJsonlWriter`).

Finished items go, one complete line each, to ``OUT.partial`` (flushed and fsynced), and the
final ``OUT`` appears only by an atomic rename once every item is done. ``--resume`` reads the
partial file back, and refuses it (naming ``OUT.partial:LINE``) unless every line is an item
of this input, written once, in the writer's own shape.
"""
from __future__ import annotations

import errno
import fcntl
import json
import hashlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable

from .errors import FscoreError, OutputError


def dumps_strict(obj: Any) -> str:
    """One JSON line; NaN and infinity are refused (ValueError), since they are not JSON."""
    return json.dumps(obj, ensure_ascii=False, allow_nan=False)


def _refuse_constant(text: str):
    raise ValueError(f"{text} is not a JSON number")


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


def finished_items(partial: str | Path) -> int:
    """How many item lines a partial file holds after its run-key line (0 when it is missing)."""
    try:
        with open(partial, "rb") as f:
            return max(0, sum(1 for raw in f if raw.strip()) - 1)
    except OSError:
        return 0


class OutputLock:
    """Exclusive locks on output files for the life of a run (``flock`` on ``PATH.lock``).

    A second run given the same ``-o`` (or summary) stops with an error naming the first
    run's process id instead of interleaving its items with the other's. The kernel drops the
    lock when the process dies, so a killed run leaves no lock that blocks ``--resume``.
    """

    def __init__(self, paths: Iterable[str | Path]):
        self.paths = [Path(p) for p in paths]
        self._held: list[tuple[Path, int]] = []

    @staticmethod
    def lock_path(path: Path) -> Path:
        return path.with_name(path.name + ".lock")

    def acquire(self) -> "OutputLock":
        try:
            for path in self.paths:
                self._held.append((self.lock_path(path), self._lock_one(path)))
        except BaseException:
            self.release()
            raise
        return self

    def _lock_one(self, path: Path) -> int:
        lock = self.lock_path(path)
        while True:
            try:
                fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                raise OutputError(f"cannot create the lock file {lock}: {e.strerror or e}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise OutputError(f"cannot lock {lock}: {e.strerror or e}") from None
                raise OutputError(f"{path}: another run ({self._holder(lock)}) is writing this output right now; "
                                  "wait for it to finish, or choose another output path") from None
            try:  # the holder before us may have removed the file it locked: lock the one on disk
                same = os.path.samestat(os.fstat(fd), os.stat(lock))
            except FileNotFoundError:
                same = False
            if same:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                return fd
            os.close(fd)

    @staticmethod
    def _holder(lock: Path) -> str:
        try:
            pid = lock.read_text(encoding="utf-8").strip()
        except OSError:
            pid = ""
        return f"process {pid}" if pid.isdigit() else "another process"

    def release(self) -> None:
        for lock, fd in reversed(self._held):
            try:
                os.unlink(lock)  # before unlocking, so that nobody locks a file about to vanish
            except OSError:
                pass
            os.close(fd)
        self._held = []

    def __enter__(self) -> "OutputLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


class ResumableJsonlWriter:
    """Collects one JSON line per input item, keyed by the item's input line number.

    Lines are appended to ``OUT.partial`` as items finish. :meth:`finish` writes ``OUT``
    atomically, in input order, and removes the partial file. With ``resume=True`` the items
    already in the partial file are loaded, after checking every line (see :meth:`_load_partial`),
    and :meth:`done` tells the caller to skip them. ``lines`` are the input's line numbers (a
    partial line for any other is refused); ``also_locked`` are more outputs of the run (the
    summary) locked with ``OUT`` until :meth:`close`; or ``lock``, taken before (as a run does
    before loading models, so that a second run stops at once), which the writer then releases.
    """

    def __init__(self, path: str | Path, resume: bool = False, run_key: str = "",
                 lines: Iterable[int] | None = None, also_locked: Iterable[str | Path] = (),
                 lock: OutputLock | None = None):
        self.path = Path(path)
        self.partial = self.path.with_name(self.path.name + ".partial")
        self.run_key = run_key
        self.lines = None if lines is None else set(lines)
        self.items: dict[int, dict] = {}
        self._fh = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OutputError(f"cannot write {self.partial}: {e.strerror or e}") from None
        self.lock = lock or OutputLock([self.path, *also_locked]).acquire()  # a lock given is ours now
        try:
            if resume and self.partial.exists():
                self._load_partial()
            else:
                with open(self.partial, "w", encoding="utf-8") as f:
                    f.write(json.dumps({"_run": run_key}) + "\n")
            self._fh = open(self.partial, "a", encoding="utf-8")
        except OSError as e:
            self.lock.release()
            raise OutputError(f"cannot write {self.partial}: {e.strerror or e}") from None
        except BaseException:
            self.lock.release()
            raise

    def _failed(self, target: Path, e: OSError) -> OutputError:
        """A write failure, naming the file; what is finished stays in the partial file."""
        msg = f"cannot write {target}: {e.strerror or e}"
        if self.items and self.partial.exists():
            msg += (f"; the {len(self.items)} finished item(s) are kept in {self.partial}: fix the cause, "
                    "then rerun with --resume")
        return OutputError(msg)

    def _refuse(self, n: int, why: str) -> FscoreError:
        return FscoreError(f"{self.partial}:{n}: {why}; this file cannot be resumed: remove it "
                           "(or move it aside) and run without --resume")

    def _item_hash(self, line: int, item: dict) -> str:
        """The sha256 a partial line carries: of this run's key and the line's item as written."""
        return hashlib.sha256((self.run_key + "\n" + dumps_strict({"_line": line, "item": item})).encode()).hexdigest()

    def _load_partial(self) -> None:
        """Trust nothing: the first line is this run's key, every other line ``{"_line": N,
        "item": {...}, "sha256": H}`` with N an input line not seen before. Only the last line may
        be torn (an interrupted append); it is dropped. An item whose ``sha256`` is missing or not
        that of its text (edited by hand) is dropped too, with a warning, and scored again."""
        edited: list[int] = []
        with open(self.partial, "rb") as f:
            raw_lines = f.read().split(b"\n")
        numbered = [(n, raw) for n, raw in enumerate(raw_lines, 1) if raw.strip()]
        good: list[str] = []
        for i, (n, raw) in enumerate(numbered):
            last = i == len(numbered) - 1
            try:
                line = raw.decode("utf-8")
                obj = json.loads(line, parse_constant=_refuse_constant)
            except ValueError:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
                if last and i > 0:
                    continue  # a line torn by an interruption
                raise self._refuse(n, "not a complete JSON line") from None
            if i == 0:
                if not (isinstance(obj, dict) and set(obj) == {"_run"}):
                    raise self._refuse(n, "the first line is not the run key this program writes")
                if obj["_run"] != self.run_key:
                    raise FscoreError(f"{self.partial} was written by a run with other settings or input; "
                                      "remove it or run without --resume")
                good.append(line)
                continue
            if not (isinstance(obj, dict) and {"_line", "item"} <= set(obj) <= {"_line", "item", "sha256"}):
                raise self._refuse(n, 'expected {"_line": N, "item": {...}}')
            k, item = obj["_line"], obj["item"]
            if isinstance(k, bool) or not isinstance(k, int) or not isinstance(item, dict):
                raise self._refuse(n, '"_line" must be a whole number and "item" an object')
            if self.lines is not None and k not in self.lines:
                raise self._refuse(n, f"item for input line {k}, which holds no item of the input")
            if k in self.items:
                raise self._refuse(n, f"a second item for input line {k}")
            if obj.get("sha256") != self._item_hash(k, item):
                edited.append(n)
                continue
            self.items[k] = item
            good.append(line)
        if edited:
            sys.stderr.write(f"warning: {self.partial}: line(s) {', '.join(map(str, edited))} do not match the "
                             "hash recorded when they were written (edited?); those items are scored again\n")
        if not good:  # an empty or torn header: start afresh
            good = [json.dumps({"_run": self.run_key})]
        # rewrite without torn lines so appends start on a clean line
        with open(self.partial, "w", encoding="utf-8") as f:
            f.write("\n".join(good) + "\n")

    def done(self, line: int) -> bool:
        return line in self.items

    def add(self, line: int, item: dict) -> None:
        try:
            text = dumps_strict({"_line": line, "item": item, "sha256": self._item_hash(line, item)})
        except ValueError:
            raise OutputError(f"the result for input line {line} holds a number that is not finite (NaN or "
                              "infinity), which JSON cannot carry; nothing was written for it") from None
        try:
            self._fh.write(text + "\n")
            self._fh.flush()
            os.fsync(self._fh.fileno())
        except OSError as e:
            raise self._failed(self.partial, e) from None
        self.items[line] = item

    def ordered(self) -> list[dict]:
        return [self.items[k] for k in sorted(self.items)]

    def finish(self, records: list[dict] | None = None) -> None:
        """Write ``OUT`` — ``records`` (default: the items, in input order) — and remove the partial file
        (kept if the write fails)."""
        try:
            self._fh.close()
        except OSError as e:
            raise self._failed(self.partial, e) from None
        try:
            records = self.ordered() if records is None else records
            atomic_write_text(self.path, "".join(dumps_strict(item) + "\n" for item in records))
        except OutputError as e:
            raise OutputError(str(e) + (f"; all {len(self.items)} item(s) are kept in {self.partial}: "
                                        "rerun with --resume to write the output without redoing them")) from None
        self.partial.unlink(missing_ok=True)

    def close(self) -> None:
        """Close the partial file and release the output lock. A failure to flush here was
        already reported by :meth:`add` or :meth:`finish` (the items written stay resumable),
        so it is not raised again over that first error."""
        try:
            if self._fh is not None and not self._fh.closed:
                self._fh.close()
        except OSError:
            pass
        finally:
            self.lock.release()
