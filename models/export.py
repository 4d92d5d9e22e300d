"""Export a local Hugging Face checkpoint into a model bundle: ONNX (int8) or GGUF.

``export_model(role, checkpoint_dir, bundle_dir)`` writes ``BUNDLE/<name>/`` and records it in
the manifest; the folder is swapped in only when complete. The roles, the file kinds runtime code
asks for (``entry.file(kind)``) and the ``extra`` keys each role records: docs/MODELS.md.

Nothing here downloads. torch, transformers and optimum are imported inside the functions, so
importing this module is cheap.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from fscore_lite.errors import FscoreError
from fscore_lite.manifest import ROLES, Bundle, ModelEntry, ModelFile, describe_file, stamp_decisions

from .quantize import check_loads, external_data_files, quantize_int8

ONNX_TASKS = {
    "qg": "text2text-generation-with-past",
    "qa": "question-answering",
    "nli": "text-classification",
    "verifier": "text-classification",
    "embed": "feature-extraction",
}
T5_PARTS = (("encoder", "encoder_model.onnx"), ("decoder", "decoder_model.onnx"), ("decoder_with_past", "decoder_with_past_model.onnx"))
# Checkpoint files copied into the bundle as they are, with their kind.
SIDE_FILES = (
    ("tokenizer.json", "tokenizer"),
    ("tokenizer_config.json", "tokenizer_config"),
    ("special_tokens_map.json", "special_tokens_map"),
    ("config.json", "config"),
    ("generation_config.json", "generation_config"),
)
_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _offline() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def check_checkpoint(checkpoint_dir: str | Path) -> Path:
    """The checkpoint as a local folder with a config.json, or a FscoreError saying how to get one."""
    path = Path(checkpoint_dir).expanduser()
    fetch = (
        "fscore-lite never downloads models. On a machine with network access run\n"
        f"  huggingface-cli download ORG/MODEL --local-dir {path}\n"
        "(or `git clone https://huggingface.co/ORG/MODEL`), copy the folder here, and pass its path."
    )
    if not path.exists():
        raise FscoreError(f"checkpoint folder {path} does not exist. {fetch}")
    if not path.is_dir():
        raise FscoreError(f"checkpoint {path} is not a folder. {fetch}")
    if not (path / "config.json").exists():
        raise FscoreError(f"{path} has no config.json, so it is not a Hugging Face checkpoint folder. {fetch}")
    return path


def default_name(checkpoint: Path, role: str, quantization: str) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", checkpoint.resolve().name).strip("-.").lower() or role
    return f"{base}-{quantization.lower()}"


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def _max_length(config: dict, tok_config: dict) -> int:
    limit = tok_config.get("model_max_length")
    limit = int(limit) if isinstance(limit, (int, float)) and 0 < limit < 1_000_000 else None
    mpe = config.get("max_position_embeddings")
    if mpe:
        if config.get("model_type") in ("roberta", "xlm-roberta", "camembert", "longformer"):
            mpe -= (config.get("pad_token_id") or 1) + 1  # positions start after the pad id
        limit = min(limit, mpe) if limit else mpe
    return int(limit or 512)


def _copy_side_files(ckpt: Path, dest: Path, log) -> None:
    """Copy tokenizer and config files; build tokenizer.json from a slow tokenizer if needed."""
    for fname, _ in SIDE_FILES:
        if (ckpt / fname).exists():
            shutil.copy2(ckpt / fname, dest / fname)
    if not (dest / "tokenizer.json").exists():
        log("the checkpoint has no tokenizer.json; converting its tokenizer with transformers")
        try:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(str(ckpt), use_fast=True, local_files_only=True)
            with tempfile.TemporaryDirectory() as tmp:
                tok.save_pretrained(tmp)
                shutil.copy2(Path(tmp) / "tokenizer.json", dest / "tokenizer.json")
                for fname in ("tokenizer_config.json", "special_tokens_map.json"):
                    if not (dest / fname).exists() and (Path(tmp) / fname).exists():
                        shutil.copy2(Path(tmp) / fname, dest / fname)
        except Exception as e:  # noqa: BLE001 - any failure here means: no usable tokenizer
            raise FscoreError(
                f"could not produce tokenizer.json for {ckpt} ({type(e).__name__}: {e}); the runtime "
                "needs a fast tokenizer. Save one with `AutoTokenizer.from_pretrained(...).save_pretrained(...)` "
                "on a machine that has sentencepiece installed."
            ) from None


def _optimum_export(role: str, ckpt: Path, out: Path, log) -> None:
    from optimum.exporters.onnx import main_export

    log(f"exporting {ckpt.name} to ONNX ({ONNX_TASKS[role]}) with optimum-onnx")
    main_export(
        str(ckpt),
        str(out),
        task=ONNX_TASKS[role],
        local_files_only=True,
        library_name="transformers",
        no_post_process=True,  # qg: keep decoder and decoder_with_past as two files, no merged graph
        device="cpu",
    )


def _mlm_export(ckpt: Path, out: Path, log) -> None:
    """Export a masked LM with two outputs: ``logits`` and ``last_hidden_state``."""
    import numpy as np
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    log(f"exporting {ckpt.name} to ONNX (fill-mask, with last_hidden_state) with torch.onnx")
    model = AutoModelForMaskedLM.from_pretrained(str(ckpt), local_files_only=True, attn_implementation="eager").eval()
    tok = AutoTokenizer.from_pretrained(str(ckpt), local_files_only=True)
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in tok.model_input_names]

    class MaskedLMWithHidden(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *tensors):
            out = self.inner(**dict(zip(names, tensors)), output_hidden_states=True, return_dict=True)
            return out.logits, out.hidden_states[-1]

    sample = tok(
        ["Fact: Marie Curie won the Nobel Prize.", "Paris is the capital of France and its largest city."],
        padding=True,
        return_tensors="pt",
    )
    args = tuple(sample[n] for n in names)
    wrapper = MaskedLMWithHidden(model).eval()
    path = out / "model.onnx"
    axes = {n: {0: "batch_size", 1: "sequence_length"} for n in names}
    axes.update(logits={0: "batch_size", 1: "sequence_length"}, last_hidden_state={0: "batch_size", 1: "sequence_length"})
    with torch.no_grad():
        torch.onnx.export(
            wrapper,
            args,
            str(path),
            input_names=names,
            output_names=["logits", "last_hidden_state"],
            dynamic_axes=axes,
            opset_version=17,
            do_constant_folding=True,
            dynamo=False,
        )
        want = [t.numpy() for t in wrapper(*args)]
    # Check the graph against torch on the sample before anything is kept.
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
    got = sess.run(["logits", "last_hidden_state"], {n: a.numpy() for n, a in zip(names, args)})
    for label, g, w in zip(("logits", "last_hidden_state"), got, want):
        diff = float(np.max(np.abs(g - w)))
        if diff > 1e-3 * max(1.0, float(np.max(np.abs(w)))):
            raise FscoreError(f"the exported mlm graph differs from torch on {label} by {diff:.2e}; export aborted")


def _graph_files(role: str, onnx_dir: Path) -> list[tuple[str, Path]]:
    """(kind, fp32 graph path) for what the ONNX export produced."""
    if role == "qg":
        parts = [(kind, onnx_dir / fname) for kind, fname in T5_PARTS]
    else:
        parts = [("weights", onnx_dir / "model.onnx")]
    missing = [p.name for _, p in parts if not p.exists()]
    if missing:
        raise FscoreError(f"the ONNX export did not produce {', '.join(missing)} in {onnx_dir}")
    return parts


def _place_graphs(role, onnx_dir: Path, stage: Path, quantize: bool, keep_fp32: bool, per_channel: bool, log) -> list[tuple[str, str]]:
    """Quantize/copy graphs into ``stage``; return (kind, file name) pairs."""
    placed: list[tuple[str, str]] = []
    for kind, src in _graph_files(role, onnx_dir):
        stem = "model" if kind == "weights" else f"{kind}_model"
        if quantize:
            dst = stage / f"{stem}.onnx"
            log(f"quantizing {src.name} to int8 ({'per-channel' if per_channel else 'per-tensor'})")
            quantize_int8(src, dst, per_channel=per_channel)
            placed.append((kind, dst.name))
        if keep_fp32 or not quantize:
            fp32_name = f"{stem}.fp32.onnx" if quantize else f"{stem}.onnx"
            fp32_kind = f"{kind}_fp32" if quantize else kind
            _copy_graph(src, stage / fp32_name)
            placed.append((fp32_kind, fp32_name))
    # Side files of graphs with external data, recorded right after their graph.
    out: list[tuple[str, str]] = []
    for kind, fname in placed:
        out.append((kind, fname))
        for side in external_data_files(stage / fname):
            out.append((f"{kind}_data", side.name))
    return out


def _copy_graph(src: Path, dst: Path) -> None:
    """Copy an ONNX graph; one with external data is re-saved with a single side file."""
    if not external_data_files(src):
        shutil.copy2(src, dst)
        return
    import onnx

    model = onnx.load(str(src), load_external_data=True)
    onnx.save(model, str(dst), save_as_external_data=True, all_tensors_to_one_file=True, location=dst.name + "_data")


def _role_extra(role: str, ckpt: Path, stage: Path, placed: list[tuple[str, str]]) -> dict:
    config = _read_json(ckpt / "config.json")
    tcfg = _read_json(stage / "tokenizer_config.json")
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(stage / "tokenizer.json"))
    kinds = dict(placed)
    main_kind = "decoder_with_past" if role == "qg" else "weights"
    inputs, outputs = check_loads(stage / kinds[main_kind])
    extra: dict = {
        "model_type": config.get("model_type", ""),
        "max_length": _max_length(config, tcfg),
        "inputs": inputs,
        "outputs": outputs,
        "pad_token_id": config.get("pad_token_id"),
    }
    if role == "qg":
        enc_in, _ = check_loads(stage / kinds["encoder"])
        dec_in, dec_out = check_loads(stage / kinds["decoder"])
        extra.update(
            eos_token_id=config.get("eos_token_id"),
            decoder_start_token_id=config.get("decoder_start_token_id", config.get("pad_token_id")),
            num_decoder_layers=config.get("num_decoder_layers") or config.get("num_layers"),
            num_heads=config.get("num_heads"),
            d_kv=config.get("d_kv"),
            encoder_inputs=enc_in,
            decoder_inputs=dec_in,
            decoder_outputs=dec_out,
        )
    elif role == "qa":
        cls = tcfg.get("cls_token")
        cls = cls.get("content") if isinstance(cls, dict) else cls
        extra["cls_token_id"] = tok.token_to_id(cls) if cls else 0
    elif role in ("nli", "verifier"):
        id2label = {str(k): v for k, v in (config.get("id2label") or {}).items()}
        extra["id2label"] = id2label
        extra["labels"] = [id2label[str(i)] for i in range(len(id2label))]
    elif role == "embed":
        pooling = _read_json(ckpt / "1_Pooling" / "config.json")
        modules = json.loads((ckpt / "modules.json").read_text(encoding="utf-8")) if (ckpt / "modules.json").exists() else []
        extra["pooling"] = "cls" if pooling.get("pooling_mode_cls_token") else "mean"
        extra["normalize"] = any(str(m.get("type", "")).endswith("Normalize") for m in modules)
        extra["hidden_size"] = config.get("hidden_size")
    elif role == "mlm":
        mask = tcfg.get("mask_token")
        mask = mask.get("content") if isinstance(mask, dict) else mask
        extra["mask_token_id"] = tok.token_to_id(mask) if mask else None
        extra["hidden_size"] = config.get("hidden_size")
        extra["vocab_size"] = config.get("vocab_size")
    return extra


def _install(bundle: Bundle, stage: Path, name: str) -> None:
    """Swap the staged folder in as ``bundle/<name>``."""
    target = bundle.root / name
    old = None
    if target.exists():
        old = bundle.root / f".old-{name}-{os.getpid()}"
        os.replace(target, old)
    os.replace(stage, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def export_model(
    role: str,
    checkpoint_dir: str | Path,
    bundle_dir: str | Path,
    *,
    name: str | None = None,
    quantize: bool = True,
    keep_fp32: bool = False,
    license: str = "",
    source: str = "",
    gguf_type: str = "Q4_K_M",
    convert_script: str | Path | None = None,
    per_channel: bool = True,
    threads: int | None = None,
    extra: dict | None = None,
    log=print,
) -> ModelEntry:
    """Export the checkpoint for ``role`` into ``bundle_dir/<name>`` and record it in the manifest.

    ``quantize`` applies to ONNX roles (int8) and, for ``llm``, means "use ``gguf_type``"
    (without it the GGUF file is F16). ``extra`` is merged into the entry's ``extra`` (the
    trained verifier records its combiner and training report there). Returns the manifest
    entry that was written.
    """
    extra_in = extra
    if role not in ROLES:
        raise FscoreError(f"unknown role {role!r}; choose one of {', '.join(ROLES)}")
    ckpt = check_checkpoint(checkpoint_dir)
    if role == "llm":
        from .gguf import gguf_type as _norm

        quantization = _norm(gguf_type) if quantize else "F16"
    else:
        quantization = "int8" if quantize else "fp32"
    name = name or default_name(ckpt, role, quantization)
    if not _NAME_OK.match(name):
        raise FscoreError(f"model name {name!r} may only use letters, digits, '.', '_' and '-'")
    bundle_root = Path(bundle_dir).expanduser()
    bundle_root.mkdir(parents=True, exist_ok=True)

    _offline()
    import torch

    if threads:
        torch.set_num_threads(int(threads))
    config = _read_json(ckpt / "config.json")
    architecture = ",".join(config.get("architectures") or []) or config.get("model_type", "")

    work = Path(tempfile.mkdtemp(prefix=f".export-{name}-", dir=bundle_root))
    try:
        stage = work / name
        stage.mkdir()
        if role == "llm":
            from .gguf import build_gguf

            info = build_gguf(
                ckpt, stage / "model.gguf", quantization, convert_script=convert_script, name=name,
                threads=threads or 1, log=log,
            )
            shutil.copy2(ckpt / "config.json", stage / "config.json")
            placed = [("weights", "model.gguf"), ("config", "config.json")]
            extra = {"model_type": config.get("model_type", ""), **{k: v for k, v in info.items() if k != "architecture"}}
        else:
            onnx_dir = work / "onnx"
            onnx_dir.mkdir()
            if role == "mlm":
                _mlm_export(ckpt, onnx_dir, log)
            else:
                _optimum_export(role, ckpt, onnx_dir, log)
            _copy_side_files(ckpt, stage, log)
            placed = _place_graphs(role, onnx_dir, stage, quantize, keep_fp32, per_channel, log)
            placed += [(kind, fname) for fname, kind in SIDE_FILES if (stage / fname).exists()]
            extra = _role_extra(role, ckpt, stage, placed)
            if quantize:
                extra["quantization_scheme"] = "per-channel" if per_channel else "per-tensor"
            shutil.rmtree(onnx_dir)
        extra = {**extra, **(extra_in or {})}

        # Paths are relative to the bundle root: work/<name>/<file> becomes <name>/<file>.
        files: list[ModelFile] = [describe_file(work, f"{name}/{fname}", kind) for kind, fname in placed]
        _install(Bundle(bundle_root), stage, name)
        entry = ModelEntry(
            name=name,
            role=role,
            architecture=architecture,
            files=tuple(files),
            quantization=quantization,
            license=license,
            source=source or f"exported from a local checkpoint folder named {ckpt.resolve().name}",
            extra=stamp_decisions(extra),
        )
        bundle = Bundle(bundle_root)  # re-read: another export may have saved meanwhile
        bundle.add(entry)
        bundle.save()
        total = sum(f.size for f in files)
        log(f"{name}: {role}, {quantization}, {len(files)} files, {total / 1e6:.1f} MB -> {bundle_root / name}")
        return entry
    finally:
        shutil.rmtree(work, ignore_errors=True)
