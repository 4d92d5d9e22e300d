"""Jobs dealt round-robin to one thread per worker (fscore_lite/training/dealt.py): the training
build's featurisation and silver labels use it, so two cores give the same values as one."""
import threading

import pytest

from fscore_lite.training.dealt import run_dealt


def test_every_job_runs_once_on_its_round_robin_worker_and_done_counts_them():
    seen, count = {}, []
    lock = threading.Lock()

    def do(worker, job):
        with lock:
            seen[job] = (worker, threading.current_thread().name)

    run_dealt(list(range(7)), ["a", "b", "c"], do, lambda: count.append(1))
    assert {j: w for j, (w, _) in seen.items()} == {0: "a", 1: "b", 2: "c", 3: "a", 4: "b", 5: "c", 6: "a"}
    assert len(count) == 7
    assert len({name for _, name in seen.values()}) == 3  # one thread per worker


def test_one_worker_runs_inline_in_order():
    order = []
    run_dealt(["x", "y", "z"], [None], lambda w, j: order.append((j, threading.current_thread().name)))
    assert order == [(j, threading.current_thread().name) for j in "xyz"]


def test_the_first_error_stops_the_others_and_is_raised_here():
    started, bad = [], []
    failed = threading.Event()

    def do(worker, job):
        if worker == "bad":
            bad.append(threading.current_thread())
            failed.set()
            raise ValueError(f"job {job} failed")
        failed.wait(5)
        bad[0].join(5)  # the failing thread has ended, so its error is recorded
        started.append(job)

    with pytest.raises(ValueError, match="job 1 failed"):
        run_dealt(list(range(40)), ["good", "bad"], do)
    assert started in ([], [0])  # the good worker stopped at its next job (or before its first), not after twenty
    run_dealt([], ["a", "b"], do)  # no jobs: nothing runs, nothing fails
