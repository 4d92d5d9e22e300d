"""bench.kernel_logits: two builds of llama-cpp-python compared by the bits a kernel computes."""
from pathlib import Path

import pytest

pytestmark = pytest.mark.llm


def test_a_build_agrees_with_itself_and_names_its_kernel(capsys):
    import llama_cpp

    from bench.kernel_logits import main

    site = str(Path(llama_cpp.__file__).resolve().parents[1])
    assert main(["--site", site, "--site", site]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "the same bits"
    assert out[0] == out[1] and out[0].startswith(f"{site}/llama_cpp: kernel haswell, logits ")


def test_a_missing_model_fails_with_the_childs_error(tmp_path, capsys):
    from bench.kernel_logits import main

    assert main(["--model", str(tmp_path / "none.gguf")]) != 0
    assert "none.gguf" in capsys.readouterr().err
