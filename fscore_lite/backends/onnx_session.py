"""The one way fscore-lite opens an onnxruntime session (every ONNX backend uses it).

CPU provider, ``threads`` intra-op threads, sequential execution, all graph optimisations.

Q²'s calls are hundreds of small operators, and a worker thread that sleeps at once must be woken
for each one, so workers spin briefly before they sleep (:data:`DEFAULT_SPIN_US`, onnxruntime's
``session.intra_op.spin_duration_us``); on cores other jobs keep busy that costs instead, hence
``FSCORE_LITE_ONNX_SPIN_US=0``. Measured: docs/BENCHMARKS.md. Outputs are the same bytes either way (tested).
"""
from __future__ import annotations

from pathlib import Path

from ..settings import env_int

SPIN_ENV = "FSCORE_LITE_ONNX_SPIN_US"
DEFAULT_SPIN_US = 50  # the shortest wait that gave the full gain (docs/BENCHMARKS.md)


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
