"""The one way fscore-lite opens an onnxruntime session (every ONNX backend uses it).

CPU provider, ``threads`` intra-op threads, sequential execution, all graph optimisations.

Between the operators of one call, a session with more than one thread hands each operator's
blocks to its worker threads. A worker that sleeps as soon as it runs out of work must be woken
for the next operator, and Q²'s calls are hundreds of small operators (a decoder step over a few
beams): with passive waiting, 2 threads were barely faster than 1. Workers therefore spin for a
short, bounded time before they sleep (:data:`DEFAULT_SPIN_US`, onnxruntime's
``session.intra_op.spin_duration_us``): on the Q² benchmark's models at 2 threads that took 15%
off a response's time (0.75 s against 0.88 s, ``docs/BENCHMARKS.md``). The price is paid when another process keeps
the cores busy: with one core taken by a busy loop the same response took about a quarter
longer than with passive waiting. ``FSCORE_LITE_ONNX_SPIN_US=0`` turns spinning off (for machines shared
with busy jobs; ``--threads 1`` has no workers to wait at all). Spinning changes when work is
picked up, never how it is split: outputs are the same bytes either way (tested).
"""
from __future__ import annotations

from pathlib import Path

from ..settings import env_int

SPIN_ENV = "FSCORE_LITE_ONNX_SPIN_US"
DEFAULT_SPIN_US = 50  # 30-300 µs all gave the same gain here; the shortest wait that does


def spin_microseconds() -> int:
    """How long an idle worker thread spins before it sleeps (µs; 0: it sleeps at once)."""
    value = env_int(SPIN_ENV, 0, "microseconds")
    return DEFAULT_SPIN_US if value is None else value


def session_spin(threads: int) -> int:
    """The spin a session with ``threads`` threads gets (0 for one thread: it has no workers)."""
    return spin_microseconds() if int(threads) > 1 else 0


def session_options(threads: int):
    import onnxruntime as ort

    threads = max(1, int(threads))
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    spin = session_spin(threads)
    opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    if spin:
        opts.add_session_config_entry("session.intra_op.spin_duration_us", str(spin))
    opts.log_severity_level = 3
    return opts


def make_session(path: str | Path, threads: int):
    """An onnxruntime CPU session over the model file at ``path``."""
    import onnxruntime as ort

    return ort.InferenceSession(str(path), sess_options=session_options(threads), providers=["CPUExecutionProvider"])
