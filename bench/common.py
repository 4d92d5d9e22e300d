"""Shared pieces of the benchmarks: machine info, timers, CPU pinning, peak RSS, tables, caches."""
from __future__ import annotations

import contextlib
import datetime as _dt
import gc
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VERSIONED = ("onnxruntime", "llama_cpp_python", "torch", "transformers", "optimum-onnx", "tokenizers", "hnswlib",
             "numpy")


# --- machine -----------------------------------------------------------------------------
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def ram_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return float("nan")


def version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def usable_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def machine_info() -> dict:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": len(usable_cores()),
        "ram_gib": round(ram_gib(), 1),
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "versions": {d: version(d) for d in VERSIONED},
    }


def machine_markdown(info: dict) -> str:
    v = info["versions"]
    return (
        f"- CPU: {info['cpu']}, {info['cores']} cores ({info['usable_cores']} usable by the benchmark), "
        f"{info['ram_gib']} GiB RAM; {info['os']}, Python {info['python']}\n"
        f"- onnxruntime {v['onnxruntime']}, llama-cpp-python {v['llama_cpp_python']}, torch {v['torch']}, "
        f"transformers {v['transformers']}, optimum-onnx {v['optimum-onnx']}, tokenizers {v['tokenizers']}, "
        f"hnswlib {v['hnswlib']}, numpy {v['numpy']}"
    )


def now() -> str:
    return _dt.datetime.now().strftime("%Y-%m-%d %H:%M")


# --- caches and data ---------------------------------------------------------------------
def bench_home() -> Path:
    """Where exported benchmark models and stores are kept between runs."""
    from fscore_lite.settings import Settings

    path = Settings().home / "bench"
    path.mkdir(parents=True, exist_ok=True)
    return path


class NoCache:
    """A stand-in for :class:`fscore_lite.cache.CallCache` that never stores: every call computes."""

    hits = 0
    misses = 0

    def cached(self, model, kind, payload, compute):
        self.misses += 1
        return compute()

    def get(self, *a):
        return None

    def put(self, *a):
        pass


def log(msg: str) -> None:
    sys.stderr.write(f"[bench {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


# --- threads and timing ------------------------------------------------------------------
def load_native_libraries() -> None:
    """Import onnxruntime before the first :func:`pinned` narrows the CPU affinity.

    onnxruntime inspects the CPU when it is first imported; imported inside a one-core affinity
    mask, its int8 ALBERT-xlarge QA call ran 2.2× slower here for the rest of the process (544 ms
    against 248 ms, the same when pinned after the import) — a cost the runtime, which never
    pins, does not pay."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:  # sections without it never time it
        pass


@contextlib.contextmanager
def pinned(threads: int):
    """Run on the first ``threads`` usable cores (both sides of a comparison get the same ones),
    with torch (when loaded) set to the same number of threads. onnxruntime is imported first
    (:func:`load_native_libraries`)."""
    load_native_libraries()
    cores = usable_cores()
    old = set(cores)
    want = set(cores[: max(1, threads)])
    torch_old = None
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, want)
    if "torch" in sys.modules:
        import torch

        torch_old = torch.get_num_threads()
        torch.set_num_threads(threads)
    try:
        yield sorted(want)
    finally:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, old)
        if torch_old is not None:
            import torch

            torch.set_num_threads(torch_old)


def timed(fn, *args, **kw):
    """(result, seconds) of one call."""
    t = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t


def summarize(seconds: list[float]) -> dict:
    s = sorted(seconds)
    if not s:
        return {"n": 0}

    def pct(p):
        return s[min(len(s) - 1, max(0, int(round(p / 100 * (len(s) - 1)))))]

    return {"n": len(s), "mean": statistics.fmean(s), "median": statistics.median(s), "p50": pct(50), "p95": pct(95),
            "min": s[0], "max": s[-1], "total": sum(s)}


def free_memory() -> None:
    gc.collect()
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)


# --- memory ------------------------------------------------------------------------------
def peak_rss_mib() -> float:
    """Peak resident set of this process so far (ru_maxrss, KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mib() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


_REAPER = """\
import os, sys
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[1], sys.argv[1:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
sys.stderr.write("\\n__peak_rss_kib__ %d\\n" % usage.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_with_peak_rss(cmd: list[str], env: dict | None = None, cwd=None) -> dict:
    """Run a command; return exit status, wall seconds, output and ``peak_rss_mib``: the peak
    resident set of the command and its waited-for descendants.

    A small reaper process forks and execs the command and reads ``wait4``'s rusage. Forking
    the command straight from this (large) process would not do: Linux carries the parent's
    resident size at fork into the child's ``ru_maxrss``.
    """
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _REAPER, *cmd], env=env, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - t
    err, _, tail = proc.stderr.rpartition("\n__peak_rss_kib__ ")
    peak = int(tail.split()[0]) / 1024 if tail.strip() else float("nan")
    return {"returncode": proc.returncode, "seconds": seconds, "peak_rss_mib": peak, "stdout": proc.stdout,
            "stderr": err if tail.strip() else proc.stderr}


# --- output ------------------------------------------------------------------------------
def md_table(headers: list[str], rows: list[list]) -> str:
    def cell(v):
        if isinstance(v, float):
            return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def fmt_s(seconds: float) -> str:
    if seconds != seconds:  # nan
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def ratio(a: float, b: float) -> str:
    """``a / b`` as "N.N×" (how many times faster b is than a)."""
    return f"{a / b:.1f}×" if b > 0 else "-"


def save_json(name: str, data: dict) -> Path:
    out = REPO / "out" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    return path


# --- the wiki data (shared/data/wiki-factscore-dev and factscore-labeled) -----------------
def labeled_facts(data: Path) -> dict[str, list[str]]:
    """topic -> InstructGPT-made ``model-atomic-facts`` of its annotated bios (all subjects)."""
    facts: dict[str, list[str]] = {}
    for subject in ("InstructGPT", "ChatGPT", "PerplexityAI"):
        path = Path(data) / "factscore-labeled" / f"{subject}.jsonl"
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            for sent in rec.get("annotations") or []:
                for f in sent.get("model-atomic-facts") or []:
                    facts.setdefault(rec["topic"], []).append(f["text"])
    return facts


def wiki_pages(data: Path, n: int) -> list[dict]:
    """The first ``n`` pages of wiki-factscore-dev whose topic has labeled facts."""
    have = labeled_facts(data)
    out = []
    for line in (Path(data) / "wiki-factscore-dev" / "pages.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec["topic"] in have:
            out.append(rec)
            if len(out) == n:
                break
    return out


def wiki_store(data: Path, n_pages: int, threads: int = 1) -> Path:
    """A passage store of ``n_pages`` wiki pages, built with the installed embedder (cached)."""
    from fscore_lite_index.build import build_store

    home = bench_home()
    src = home / f"wiki{n_pages}.jsonl"
    text = "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in wiki_pages(data, n_pages))
    if not src.exists() or src.read_text(encoding="utf-8") != text:
        src.write_text(text, encoding="utf-8")
    out = home / f"wiki{n_pages}-store"
    build_store(src, out, source_label="wiki-factscore-dev (bench)", snapshot="2026", threads=threads, progress=False)
    return out
