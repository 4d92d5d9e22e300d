"""The install step that picks which of llama.cpp's x86-64 CPU kernels are compiled (models/llama_build.py)."""
import io
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from fscore_lite_models import llama_build as lb

# the layout of llama-cpp-python 0.3.36's ggml/src/CMakeLists.txt around the x86 list
CMAKE = """ggml_add_backend(CPU)

if (GGML_CPU_ALL_VARIANTS)
    if (NOT GGML_BACKEND_DL)
        message(FATAL_ERROR "GGML_CPU_ALL_VARIANTS requires GGML_BACKEND_DL")
    endif()
    if (GGML_SYSTEM_ARCH STREQUAL "x86")
        ggml_add_cpu_backend_variant(x64)
        ggml_add_cpu_backend_variant(sse42              SSE42)
        if (NOT MSVC)
            ggml_add_cpu_backend_variant(ivybridge      SSE42 AVX F16C)
        endif()
        ggml_add_cpu_backend_variant(haswell            SSE42 AVX F16C FMA AVX2 BMI2)
        if (NOT MSVC)
            ggml_add_cpu_backend_variant(zen4           SSE42 AVX F16C FMA AVX2 BMI2 AVX512 AVX512_VBMI AVX512_VNNI AVX512_BF16)
        endif()
    elseif(GGML_SYSTEM_ARCH STREQUAL "ARM")
        ggml_add_cpu_backend_variant(armv8.0_1)
        ggml_add_cpu_backend_variant(apple_m1             DOTPROD)
    endif()
endif()
"""


def _active(text):
    return [l.split("(")[1].split()[0].rstrip(")") for l in text.splitlines()
            if l.strip().startswith("ggml_add_cpu_backend_variant(")]


def test_only_the_asked_variants_stay_and_the_rest_of_the_file_is_untouched():
    text, kept, dropped = lb.select(CMAKE, ["zen4", "haswell", "x64"])
    assert kept == ["x64", "haswell", "zen4"]  # ggml's order, not the request's
    assert dropped == ["sse42", "ivybridge"]
    assert _active(text) == ["x64", "haswell", "zen4", "armv8.0_1", "apple_m1"]
    assert "        # fscore-lite: not built: ggml_add_cpu_backend_variant(sse42" in text
    assert "            # fscore-lite: not built: ggml_add_cpu_backend_variant(ivybridge" in text
    # the same lines, the dropped ones only prefixed
    assert [l.replace(lb._MARK, "") for l in text.splitlines()] == CMAKE.splitlines()


def test_all_keeps_the_file_as_it_is():
    text, kept, dropped = lb.select(CMAKE, ["all"])
    assert text == CMAKE and kept == ["x64", "sse42", "ivybridge", "haswell", "zen4"] and dropped == []


@pytest.mark.parametrize("wanted, message", [
    (["haswell", "zen5"], "unknown llama.cpp CPU variant.*zen5.*all, x64, sse42, ivybridge, haswell, zen4"),
    (["haswell", "apple_m1"], "unknown.*apple_m1"),  # another architecture's list is not the x86 one
    (["x64", "zen4"], "must include haswell"),
])
def test_a_bad_list_is_refused(wanted, message):
    with pytest.raises(lb.BuildError, match=message):
        lb.select(CMAKE, wanted)


def test_another_layout_is_refused_rather_than_built_with_every_variant():
    with pytest.raises(lb.BuildError, match="no x86 list"):
        lb.select(CMAKE.replace("if (GGML_CPU_ALL_VARIANTS)", "if (GGML_CPU_SOME_VARIANTS)"), ["haswell"])


def _sdist(path: Path, members: dict[str, str]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, body in members.items():
            data = body.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _run(*args):
    return subprocess.run([sys.executable, "-m", "fscore_lite_models.llama_build", *map(str, args)],
                          capture_output=True, text=True)


def test_the_command_unpacks_the_sdist_and_edits_its_list(tmp_path):
    sdist = _sdist(tmp_path / "llama_cpp_python-0.3.36.tar.gz", {
        "llama_cpp_python-0.3.36/pyproject.toml": "[project]\nname = 'x'\n",
        f"llama_cpp_python-0.3.36/{lb.CMAKELISTS}": CMAKE})
    out = tmp_path / "tree"
    (out / "stale").mkdir(parents=True)  # an earlier, half-done unpack is replaced
    r = _run(sdist, out, "x64", "haswell")
    assert r.returncode == 0, r.stderr
    assert "variants to build: x64 haswell (not built: sse42 ivybridge zen4)" in r.stdout
    assert not (out / "stale").exists()
    assert _active((out / "llama_cpp_python-0.3.36" / lb.CMAKELISTS).read_text()) == ["x64", "haswell", "armv8.0_1",
                                                                                      "apple_m1"]


def test_the_command_names_the_file_it_cannot_use(tmp_path):
    r = _run(tmp_path / "missing.tar.gz", tmp_path / "tree", "haswell")
    assert r.returncode == 1 and "missing.tar.gz: no such file" in r.stderr
    bad = _sdist(tmp_path / "bad.tar.gz", {"../escape/pyproject.toml": ""})
    r = _run(bad, tmp_path / "tree", "haswell")
    assert r.returncode == 1 and "error:" in r.stderr and not (tmp_path / "escape").exists()
    nolist = _sdist(tmp_path / "nolist.tar.gz", {"p/pyproject.toml": "", f"p/{lb.CMAKELISTS}": "project(ggml)\n"})
    r = _run(nolist, tmp_path / "tree2", "haswell")
    assert r.returncode == 1 and "no x86 list" in r.stderr


def test_no_common_turns_off_the_forced_common_library_and_nothing_else(tmp_path):
    top = f"if (LLAMA_BUILD)\n    {lb.COMMON_ON}\n    set(LLAMA_CURL OFF CACHE BOOL \"llama.cpp: enable curl\" FORCE)\nendif()\n"
    sdist = _sdist(tmp_path / "s.tar.gz", {"p/pyproject.toml": "", "p/CMakeLists.txt": top, f"p/{lb.CMAKELISTS}": CMAKE})
    r = _run("--no-common", sdist, tmp_path / "tree", "all")
    assert r.returncode == 0, r.stderr
    assert "without the common library" in r.stdout
    assert (tmp_path / "tree" / "p" / "CMakeLists.txt").read_text() == top.replace(
        "LLAMA_BUILD_COMMON ON", "LLAMA_BUILD_COMMON OFF")
    assert (tmp_path / "tree" / "p" / lb.CMAKELISTS).read_text() == CMAKE
    with pytest.raises(lb.BuildError, match="no `set.LLAMA_BUILD_COMMON ON"):
        lb.without_common("project(x)\n")


def test_the_makefile_builds_the_llama_cpp_python_that_pyproject_pins():
    import re

    root = Path(__file__).resolve().parents[1]
    pinned = re.search(r'"llama-cpp-python==([^"]+)"', (root / "pyproject.toml").read_text()).group(1)
    make = (root / "Makefile").read_text()
    assert re.search(r"^LLAMA_VERSION := (\S+)$", make, re.M).group(1) == pinned
    # the default list has the runtime's portable kernel and the ones test_llama_kernels.py loads
    from fscore_lite.backends.llama_kernels import PORTABLE

    variants = re.search(r"^LLAMA_VARIANTS \?= (.+)$", make, re.M).group(1).split()
    assert lb.PORTABLE == PORTABLE and PORTABLE in variants
    assert {"x64", "skylakex", "zen4", "sapphirerapids"} <= set(variants)
