"""Jobs dealt round-robin to one Python thread per worker (a worker: models with sessions of its own).

onnxruntime runs without the GIL, so two workers on two cores do about twice the work. Each job is
computed as it would be alone, by whichever worker gets it, so the split changes no value.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Sequence


def run_dealt(jobs: Sequence, workers: Sequence, do: Callable[[Any, Any], None],
              done: Callable[[], None] | None = None) -> None:
    """``do(worker, job)`` for every job, job ``i`` on worker ``i % len(workers)`` (inline when there
    is one worker); ``done()`` after each job, under a lock. The first error stops the other threads
    at their next job and is raised here."""
    lock = threading.Lock()
    errors: list[BaseException] = []

    def work(w: int) -> None:
        try:
            for job in jobs[w::len(workers)]:
                if errors:
                    return
                do(workers[w], job)
                if done:
                    with lock:
                        done()
        except BaseException as e:  # noqa: BLE001 - re-raised in the calling thread
            errors.append(e)

    if len(workers) == 1:
        work(0)
    else:
        threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in range(len(workers))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
