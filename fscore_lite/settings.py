"""One Settings object: threads, cache directory, model bundle, store, model choice.

Values come from (highest first) explicit arguments / CLI flags, environment variables
(``FSCORE_LITE_HOME``, ``FSCORE_LITE_THREADS``, ``FSCORE_LITE_MODELS``, ``FSCORE_LITE_STORE``,
``FSCORE_LITE_LLM``), then defaults.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from .errors import FscoreError

DEFAULT_LLM = "qwen2.5-coder-1.5b-instruct-q4_k_m"
TEST_LLM = "qwen2.5-coder-0.5b-instruct-q4_k_m"
DEFAULT_EMBED = "all-minilm-l6-v2-int8"


def _home() -> Path:
    env = os.environ.get("FSCORE_LITE_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "fscore-lite"


def env_int(name: str, minimum: int, unit: str) -> int | None:
    """The whole number in environment variable ``name`` (None when unset or blank); a clear
    error naming the variable when it is not a whole number of ``unit`` of at least ``minimum``."""
    env = os.environ.get(name)
    if env is None or not env.strip():
        return None
    try:
        value = int(env.strip())
    except ValueError:
        raise FscoreError(f"{name} must be a whole number of {unit} ({minimum} or more), not {env!r}") from None
    if value < minimum:
        raise FscoreError(f"{name} must be {minimum} or more, not {value}")
    return value


def _default_threads() -> int:
    value = env_int("FSCORE_LITE_THREADS", 1, "threads")
    if value is not None and value > MAX_THREADS:
        raise FscoreError(f"FSCORE_LITE_THREADS must be at most {MAX_THREADS}, not {value}")
    if value is not None:
        return value
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


MAX_THREADS = 1024
MIN_N_CTX, MAX_N_CTX = 64, 131072  # a context shorter than any prompt; the largest any bundled LLM takes


def check_threads(threads) -> int:
    """A thread count of 1 to :data:`MAX_THREADS` (``--threads 0`` or -1 would let llama.cpp pick its
    own number, so the summary could not say what ran; a huge one overflows the runtimes' C ints)."""
    if isinstance(threads, bool) or not isinstance(threads, int):
        raise FscoreError(f"--threads must be a whole number, not {threads!r}")
    if threads < 1:
        raise FscoreError(f"--threads must be 1 or more, not {threads}")
    if threads > MAX_THREADS:
        raise FscoreError(f"--threads must be at most {MAX_THREADS}, not {threads}")
    return threads


def check_n_ctx(n_ctx) -> int:
    """``--n-ctx``: a whole number of tokens from :data:`MIN_N_CTX` to :data:`MAX_N_CTX`, checked
    before any model loads (llama.cpp fails on 0 or less only after loading the weights)."""
    if isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or not MIN_N_CTX <= n_ctx <= MAX_N_CTX:
        raise FscoreError(f"--n-ctx must be a whole number of tokens from {MIN_N_CTX} to {MAX_N_CTX}, not {n_ctx!r}")
    return n_ctx


_KERNEL_NAME = re.compile(r"^[a-z0-9_]{1,40}$")


def check_kernel(choice) -> str:
    """``--llm-kernel``: ``portable``, ``auto`` or a variant's name (a lowercase word; whether this build
    and CPU have it is checked by backends/llama_kernels.py before any model loads)."""
    if not isinstance(choice, str) or not _KERNEL_NAME.match(choice):
        raise FscoreError("--llm-kernel must be portable (the AVX2 kernel whatever the CPU), auto (the best this "
                          f"CPU has) or a variant's name, not {choice!r}")
    return choice


MAX_PARALLEL = 3  # llm_parallel.MAX_WIDTH: 4 or more sequences a step change the bits


def check_parallel(parallel) -> int:
    """``--parallel``: 1 to 3 generations decoded together (the README's documented range)."""
    if isinstance(parallel, bool) or not isinstance(parallel, int) or not 1 <= parallel <= MAX_PARALLEL:
        raise FscoreError(f"--parallel must be 1 to {MAX_PARALLEL}, not {parallel!r} (with more than {MAX_PARALLEL} "
                          "sequences a step the facts would no longer be the same bytes as one at a time)")
    return parallel


@dataclass(frozen=True)
class Settings:
    home: Path = field(default_factory=_home)
    # None: FSCORE_LITE_THREADS, else all cores; the variable is read only when no count is given,
    # and a bad value is an error only when the count is then used
    threads: int | None = None
    models_dir: Path | None = None  # default: home / "models"
    store: Path | None = None  # default: home / "stores" / "demo"
    llm: str = field(default_factory=lambda: os.environ.get("FSCORE_LITE_LLM", DEFAULT_LLM))
    embed: str = DEFAULT_EMBED
    n_ctx: int = 4096
    # llama.cpp's CPU kernel (backends/llama_kernels.py): portable, auto or a variant's name
    llm_kernel: str = field(default_factory=lambda: os.environ.get("FSCORE_LITE_LLM_KERNEL", "portable"))
    # LLM generations decoded together (atomic facts of a response); bit-identical to 1
    parallel: int = 3
    use_cache: bool = True
    # whether a store was named (argument, --store or FSCORE_LITE_STORE); None: decided here
    store_named: bool | None = None

    def __post_init__(self):
        if object.__getattribute__(self, "threads") is None:
            try:
                object.__setattr__(self, "threads", _default_threads())
            except FscoreError as e:
                object.__setattr__(self, "_threads_error", e)  # raised when the count is used
        else:
            check_threads(self.threads)  # the value passed to every runtime, recorded in summaries
        check_parallel(self.parallel)
        check_n_ctx(self.n_ctx)
        check_kernel(self.llm_kernel)
        if self.store_named is None:
            named = self.store is not None or bool(os.environ.get("FSCORE_LITE_STORE"))
            object.__setattr__(self, "store_named", named)
        if self.models_dir is None:
            env = os.environ.get("FSCORE_LITE_MODELS")
            object.__setattr__(self, "models_dir", Path(env).expanduser() if env else self.home / "models")
        if self.store is None:
            env = os.environ.get("FSCORE_LITE_STORE")
            object.__setattr__(self, "store", Path(env).expanduser() if env else self.home / "stores" / "demo")

    def __getattribute__(self, name):
        value = object.__getattribute__(self, name)
        if name == "threads" and value is None:
            raise object.__getattribute__(self, "_threads_error")
        return value

    @property
    def demo_store(self) -> Path:
        """The implicit default store (``HOME/stores/demo``, built from the demo pages)."""
        return self.home / "stores" / "demo"

    @property
    def store_default(self) -> bool:
        """True when no store was named (argument, ``--store`` or ``FSCORE_LITE_STORE``) and the
        demo store is used in its place (naming the demo store's path is naming a store)."""
        return not self.store_named

    @property
    def cache_path(self) -> Path:
        """SQLite cache of model calls."""
        return self.home / "calls.sqlite"

    def with_(self, **changes) -> "Settings":
        """A copy with some fields changed; ``None`` values are ignored."""
        changes = {k: v for k, v in changes.items() if v is not None}
        if "store" in changes:
            changes.setdefault("store_named", True)
        if "threads" not in changes and object.__getattribute__(self, "threads") is None:
            changes["threads"] = None  # still unresolved (a bad FSCORE_LITE_THREADS): raised only on use
        return replace(self, **changes)
