"""One file driver for ``score`` and ``q2``: check outputs → load → run key → resumable writer →
progress → summary.

The caller reads and validates the whole input first (so a broken file fails before anything
is written or loaded) and hands over its items; every output path is then checked before any
model is loaded. Finished items go through :class:`~fscore_lite.io.ResumableJsonlWriter`; the
summary is written before the output, so that if it fails the partial file still resumes.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol, Sequence

from .errors import OutputError
from .io import OutputLock, ResumableJsonlWriter, atomic_write_json, check_writable_outputs, summary_path_for
from .progress import Progress
from .runfiles import finished_items


class LocalExecutor:
    """Scores one item after the other in this process with ``score_one(item) -> record``."""

    def __init__(self, score_one: Callable[[Any], dict]):
        self.score_one = score_one

    def map(self, items: Iterable[tuple[int, Any]]) -> Iterator[tuple[int, dict]]:
        for line, item in items:
            yield line, self.score_one(item)

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class RunFacts:
    """What the driver measured, for the pipeline's summary."""

    load_s: float  # loading the scorer (models)
    total_s: float
    items_resumed: int  # taken from the partial file of an interrupted run
    cache: dict  # model-call cache hits and misses during this run


class FileScorer(Protocol):
    cache: Any  # CallCache: hits, misses

    def identity(self) -> dict:
        """What a result depends on besides the input bytes (part of the resume key)."""

    def score_item(self, item, progress: Progress | None) -> dict:
        """One item's output record (a JSON object)."""

    def finalize(self, results: list[dict]) -> list[dict]:
        """The records as written to the output, from all of the run's records (input order): what
        depends on the whole run (FActScore's run share) is applied here, never to the partial file."""

    def summary(self, results: list[dict], run: RunFacts) -> dict:
        """The pipeline's summary of all finalized records (input order) and this run."""


def run_key(input_sha256: str, identity: dict) -> str:
    """Identity of a run for ``--resume``: the input's bytes and everything the scorer depends on."""
    key = {"input": input_sha256, "scorer": identity}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def run_file(input_path: str | Path, output_path: str | Path, items: Sequence, load: Callable[[], FileScorer], *,
             input_sha256: str, summary_path: str | Path | None = None, resume: bool = False, label: str, progress: bool = True,
             item_unit: str = "items", note: Callable[[Any], str] = lambda item: "",
             plan: Callable[[FileScorer, list, Progress], None] | None = None,
             executor=None, force: bool = False, protected: Sequence[str | Path] = ()) -> tuple[dict, FileScorer]:
    """Score ``items`` (validated, each with its input ``line``) into ``output_path`` and write the
    summary JSON (default ``OUT.summary.json``); returns the summary and the scorer.

    ``input_sha256`` is the hash of the bytes the items were read from (read once: a pipe cannot
    be read twice). ``load`` makes the scorer once the outputs are known to be writable and
    locked against a second run; ``plan`` may declare
    work up front (``Progress.add_total``) for the items still to score; ``note`` labels the
    progress line after each item. ``executor``: where the pending items are scored (default:
    this process; see :mod:`fscore_lite.distributed`). ``protected``: folders and files no output may
    be written into (the passage store, the model bundle). A partial file holding finished items
    is continued only with ``resume`` and discarded only with ``force``: otherwise the run stops."""
    input_path, output_path = Path(input_path), Path(output_path)
    summary_path = Path(summary_path) if summary_path else summary_path_for(output_path)
    partial = output_path.with_name(output_path.name + ".partial")
    check_writable_outputs([output_path, summary_path, partial], inputs=[input_path], protected=protected)
    t_start = time.monotonic()
    lock = OutputLock([output_path, summary_path]).acquire()  # one run per output, taken before models load
    try:
        if not resume and not force:
            finished = finished_items(partial)
            if finished:
                raise OutputError(f"{partial} holds {finished} finished item(s) of an earlier run of this output; "
                                  "--resume continues that run, --force discards them and starts over")
        scorer = load()
        t_loaded = time.monotonic()
        writer = ResumableJsonlWriter(output_path, resume=resume, run_key=run_key(input_sha256, scorer.identity()),
                                      lines=[it.line for it in items], lock=lock)
    except BaseException:
        lock.release()
        raise
    bar = Progress(len(items), label, enabled=progress, item_unit=item_unit)
    hits0, misses0 = scorer.cache.hits, scorer.cache.misses
    try:
        pending = [it for it in items if not writer.done(it.line)]
        if plan is not None:
            plan(scorer, pending, bar)
        for _ in range(len(items) - len(pending)):
            bar.skip()
        if executor is None:  # this process, one item after the other
            executor = LocalExecutor(lambda item: scorer.score_item(item, bar))
        for item, (line, rec) in zip(pending, executor.map((it.line, it) for it in pending)):
            writer.add(line, rec)
            bar.advance(note=note(item))
        bar.close()
        run = RunFacts(load_s=t_loaded - t_start, total_s=time.monotonic() - t_start,
                       items_resumed=len(items) - len(pending),
                       cache={"hits": scorer.cache.hits - hits0, "misses": scorer.cache.misses - misses0})
        paths = {"input": str(input_path), "output": str(output_path), "summary": str(summary_path)}
        final = scorer.finalize(writer.ordered()) if hasattr(scorer, "finalize") else writer.ordered()
        summary = scorer.summary(final, run) | paths
        atomic_write_json(summary_path, summary)  # first: if it fails, the partial file still resumes
        writer.finish(final)
    finally:
        bar.close()
        writer.close()
    return summary, scorer
