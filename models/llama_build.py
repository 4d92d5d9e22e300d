"""llama-cpp-python's source, unpacked with a chosen set of llama.cpp's x86-64 CPU kernels.

``GGML_CPU_ALL_VARIANTS`` compiles every x86-64 kernel ggml lists (fourteen in llama-cpp-python
0.3.36), each one a full copy of the CPU backend, and offers no way to pick some: on 2 cores that
is most of the install's compile. This step unpacks the registry's sdist and comments out, in ggml's
list, the variants not asked for; the ones kept compile from the same sources with the same flags,
so each computes what it computes in an all-variants build. ``all`` keeps the list as it is.

``--no-common`` also leaves out llama.cpp's ``common`` library, which llama-cpp-python builds only
for its multimodal library (``LLAVA_BUILD``) and never installs: for builds with ``LLAVA_BUILD=OFF``.

Standard library only: it runs before anything is installed into the environment.

    python models/llama_build.py [--no-common] SDIST OUT_DIR all|NAME...
"""
from __future__ import annotations

import re
import shutil
import sys
import tarfile
from pathlib import Path

CMAKELISTS = "vendor/llama.cpp/ggml/src/CMakeLists.txt"
COMMON_ON = 'set(LLAMA_BUILD_COMMON ON CACHE BOOL "Build llama.cpp common library" FORCE)'
PORTABLE = "haswell"  # fscore_lite.backends.llama_kernels.PORTABLE: the default kernel must be built
_VARIANT = re.compile(r"^\s*ggml_add_cpu_backend_variant\((\w+)(?:\s[^)]*)?\)\s*$")
_MARK = "# fscore-lite: not built: "


class BuildError(Exception):
    pass


def x86_block(lines: list[str]) -> tuple[int, int]:
    """[start, end) of the lines that list the x86 variants under ``if (GGML_CPU_ALL_VARIANTS)``."""
    try:
        top = next(i for i, l in enumerate(lines) if l.strip() == "if (GGML_CPU_ALL_VARIANTS)")
        start = next(i for i in range(top, len(lines)) if 'GGML_SYSTEM_ARCH STREQUAL "x86"' in lines[i])
        indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
        # the x86 branch ends at the next elseif/endif of its own `if`, at the same indentation
        end = next(i for i in range(start + 1, len(lines))
                   if lines[i].startswith(indent) and lines[i][len(indent):].startswith(("elseif", "endif")))
    except StopIteration:
        raise BuildError(f"{CMAKELISTS}: no x86 list under `if (GGML_CPU_ALL_VARIANTS)`; this step knows "
                         "llama-cpp-python 0.3.36's layout") from None
    return start + 1, end


def select(text: str, wanted: list[str]) -> tuple[str, list[str], list[str]]:
    """``text`` (ggml's CMakeLists) with the x86 variants not in ``wanted`` commented out;
    ``["all"]`` keeps them all. Returns (text, kept, dropped) in ggml's order."""
    lines = text.splitlines(keepends=True)
    start, end = x86_block(lines)
    listed = {}
    for i in range(start, end):
        m = _VARIANT.match(lines[i])
        if m:
            listed[m.group(1)] = i
    if not listed:
        raise BuildError(f"{CMAKELISTS}: the x86 list names no variant")
    if wanted == ["all"]:
        return text, list(listed), []
    unknown = [w for w in wanted if w not in listed]
    if unknown:
        raise BuildError(f"unknown llama.cpp CPU variant(s) {', '.join(unknown)}: ggml lists all, "
                         f"{', '.join(listed)}")
    if PORTABLE not in wanted:
        raise BuildError(f"the variants must include {PORTABLE}: it is fscore-lite's default (portable) kernel")
    dropped = [name for name in listed if name not in wanted]
    for name in dropped:
        i = listed[name]
        indent = len(lines[i]) - len(lines[i].lstrip())
        lines[i] = lines[i][:indent] + _MARK + lines[i][indent:]
    return "".join(lines), [n for n in listed if n in wanted], dropped


def without_common(text: str) -> str:
    """llama-cpp-python's top CMakeLists.txt with its forced ``LLAMA_BUILD_COMMON`` turned off."""
    if text.count(COMMON_ON) != 1:
        raise BuildError(f"CMakeLists.txt: no `{COMMON_ON}` line to turn off")
    return text.replace(COMMON_ON, COMMON_ON.replace(" ON ", " OFF "))


def unpack(sdist: Path, out: Path) -> Path:
    """Extract ``sdist`` into a new ``out``; return the source root (the folder with pyproject.toml)."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    with tarfile.open(sdist) as tar:
        tar.extractall(out, filter="data")  # refuses absolute paths, links out of the folder, devices
    roots = [p.parent for p in out.glob("*/pyproject.toml")]
    if len(roots) != 1:
        raise BuildError(f"{sdist}: expected one source folder with a pyproject.toml, found {len(roots)}")
    return roots[0]


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="models/llama_build.py", description=__doc__.strip().splitlines()[0])
    ap.add_argument("sdist", type=Path, help="llama-cpp-python's sdist (pip download --no-binary :all:)")
    ap.add_argument("out", type=Path, help="the folder to unpack into (replaced)")
    ap.add_argument("variants", nargs="+", help=f"`all`, or x86-64 variant names from ggml's list (with {PORTABLE})")
    ap.add_argument("--no-common", action="store_true", help="leave out llama.cpp's common library")
    args = ap.parse_args(argv)
    try:
        if not args.sdist.is_file():
            raise BuildError(f"{args.sdist}: no such file")
        root = unpack(args.sdist, args.out)
        cmake = root / CMAKELISTS
        if not cmake.is_file():
            raise BuildError(f"{args.sdist}: has no {CMAKELISTS}")
        text, kept, dropped = select(cmake.read_text(encoding="utf-8"), args.variants)
        cmake.write_text(text, encoding="utf-8")
        if args.no_common:
            top = root / "CMakeLists.txt"
            top.write_text(without_common(top.read_text(encoding="utf-8")), encoding="utf-8")
    except (BuildError, OSError, tarfile.TarError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{root}: llama.cpp CPU variants to build: {' '.join(kept)}"
          + (f" (not built: {' '.join(dropped)})" if dropped else "")
          + ("; without the common library" if args.no_common else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
