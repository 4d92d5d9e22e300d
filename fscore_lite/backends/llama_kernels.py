"""Which of llama.cpp's CPU kernels runs the LLM, chosen once per process and recorded.

The project builds llama.cpp with its x86-64 CPU variants as loadable libraries
(``GGML_BACKEND_DL`` + ``GGML_CPU_ALL_VARIANTS``: ``libggml-cpu-haswell.so``,
``libggml-cpu-zen4.so``, ...; the Makefile's ``LLAMA_VARIANTS`` says which), so one portable build
can run the kernels a CPU has. The variant changes the bits: the AVX-512 variants compute other
logits than the AVX2 one and their greedy text can differ within a few dozen tokens. So the kernel
is a setting (``--llm-kernel``):

* ``portable`` (the default): ``haswell`` — AVX2, FMA, F16C, BMI2, the instruction set every
  earlier build of this project compiled in. It runs the same kernel code on every CPU that has
  AVX2, whoever made it, and computes the same bits as those builds (calls cached by them stay
  valid).
* ``auto``: the variant llama.cpp scores best for this CPU (its own ``ggml_backend_score``),
  except variants that use AMX tiles (``sapphirerapids``), which must be named: AMX needs the
  operating system to grant tile state, and a native AMX build was seen to die with SIGILL.
* a variant's name (``zen4``, ``icelake``, ...): that one, refused when this CPU lacks it.

A build of llama-cpp-python without loadable variants (a plain ``pip install``) runs its
built-in kernel: ``portable`` and ``auto`` then both mean that one, and a named variant is an
error. What ran is recorded as :class:`Kernel` (its name and the instruction sets
``llama_print_system_info`` reports); the call cache keys every LLM call by those instruction
sets, except for the portable set, whose keys stay as they were before kernels were recorded.
"""
from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import FscoreError
from ..settings import check_kernel

PORTABLE = "haswell"
NEEDS_NAMING = ("sapphirerapids",)  # AMX tiles: never picked by auto
# llama_print_system_info of the AVX2 kernel (the haswell variant and the project's earlier AVX2
# builds print the same and compute the same bits): its calls keep their old cache keys.
PORTABLE_FEATURES = "SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 |"
_PREFIX = "libggml-cpu-"


@dataclass(frozen=True)
class Kernel:
    requested: str  # portable, auto or a variant name
    name: str  # the variant that ran, or "built-in" for a build without loadable variants
    features: str  # the instruction sets llama.cpp reports, e.g. "AVX = 1 | AVX2 = 1 | ..."
    path: str = ""  # the variant's library ("" for built-in)

    @property
    def cache_tag(self) -> str | None:
        """What the call cache adds to its keys (None: the portable kernel, keys as before)."""
        return None if self.features == PORTABLE_FEATURES else self.features

    def to_json(self) -> dict:
        return {"requested": self.requested, "ran": self.name, "features": self.features}


def variant_dirs() -> list[Path]:
    """Where the variant libraries may lie: $FSCORE_LITE_GGML_BACKENDS, then beside llama_cpp's
    own libraries, then the ``bin`` folders pip installs them into (environment or --target)."""
    env = os.environ.get("FSCORE_LITE_GGML_BACKENDS")
    if env:
        return [Path(env)]
    import llama_cpp

    pkg = Path(llama_cpp.__file__).resolve().parent
    return [pkg / "lib", pkg.parent / "bin", Path(sys.prefix) / "bin"]


def find_variants() -> dict[str, Path]:
    """Variant name → library file, from the first folder of :func:`variant_dirs` that has any."""
    for d in variant_dirs():
        if d.is_dir():
            found = {p.name[len(_PREFIX):-3]: p for p in sorted(d.glob(_PREFIX + "*.so"))}
            if found:
                return found
    return {}


def _score(path: Path) -> int:
    """llama.cpp's own score of a variant for this CPU (0: the CPU lacks an instruction it uses)."""
    lib = ctypes.CDLL(str(path))
    lib.ggml_backend_score.restype = ctypes.c_int
    return int(lib.ggml_backend_score())


def _ggml():
    # libllama loaded libggml.so.0 by its soname; this is the same library, so the same registry
    return ctypes.CDLL("libggml.so.0", mode=ctypes.RTLD_GLOBAL)


def _features() -> str:
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    cpu = info.split("CPU :", 1)[-1]
    # the instruction sets only (LLAMAFILE, OPENMP, REPACK are the same in every variant)
    sets = [part.strip() for part in cpu.split("|") if part.strip() and part.split("=")[0].strip() not in
            ("LLAMAFILE", "OPENMP", "REPACK", "KLEIDIAI")]
    return " | ".join(sets) + (" |" if sets else "")


_loaded: Kernel | None = None


def _pick(choice: str, variants: dict[str, Path]) -> str:
    if choice == "portable":
        if PORTABLE not in variants:
            raise FscoreError(f"this llama.cpp build has no {PORTABLE} kernel (its variants: {', '.join(variants)})")
        if _score(variants[PORTABLE]) <= 0:
            raise FscoreError("this CPU lacks AVX2, which the portable kernel needs: run with --llm-kernel auto "
                              "(the kernel that runs is recorded in the summary)")
        return PORTABLE
    if choice == "auto":
        scored = {name: _score(p) for name, p in variants.items() if name not in NEEDS_NAMING}
        best = max(scored, key=lambda n: (scored[n], n))
        if scored[best] <= 0:
            raise FscoreError(f"none of llama.cpp's CPU kernels runs on this CPU ({', '.join(variants)})")
        return best
    if choice not in variants:
        raise FscoreError(f"--llm-kernel {choice}: no such kernel in this llama.cpp build; it has "
                          f"portable, auto, {', '.join(variants)} (`make install LLAMA_VARIANTS=all` "
                          "builds every one ggml has)")
    if _score(variants[choice]) <= 0:
        raise FscoreError(f"--llm-kernel {choice}: this CPU lacks an instruction set that kernel uses "
                          "(it would die with an illegal instruction); run with --llm-kernel auto")
    return choice


def ensure_kernel(choice: str = "portable") -> Kernel:
    """Load the chosen CPU kernel into llama.cpp (once a process) and say what runs.

    A process runs one kernel: asking for another after the first is loaded is an error rather
    than a silent mix (``portable`` then ``haswell`` name the same one)."""
    global _loaded
    check_kernel(choice)
    import llama_cpp  # noqa: F401 - loads libllama and its libggml

    variants = find_variants()
    if _loaded is not None:
        if choice in (_loaded.requested, _loaded.name) or (choice == "portable" and _loaded.name == PORTABLE):
            return _loaded
        if not variants:  # built-in: every choice that is allowed at all means the one kernel
            if choice in ("portable", "auto"):
                return _loaded
        if choice == "auto" and _loaded.name == _pick("auto", variants):
            return _loaded
        raise FscoreError(f"this process already runs llama.cpp's {_loaded.name} kernel; "
                          f"--llm-kernel {choice} needs a process of its own")
    if not variants:
        if choice not in ("portable", "auto"):
            raise FscoreError(f"--llm-kernel {choice}: this llama.cpp build has one built-in kernel and no "
                              "loadable variants (build it as `make install` does: GGML_BACKEND_DL, "
                              "GGML_CPU_ALL_VARIANTS)")
        _loaded = Kernel(choice, "built-in", _features())
        return _loaded
    name = _pick(choice, variants)
    from llama_cpp import _logger

    _logger.set_verbose(False)  # llama.cpp's "loaded CPU backend" line; Llama(verbose=False) does the same
    ggml = _ggml()
    ggml.ggml_backend_load.argtypes = [ctypes.c_char_p]
    ggml.ggml_backend_load.restype = ctypes.c_void_p
    if not ggml.ggml_backend_load(str(variants[name]).encode()):
        raise FscoreError(f"llama.cpp could not load its {name} kernel from {variants[name]}")
    _loaded = Kernel(choice, name, _features(), str(variants[name]))
    return _loaded


def resolve_kernel(choice: str = "portable") -> str:
    """The name of the kernel ``choice`` runs here, without loading it (for settings recorded
    before any model loads): a variant's name, or ``built-in``."""
    check_kernel(choice)
    if _loaded is not None and choice in (_loaded.requested, _loaded.name):
        return _loaded.name
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return "built-in"
    variants = find_variants()
    if not variants:
        if choice not in ("portable", "auto"):
            ensure_kernel(choice)  # raises the error that names the build
        return "built-in"
    return _pick(choice, variants)


def loaded() -> Kernel | None:
    """The kernel this process runs (None: no LLM loaded yet)."""
    return _loaded
