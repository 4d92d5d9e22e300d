"""Scoring on Ray actors (``score --ray``, ``q2 --ray``): the optional ``fscore-lite[ray]`` extra.

Each actor loads (and hash-verifies) the models and the store once, then scores items one at a
time with exactly the code of a local run, so a record's bytes do not depend on where it ran
(with the same ``--threads`` per actor). The driver keeps the one output writer: records come
back in input order (:func:`ordered_map`) and go to the resumable partial file as they arrive.

The call cache stays a single-writer SQLite file: an actor reads the driver's cache file when
its machine can see it (read-only), keeps the rows it computes in memory, and returns them with
each record; the driver writes them (:class:`RecordingCache`). A killed actor is restarted by
Ray and its unfinished item retried (``max_restarts`` / ``max_task_retries``); the rows of a
lost attempt are lost with it and recomputed by the retry.
"""
from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..cache import CallCache
from ..errors import FscoreError
from ..settings import Settings

MAX_RESTARTS = 3  # per actor; each restart retries the item it was scoring


def require_ray():
    try:
        import ray
    except ImportError:
        raise FscoreError("--ray needs Ray: pip install 'fscore-lite[ray]'") from None
    return ray


def connect(address: str = "local", num_cpus: int | None = None):
    """``ray.init`` for ``local`` (a new instance on this machine), ``auto`` (the cluster that
    ``ray start`` set up here) or a cluster address (``HOST:PORT``, ``ray://HOST:PORT``).
    An instance already initialised in this process is used as it is."""
    # Ray reports usage statistics over the network unless told not to; fscore-lite never calls out.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Ray runs its workers 15 nice levels below the driver, so that the driver stays responsive;
    # here the workers do all the work, and on a busy machine they starved (7× slower than the
    # same encode in the driver). Read by the raylet that `local` starts.
    os.environ.setdefault("RAY_worker_niceness", "0")
    ray = require_ray()
    if ray.is_initialized():
        return ray
    try:
        if address == "local":
            ray.init(num_cpus=num_cpus, include_dashboard=False, logging_level="WARNING")
        else:
            ray.init(address=address, logging_level="WARNING")
    except (ConnectionError, ValueError, RuntimeError) as e:
        raise FscoreError(f"cannot start or reach the Ray cluster at {address!r}: {_first_line(e)}") from None
    return ray


def _first_line(e: BaseException) -> str:
    lines = [x for x in str(e).strip().splitlines() if x.strip()]
    return lines[-1] if lines else type(e).__name__


class RecordingCache(CallCache):
    """An actor's call cache: in memory, reading through to the driver's cache file (read-only,
    when this machine sees it), remembering every row it adds for the driver to write."""

    def __init__(self, read_path: str | Path | None):
        super().__init__(None)
        self.rows: list[tuple[str, str, str, Any]] = []
        self._reader = None
        if read_path and Path(read_path).is_file():
            try:
                self._reader = sqlite3.connect(Path(read_path).as_uri() + "?mode=ro", uri=True,
                                               check_same_thread=False, timeout=60)
            except sqlite3.Error:
                self._reader = None  # not readable from here: every call is computed

    def get(self, model: str, kind: str, payload: Any) -> Any | None:
        hit = super().get(model, kind, payload)
        if hit is None and self._reader is not None:
            key, _ = self._key(payload)
            try:
                with self._lock:
                    row = self._reader.execute("SELECT output FROM calls WHERE model=? AND kind=? AND key=?",
                                               (model, kind, key)).fetchone()
            except sqlite3.Error:
                row = None
            hit = None if row is None else json.loads(row[0])
        return hit

    def put(self, model: str, kind: str, payload: Any, output: Any) -> None:
        super().put(model, kind, payload, output)
        with self._lock:
            self.rows.append((model, kind, self._key(payload)[1], output))

    def take_rows(self) -> list[tuple[str, str, str, Any]]:
        """The rows added since the last call, forgotten here (the driver keeps them), so an
        actor's memory does not grow with the items it scores."""
        with self._lock:
            rows, self.rows = self.rows, []
            self._db.execute("DELETE FROM calls")
            self._db.commit()
        return rows


@dataclass(frozen=True)
class ScorerSpec:
    """What an actor needs to build the scorer of a local run: ``kind`` is "factscore" or "q2";
    ``extra`` holds Q2Scorer's backend and precision."""

    kind: str
    settings: Settings
    options: Any
    extra: dict = field(default_factory=dict)

    @property
    def cache_path(self) -> Path | None:
        return self.settings.cache_path if self.settings.use_cache else None

    def build(self, cache: CallCache):
        if self.kind == "factscore":
            from ..factscore.pipeline import FactScorer

            return FactScorer(self.settings, self.options, cache=cache)
        from ..q2.pipeline import Q2Scorer

        return Q2Scorer(self.settings, options=self.options, cache=cache, **self.extra)


class ScoringActor:
    """One Ray actor: the scorer, loaded once; scores one ``(line, item)`` per call."""

    def __init__(self, spec: ScorerSpec):
        self.error = None
        self.cache = RecordingCache(spec.cache_path)
        try:
            self.scorer = spec.build(self.cache)
        except FscoreError as e:  # reported by ready(), not as a Ray traceback
            self.error = str(e)

    def ready(self) -> tuple[str | None, str | None]:
        """(what the results depend on: every model's sha256 and the settings, or an error)."""
        if self.error:
            return None, self.error
        s = self.scorer
        return (json.dumps(s.identity(), sort_keys=True) if hasattr(s, "identity") else s.run_key("")), None

    def score(self, line_item: tuple[int, Any]) -> dict:
        line, item = line_item
        if self.error:
            return {"line": line, "error": self.error, "pid": os.getpid()}
        try:
            record = self.scorer.score_item(item)
        except FscoreError as e:
            return {"line": line, "error": f"item on line {line}: {e}", "pid": os.getpid()}
        return {"line": line, "record": record, "rows": self.cache.take_rows(), "pid": os.getpid()}


def ordered_map(ray, actors: list, method: str, values: Iterable, window: int | None = None) -> Iterator:
    """``actor.method(value)`` for every value, each actor one call at a time; results in the
    order of ``values``. At most ``window`` values are in flight or waiting for an earlier one,
    so memory stays bounded however long ``values`` is."""
    window = window or 4 * len(actors)
    it = iter(values)
    free = list(actors)
    inflight: dict = {}  # object ref -> (sequence number, actor)
    done: dict[int, Any] = {}
    seq = nxt = 0
    more = True
    while True:
        while more and free and len(inflight) + len(done) < window:
            try:
                value = next(it)
            except StopIteration:
                more = False
                break
            actor = free.pop(0)
            inflight[getattr(actor, method).remote(value)] = (seq, actor)
            seq += 1
        if nxt in done:
            yield done.pop(nxt)
            nxt += 1
            continue
        if not inflight:
            return
        [ref], _ = ray.wait(list(inflight), num_returns=1)
        s, actor = inflight.pop(ref)
        done[s] = ray.get(ref)
        free.append(actor)


class RayPool:
    """Actors of one class on a Ray cluster, started at the first use and killed by :meth:`close`."""

    def __init__(self, address: str = "local", actors: int | None = None):
        self.address, self.n_actors = address, actors
        self.actors: list | None = None
        self._ray = None

    def _start(self, cls, args: tuple, threads: int) -> list:
        """Start ``self.n_actors`` instances of ``cls`` (default: as many as the cluster's CPUs
        hold at ``threads`` each), restartable, with an unfinished call retried after a restart;
        returns what each one's ``ready()`` says."""
        ray = self._ray = connect(self.address)
        n = self.n_actors or max(1, int(ray.cluster_resources().get("CPU", 1)) // max(1, threads))
        remote = ray.remote(cls).options(num_cpus=threads, max_restarts=MAX_RESTARTS,
                                         max_task_retries=MAX_RESTARTS)
        self.actors = [remote.remote(*args) for _ in range(n)]
        try:
            return ray.get([a.ready.remote() for a in self.actors])
        except ray.exceptions.RayError as e:
            raise FscoreError(f"a Ray actor failed to start: {_first_line(e)}") from None

    def _results(self, method: str, values: Iterable, what: str) -> Iterator:
        """:func:`ordered_map` over the actors, a lost actor reported as an error, not a traceback."""
        results = ordered_map(self._ray, self.actors, method, values)
        while True:
            try:
                yield next(results)
            except StopIteration:
                return
            except self._ray.exceptions.RayError as e:
                raise FscoreError(f"a Ray actor failed while {what} (after up to {MAX_RESTARTS} restarts): "
                                  f"{_first_line(e)}") from None

    def close(self) -> None:
        if self.actors and self._ray is not None:
            for a in self.actors:
                self._ray.kill(a)
        self.actors = None


class RayExecutor(RayPool):
    """``map((line, item), ...) -> (line, record), ...`` in input order, scored by Ray actors.

    Ray is started (or joined) and the actors loaded at the first :meth:`map`, after the input
    and the outputs were checked; they stay up for later calls until :meth:`close`.
    ``pids`` collects the process ids that returned records (a restarted actor adds one)."""

    def __init__(self, spec: ScorerSpec, address: str = "local", actors: int | None = None):
        super().__init__(address, actors)
        self.spec = spec
        self.cache: CallCache | None = None
        self.pids: set[int] = set()
        self.rows_written = 0

    def map(self, items: Iterable[tuple[int, Any]]) -> Iterator[tuple[int, dict]]:
        if self.actors is None:
            ready = self._start(ScoringActor, (self.spec,), self.spec.settings.threads)
            for _, error in ready:
                if error:
                    raise FscoreError(error)
            if len({identity for identity, _ in ready}) > 1:
                raise FscoreError("the Ray actors loaded different models or stores: install the same model "
                                  "bundle and store on every machine")
            path = self.spec.cache_path
            self.cache = CallCache(path) if path else None  # the one writer of the driver's cache
        for res in self._results("score", items, "scoring (finished items are kept: rerun with --resume)"):
            if "error" in res:
                raise FscoreError(res["error"])
            if self.cache is not None:
                for model, kind, text, output in res["rows"]:
                    self.cache.put(model, kind, text, output)
                self.rows_written += len(res["rows"])
            self.pids.add(res["pid"])
            yield res["line"], res["record"]

    def describe(self) -> dict:
        """For the command's printed result: where the items ran (more processes than actors:
        some actor was restarted)."""
        return {"address": self.address, "actors": len(self.actors or ()), "processes": len(self.pids),
                "cache_rows_written": self.rows_written}

    def close(self) -> None:
        super().close()
        if self.cache is not None:
            self.cache.close()
            self.cache = None
