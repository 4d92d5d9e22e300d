"""``fscore-lite models`` / ``python -m fscore_lite_models``: list, verify, install-default, export.

Most tests use a hand-made bundle (no torch needed); the ones marked ``export`` use the tiny
exported bundle from conftest.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fscore_lite.commands.models import app
from fscore_lite.errors import FscoreError, ModelIntegrityError
from fscore_lite.manifest import Bundle, ModelEntry, describe_file

REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()


def _flip_byte(path: Path, offset: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    i = len(data) // 2 if offset is None else offset
    data[i] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.fixture()
def fake_bundle(tmp_path) -> Path:
    """A bundle with two models made of random bytes: enough for list and verify."""
    root = tmp_path / "bundle"
    bundle = Bundle(root)
    for name, role, quant, files in (
        ("toy-embed", "embed", "int8", (("model.onnx", "weights", 3000), ("tokenizer.json", "tokenizer", 200))),
        ("toy-llm", "llm", "Q8_0", (("model.gguf", "weights", 5000),)),
    ):
        (root / name).mkdir(parents=True)
        for fname, _, size in files:
            (root / name / fname).write_bytes(os.urandom(size))
        bundle.add(ModelEntry(
            name=name, role=role, architecture="toy", quantization=quant, license="MIT (toy)", source="test",
            files=tuple(describe_file(root, f"{name}/{fname}", kind) for fname, kind, _ in files),
        ))
    bundle.save()
    return root


def test_list_table(fake_bundle):
    result = runner.invoke(app, ["list", "--models-dir", str(fake_bundle)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "ROLE", "QUANT", "SIZE", "SHA256", "LICENCE"]
    entries = Bundle(fake_bundle).entries
    llm_line = next(line for line in lines if line.startswith("toy-llm"))
    assert "llm" in llm_line and "Q8_0" in llm_line and "5.0 KB" in llm_line and "MIT (toy)" in llm_line
    assert entries["toy-llm"].sha256[:12] in llm_line
    assert lines.index(llm_line) == 1  # llm first, then embed (role order)


def test_list_uses_settings_env(fake_bundle, tmp_path, monkeypatch):
    monkeypatch.setenv("FSCORE_LITE_MODELS", str(fake_bundle))
    assert "toy-embed" in runner.invoke(app, ["list"]).stdout
    monkeypatch.delenv("FSCORE_LITE_MODELS")
    monkeypatch.setenv("FSCORE_LITE_HOME", str(tmp_path / "home"))
    result = runner.invoke(app, ["list"])
    assert result.exit_code == 0 and "no models in" in result.stdout and str(tmp_path / "home" / "models") in result.stdout


def test_verify_ok_then_names_the_damaged_file(fake_bundle):
    result = runner.invoke(app, ["verify", "--models-dir", str(fake_bundle)])
    assert result.exit_code == 0, result.output
    assert "ok" in result.stdout and "toy-embed" in result.stdout
    _flip_byte(fake_bundle / "toy-embed" / "model.onnx")
    result = runner.invoke(app, ["verify", "--models-dir", str(fake_bundle)])
    assert result.exit_code == 1
    assert "toy-embed/model.onnx" in result.stderr and "toy-llm" not in result.stderr
    (fake_bundle / "toy-llm" / "model.gguf").unlink()
    result = runner.invoke(app, ["verify", "--models-dir", str(fake_bundle)])
    assert result.exit_code == 1 and "toy-llm/model.gguf" in result.stderr and "missing" in result.stderr


def test_verify_rehashes_even_when_size_and_mtime_are_kept(fake_bundle):
    bundle = Bundle(fake_bundle)
    entry = bundle.get("toy-embed")
    path = bundle.verified_path(entry)  # now in the in-process hash cache
    st = path.stat()
    _flip_byte(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # a tampering that hides the change
    result = runner.invoke(app, ["verify", "--models-dir", str(fake_bundle)])
    assert result.exit_code == 1 and "toy-embed/model.onnx" in result.stderr


def test_verify_without_manifest_is_an_error(tmp_path):
    from fscore_lite.cli import main

    with pytest.raises(SystemExit) as e:
        main(["models", "verify", "--models-dir", str(tmp_path)])
    assert e.value.code == 2


def test_install_default_passes_names(monkeypatch, tmp_path):
    import fscore_lite_models.defaults as defaults

    calls = []
    monkeypatch.setattr(defaults, "install_default", lambda root, names, log: calls.append((Path(root), names)))
    result = runner.invoke(app, ["install-default", "0.5b", "minilm", "--models-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert calls == [(tmp_path, ["0.5b", "minilm"])]
    runner.invoke(app, ["install-default", "--models-dir", str(tmp_path)])
    assert calls[-1] == (tmp_path, [])  # empty = all defaults
    result = runner.invoke(app, ["install-default", "7b", "--models-dir", str(tmp_path)])
    assert isinstance(result.exception, FscoreError) and "7b" in str(result.exception)
    assert len(calls) == 2


def test_commands_do_not_import_torch(fake_bundle, tmp_path):
    """list, verify and a refused export run without importing torch or transformers."""
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from fscore_lite.commands.models import app\n"
        f"r = CliRunner().invoke(app, ['list', '--models-dir', {str(fake_bundle)!r}]); assert r.exit_code == 0\n"
        f"r = CliRunner().invoke(app, ['verify', '--models-dir', {str(fake_bundle)!r}]); assert r.exit_code == 0\n"
        f"r = CliRunner().invoke(app, ['export', 'qa', {str(tmp_path / 'missing')!r}, '-o', {str(tmp_path / 'b')!r}])\n"
        "assert 'huggingface-cli download' in str(r.exception)\n"
        "bad = [m for m in ('torch', 'transformers', 'optimum') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_python_m_models(fake_bundle, tmp_path):
    """The build step is installed as fscore_lite_models (run outside the repo: not the folder models/)."""
    env = dict(os.environ, FSCORE_LITE_MODELS=str(fake_bundle))
    proc = subprocess.run([sys.executable, "-m", "fscore_lite_models", "list"], cwd=tmp_path, capture_output=True,
                          text=True, env=env)
    assert proc.returncode == 0 and "toy-llm" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "fscore_lite_models", "export", "qa", str(tmp_path / "nope")],
                          cwd=tmp_path, capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "huggingface-cli download" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.export
def test_verify_tiny_bundle_and_flipped_byte(tiny_bundle, tmp_path):
    copy = tmp_path / "bundle"
    shutil.copytree(tiny_bundle, copy)
    result = runner.invoke(app, ["verify", "--models-dir", str(copy)])
    assert result.exit_code == 0, result.output
    for name in ("tiny-qg", "tiny-qa", "tiny-nli", "tiny-embed", "tiny-mlm"):
        assert name in result.stdout
    bundle = Bundle(copy)
    qg = bundle.get("tiny-qg")
    damaged = copy / qg.file("decoder_with_past").path
    _flip_byte(damaged, offset=damaged.stat().st_size - 10)
    result = runner.invoke(app, ["verify", "--models-dir", str(copy)])
    assert result.exit_code == 1 and "tiny-qg/decoder_with_past_model.onnx" in result.stderr
    with pytest.raises(ModelIntegrityError, match="decoder_with_past_model.onnx"):
        Bundle(copy).verified_path(qg, "encoder")  # any file of the entry failing refuses the entry
    Bundle(copy).verified_path(bundle.get("tiny-qa"))  # other models are unaffected


@pytest.mark.export
def test_cli_export(tiny_checkpoints, tmp_path):
    out = tmp_path / "bundle"
    result = runner.invoke(app, [
        "export", "nli", str(tiny_checkpoints["nli"]), "-o", str(out), "--name", "cli-nli", "--no-quantize",
        "--license", "MIT", "--source", "tiny", "--threads", "1",
    ])
    assert result.exit_code == 0, result.output
    entry = Bundle(out).get("cli-nli")
    assert entry.quantization == "fp32" and entry.license == "MIT" and entry.source == "tiny"
    assert result.stdout.startswith("cli-nli\tnli\tfp32\t")
    result = runner.invoke(app, ["export", "llm", str(tiny_checkpoints["llm"]), "-o", str(out), "--gguf-type", "Q8_0",
                                 "--threads", "1"])
    if result.exception and "llama-cpp-python" in str(result.exception):
        pytest.skip("llama-cpp-python is not installed")
    assert result.exit_code == 0, result.output
    names = sorted(Bundle(out).entries)
    assert names == ["cli-nli", "llm-q8_0"]  # default name: checkpoint folder + quantization
    assert runner.invoke(app, ["verify", "--models-dir", str(out)]).exit_code == 0
