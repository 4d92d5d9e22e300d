"""llama.cpp's CPU kernel: chosen by --llm-kernel, loaded once a process, recorded, part of the cache key.

`make install` builds llama-cpp-python with every x86-64 kernel as a loadable library; these tests
run on that build (CI installs it the same way) and fail, not skip, when the variants are missing.
"""
import json
import subprocess
import sys

import pytest

from fscore_lite.backends import llama_kernels as lk
from fscore_lite.errors import FscoreError
from fscore_lite.settings import Settings

pytestmark = pytest.mark.llm


def test_the_build_has_the_portable_and_the_best_kernels():
    variants = lk.find_variants()
    assert lk.PORTABLE in variants, f"llama.cpp was built without loadable CPU variants ({variants}): run `make install`"
    assert {"x64", "haswell", "skylakex", "zen4", "sapphirerapids"} <= set(variants)
    assert lk.resolve_kernel("portable") == "haswell"
    best = lk.resolve_kernel("auto")
    assert best in variants and best not in lk.NEEDS_NAMING


@pytest.mark.parametrize("bad", ["", "../zen4", "Zen4", "zen4;rm", 4, None, "x" * 41])
def test_a_bad_kernel_name_is_refused_where_settings_are_made(bad):
    with pytest.raises(FscoreError, match="--llm-kernel must be"):
        Settings(llm_kernel=bad)


def test_the_kernel_comes_from_the_environment_when_not_given(monkeypatch):
    monkeypatch.setenv("FSCORE_LITE_LLM_KERNEL", "auto")
    assert Settings().llm_kernel == "auto"
    assert Settings().with_(llm_kernel="zen4").llm_kernel == "zen4"


def _fake_build(monkeypatch, scores: dict):
    variants = {name: f"/x/libggml-cpu-{name}.so" for name in scores}
    monkeypatch.setattr(lk, "_score", lambda path: scores[str(path).rsplit("-", 1)[-1][:-3]])
    return variants


def test_auto_takes_the_best_scored_kernel_but_never_amx_unless_named(monkeypatch):
    variants = _fake_build(monkeypatch, {"x64": 1, "haswell": 40, "zen4": 90, "sapphirerapids": 120})
    assert lk._pick("auto", variants) == "zen4"
    assert lk._pick("portable", variants) == "haswell"
    assert lk._pick("sapphirerapids", variants) == "sapphirerapids"  # named: allowed where the CPU has it


def test_a_kernel_this_cpu_lacks_is_refused_before_it_can_die_of_sigill(monkeypatch):
    variants = _fake_build(monkeypatch, {"x64": 1, "haswell": 40, "zen4": 0})
    with pytest.raises(FscoreError, match="lacks an instruction set.*illegal instruction"):
        lk._pick("zen4", variants)
    with pytest.raises(FscoreError, match="no such kernel.*portable, auto, x64, haswell, zen4"):
        lk._pick("cooperlake", variants)
    no_avx2 = _fake_build(monkeypatch, {"x64": 1, "haswell": 0})
    with pytest.raises(FscoreError, match="lacks AVX2.*--llm-kernel auto"):
        lk._pick("portable", no_avx2)
    assert lk._pick("auto", no_avx2) == "x64"


def test_a_build_without_variants_runs_its_built_in_kernel(monkeypatch):
    monkeypatch.setattr(lk, "find_variants", lambda: {})
    monkeypatch.setattr(lk, "_loaded", None)
    assert lk.resolve_kernel("portable") == lk.resolve_kernel("auto") == "built-in"
    with pytest.raises(FscoreError, match="one built-in kernel and no loadable variants"):
        lk.resolve_kernel("zen4")


RUN = """
import json, sys
from fscore_lite.backends.llama_kernels import ensure_kernel
from fscore_lite.backends.llm import load_llm
from fscore_lite.errors import FscoreError
from fscore_lite.settings import Settings
s = Settings(threads=1, llm=sys.argv[1], llm_kernel=sys.argv[2])
llm = load_llm(s)
text = llm.generate("Andreas Kisser is a Brazilian guitarist. He was born in", max_tokens=12)
other = "portable" if llm.kernel.name != "haswell" else "zen4"
try:
    ensure_kernel(other)
    second = "allowed"
except FscoreError as e:
    second = str(e)
print(json.dumps({"kernel": llm.kernel.to_json(), "numerics": llm._numerics, "text": text, "second": second}))
"""


def _run(llm: str, kernel: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", RUN, llm, kernel], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_each_kernel_is_recorded_and_keys_the_call_cache(settings_1t):
    portable = _run(settings_1t.llm, "portable")
    assert portable["kernel"] == {"requested": "portable", "ran": "haswell", "features": lk.PORTABLE_FEATURES}
    assert "cpu" not in portable["numerics"]  # the AVX2 kernel's calls keep the keys they always had
    assert "needs a process of its own" in portable["second"]  # no second kernel in one process

    best = lk.resolve_kernel("auto")
    auto = _run(settings_1t.llm, "auto")
    assert auto["kernel"]["ran"] == best
    if auto["kernel"]["features"] != lk.PORTABLE_FEATURES:
        # other instruction sets, other bits: their calls are cached under their own key
        assert auto["numerics"]["cpu"] == auto["kernel"]["features"]
        assert "AVX2 = 1" in auto["numerics"]["cpu"] and auto["numerics"]["cpu"] != lk.PORTABLE_FEATURES
    # the same kernel twice gives the same text
    assert _run(settings_1t.llm, "auto")["text"] == auto["text"]


def test_cli_refuses_a_kernel_the_build_does_not_have_before_any_model_loads(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"topic": "Ada Lovelace", "output": "Ada was a mathematician."}) + "\n")
    proc = subprocess.run([sys.executable, "-m", "fscore_lite", "score", str(src), "--llm-kernel", "pentium2", "-q",
                           "--models-dir", str(tmp_path / "none")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "pentium2" in proc.stderr and "portable, auto" in proc.stderr
    assert not (tmp_path / "in.factscore.jsonl").exists()
