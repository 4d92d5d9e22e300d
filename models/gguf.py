"""Causal LM checkpoints → one GGUF file for llama.cpp, then llama.cpp's own quantizer.

Two steps:

1. **Convert** a Hugging Face checkpoint folder to an F16 (or F32) GGUF file.
   :func:`convert_checkpoint` is a small built-in converter for the decoder families the
   project uses — ``qwen2`` (Qwen2 / Qwen2.5) and ``llama`` (Llama, Mistral) — written with
   the ``gguf`` package (its writer and its table of tensor names). It reads
   ``config.json``, the safetensors (or ``pytorch_model.bin``) weights and ``tokenizer.json``
   (byte-level BPE: GPT-2, Qwen2 or Llama-3 style pre-tokenization). Anything else — another
   architecture, a SentencePiece tokenizer, RoPE scaling — is refused with a message that
   points to llama.cpp's full converter: pass its path as ``convert_script`` (the file
   ``convert_hf_to_gguf.py`` of a llama.cpp checkout, or ``vendor/llama.cpp/`` inside the
   llama-cpp-python source archive) and it is run instead of the built-in one.
2. **Quantize** with ``llama_model_quantize`` from llama-cpp-python's low-level bindings,
   the same code as llama.cpp's ``llama-quantize`` tool. The type is given by name
   (:data:`GGUF_TYPES`): ``Q4_K_M`` (the default, what the packaged defaults use), ``Q8_0``,
   ``Q5_K_M``... or ``F16`` / ``F32`` for no quantization.

K-quants (``Q*_K*``) pack 256 values per block: a tensor whose rows are not a multiple of
256 wide is stored by llama.cpp in a fallback type instead (e.g. Q5_0 or Q8_0), so very small
models (the tiny test model has rows of 64) get little K-quantization. ``Q8_0`` needs rows that
are a multiple of 32 and is what the tests use.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

from fscore_lite.errors import FscoreError

# Quantization names → llama.cpp's ``llama_ftype`` values (the ones stable across releases).
GGUF_TYPES: dict[str, int] = {
    "F32": 0,
    "F16": 1,
    "Q4_0": 2,
    "Q4_1": 3,
    "Q8_0": 7,
    "Q5_0": 8,
    "Q5_1": 9,
    "Q2_K": 10,
    "Q3_K_S": 11,
    "Q3_K_M": 12,
    "Q3_K_L": 13,
    "Q4_K_S": 14,
    "Q4_K_M": 15,
    "Q5_K_S": 16,
    "Q5_K_M": 17,
    "Q6_K": 18,
    "BF16": 32,
}
UNQUANTIZED = ("F32", "F16")

# Pre-tokenizer regexes of the byte-level BPE families llama.cpp knows, as they appear in
# tokenizer.json, and the name llama.cpp gives each (GGUF key tokenizer.ggml.pre).
_PRE_REGEXES = {
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+": "qwen2",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+": "llama-bpe",
}

# model_type in config.json → GGUF architecture name; "llama" needs the q/k row permutation.
_ARCHES = {"qwen2": "qwen2", "llama": "llama", "mistral": "llama"}


def gguf_type(name: str) -> str:
    """Normalise a quantization name (``q4_k_m`` → ``Q4_K_M``) or raise a readable error."""
    key = name.strip().upper()
    if key not in GGUF_TYPES:
        raise FscoreError(f"unknown GGUF type {name!r}; choose one of {', '.join(GGUF_TYPES)}")
    return key


class UnsupportedCheckpoint(FscoreError):
    """The built-in converter cannot convert this checkpoint (llama.cpp's converter can)."""


def _unsupported(what: str) -> UnsupportedCheckpoint:
    return UnsupportedCheckpoint(
        f"{what}. The built-in GGUF converter handles qwen2/llama/mistral checkpoints with a byte-level "
        "BPE tokenizer.json only; pass --convert-script PATH/convert_hf_to_gguf.py (from a llama.cpp "
        "checkout, or vendor/llama.cpp/ in the llama-cpp-python source archive: "
        "`pip download --no-binary :all: --no-deps llama-cpp-python==0.3.36`) to use llama.cpp's converter."
    )


# --- reading the checkpoint ---------------------------------------------------------------


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def _iter_weights(ckpt: Path) -> Iterator[tuple[str, "object"]]:
    """Yield ``(name, torch tensor)`` for every tensor of the checkpoint, one file at a time."""
    import torch

    index = ckpt / "model.safetensors.index.json"
    if index.exists():
        shards = sorted(set(_read_json(index)["weight_map"].values()))
        files = [ckpt / s for s in shards]
    elif (ckpt / "model.safetensors").exists():
        files = [ckpt / "model.safetensors"]
    elif (ckpt / "pytorch_model.bin").exists():
        state = torch.load(ckpt / "pytorch_model.bin", map_location="cpu", weights_only=True)
        yield from state.items()
        return
    else:
        raise FscoreError(f"{ckpt}: no model.safetensors, model.safetensors.index.json or pytorch_model.bin")
    from safetensors import safe_open

    for f in files:
        with safe_open(str(f), framework="pt") as st:
            for key in st.keys():
                yield key, st.get_tensor(key)


def _permute_rope_rows(w, n_heads: int):
    """Reorder q/k projection rows from Hugging Face's half-split RoPE layout to GGML's
    interleaved one: within each head, output row 2j is input row j and row 2j+1 is input
    row j + head_dim/2."""
    head_dim = w.shape[0] // n_heads
    return w.reshape(n_heads, 2, head_dim // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _pre_tokenizer_name(tok_json: dict) -> str:
    pre = tok_json.get("pre_tokenizer") or {}
    if pre.get("type") == "ByteLevel" and pre.get("use_regex", True):
        return "gpt-2"
    if pre.get("type") == "Sequence":
        parts = pre.get("pretokenizers", [])
        splits = [p for p in parts if p.get("type") == "Split"]
        levels = [p for p in parts if p.get("type") == "ByteLevel"]
        if len(splits) == 1 and levels and not levels[0].get("use_regex", True):
            regex = (splits[0].get("pattern") or {}).get("Regex")
            if regex in _PRE_REGEXES:
                return _PRE_REGEXES[regex]
            raise _unsupported(f"tokenizer.json splits text with an unknown regex {regex!r}")
    raise _unsupported(f"tokenizer.json has a {pre.get('type')!r} pre-tokenizer, not byte-level BPE")


def _vocab(ckpt: Path, n_vocab: int) -> dict:
    """Tokens, token types, merges and special ids for a byte-level BPE tokenizer."""
    import gguf
    from tokenizers import Tokenizer

    tok_path = ckpt / "tokenizer.json"
    if not tok_path.exists():
        raise _unsupported(f"{ckpt} has no tokenizer.json")
    tok_json = _read_json(tok_path)
    model = tok_json.get("model", {})
    if model.get("type") != "BPE" or model.get("byte_fallback"):
        raise _unsupported("tokenizer.json is not a byte-level BPE tokenizer")
    pre = _pre_tokenizer_name(tok_json)

    by_id: dict[int, tuple[str, int]] = {i: (t, gguf.TokenType.NORMAL) for t, i in model["vocab"].items()}
    for added in tok_json.get("added_tokens", []):
        kind = gguf.TokenType.CONTROL if added.get("special") else gguf.TokenType.USER_DEFINED
        by_id[added["id"]] = (added["content"], kind)
    size = max(n_vocab, max(by_id) + 1)
    tokens, types = [], []
    for i in range(size):
        text, kind = by_id.get(i, (f"[PAD{i}]", gguf.TokenType.UNUSED))
        tokens.append(text)
        types.append(int(kind))
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]

    tcfg = _read_json(ckpt / "tokenizer_config.json")
    ids = {t: i for i, (t, _) in by_id.items()}

    def special_id(key: str) -> int | None:
        value = tcfg.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        return ids.get(value) if value else None

    tokenizer = Tokenizer.from_file(str(tok_path))
    bos, eos, pad, unk = (special_id(k) for k in ("bos_token", "eos_token", "pad_token", "unk_token"))
    probe = tokenizer.encode("a", add_special_tokens=True).ids
    gen = _read_json(ckpt / "generation_config.json")
    if eos is None:
        gen_eos = gen.get("eos_token_id")
        eos = gen_eos[0] if isinstance(gen_eos, list) else gen_eos
    template = tcfg.get("chat_template")
    if template is None and (ckpt / "chat_template.jinja").exists():
        template = (ckpt / "chat_template.jinja").read_text(encoding="utf-8")
    return {
        "pre": pre,
        "tokens": tokens,
        "types": types,
        "merges": merges,
        "bos": bos,
        "eos": eos,
        "pad": pad,
        "unk": unk,
        "add_bos": bool(bos is not None and probe and probe[0] == bos),
        "add_eos": bool(eos is not None and len(probe) > 1 and probe[-1] == eos),
        "chat_template": template if isinstance(template, str) else None,
    }


# --- conversion -----------------------------------------------------------------------------


def convert_checkpoint(ckpt: str | Path, out_path: str | Path, *, outtype: str = "F16", name: str = "", log=print) -> dict:
    """Write the causal LM in ``ckpt`` to ``out_path`` as an F16 or F32 GGUF file.

    Returns a summary: GGUF architecture, context length, vocabulary size, tensor count.
    """
    import gguf
    import numpy as np
    import torch

    ckpt, out_path = Path(ckpt), Path(out_path)
    outtype = gguf_type(outtype)
    if outtype not in UNQUANTIZED:
        raise ValueError("convert_checkpoint writes F16 or F32; quantize afterwards")
    cfg = _read_json(ckpt / "config.json")
    model_type = cfg.get("model_type", "")
    if model_type not in _ARCHES:
        raise _unsupported(f"model_type {model_type!r} (architectures {cfg.get('architectures')})")
    if cfg.get("rope_scaling"):
        raise _unsupported(f"the checkpoint uses RoPE scaling {cfg['rope_scaling']}")
    arch_name = _ARCHES[model_type]
    arch = next(a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == arch_name)

    n_layers = cfg["num_hidden_layers"]
    n_heads = cfg["num_attention_heads"]
    n_kv = cfg.get("num_key_value_heads") or n_heads
    hidden = cfg["hidden_size"]
    head_dim = cfg.get("head_dim") or hidden // n_heads
    tied = bool(cfg.get("tie_word_embeddings", False))
    vocab = _vocab(ckpt, cfg["vocab_size"])

    out_path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(out_path), arch_name, use_temp_file=True)
    w.add_name(name or ckpt.name)
    w.add_context_length(cfg.get("max_position_embeddings", 4096))
    w.add_embedding_length(hidden)
    w.add_block_count(n_layers)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(n_heads)
    w.add_head_count_kv(n_kv)
    if head_dim != hidden // n_heads:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(float(cfg.get("rope_theta", 10000.0)))
    w.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps", 1e-6)))
    w.add_file_type(GGUF_TYPES[outtype])
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_vocab_size(len(vocab["tokens"]))

    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(vocab["pre"])
    w.add_token_list(vocab["tokens"])
    w.add_token_types(vocab["types"])
    w.add_token_merges(vocab["merges"])
    for key, add in (("bos", w.add_bos_token_id), ("eos", w.add_eos_token_id), ("pad", w.add_pad_token_id)):
        if vocab[key] is not None:
            add(vocab[key])
    w.add_add_bos_token(vocab["add_bos"])
    w.add_add_eos_token(vocab["add_eos"])
    if vocab["chat_template"]:
        w.add_chat_template(vocab["chat_template"])

    names = gguf.get_tensor_name_map(arch, n_layers)
    half = np.float16 if outtype == "F16" else np.float32
    count = 0
    for key, tensor in _iter_weights(ckpt):
        if key.endswith("rotary_emb.inv_freq") or (tied and key == "lm_head.weight"):
            continue
        target = names.get_name(key, try_suffixes=(".weight", ".bias"))
        if target is None:
            raise _unsupported(f"unexpected tensor {key!r} in the checkpoint")
        data = tensor.to(torch.float32)
        if arch_name == "llama" and (".q_proj." in key or ".k_proj." in key):
            data = _permute_rope_rows(data, n_heads if ".q_proj." in key else n_kv)
        arr = data.numpy()
        # Norms and biases stay F32 (llama.cpp expects that); matrices take the output type.
        arr = arr.astype(half if arr.ndim >= 2 else np.float32)
        w.add_tensor(target, arr)
        count += 1
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    log(f"wrote {out_path.name}: {arch_name}, {count} tensors, {len(vocab['tokens'])} tokens ({outtype})")
    return {
        "architecture": arch_name,
        "context_length": cfg.get("max_position_embeddings", 4096),
        "n_vocab": len(vocab["tokens"]),
        "tensors": count,
        "tokenizer_pre": vocab["pre"],
    }


def convert_with_script(script: str | Path, ckpt: str | Path, out_path: str | Path, *, outtype: str = "F16", log=print) -> dict:
    """Run llama.cpp's ``convert_hf_to_gguf.py`` (with its bundled ``gguf-py`` first on the path)."""
    script = Path(script)
    if not script.is_file():
        raise FscoreError(f"convert script {script} does not exist")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    gguf_py = script.parent / "gguf-py"
    if gguf_py.is_dir():
        env["PYTHONPATH"] = os.pathsep.join([str(gguf_py), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    cmd = [sys.executable, str(script), str(ckpt), "--outfile", str(out_path), "--outtype", gguf_type(outtype).lower()]
    log(f"running {script.name} on {ckpt}")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0 or not Path(out_path).exists():
        raise FscoreError(f"{script.name} failed (exit {proc.returncode}):\n{proc.stderr.strip()[-3000:]}")
    cfg = _read_json(Path(ckpt) / "config.json")
    return {"architecture": cfg.get("model_type", ""), "context_length": cfg.get("max_position_embeddings")}


# --- quantization ---------------------------------------------------------------------------


def quantize_gguf(src: str | Path, dst: str | Path, qtype: str, *, threads: int = 1, log=print) -> Path:
    """Quantize the GGUF file ``src`` into ``dst`` with llama.cpp (``llama_model_quantize``)."""
    import ctypes

    try:
        import llama_cpp
    except ImportError as e:  # pragma: no cover - llama-cpp-python is a runtime dependency
        raise FscoreError(f"llama-cpp-python is needed to quantize GGUF files ({e})") from None
    qtype = gguf_type(qtype)
    params = llama_cpp.llama_model_quantize_default_params()
    params.nthread = max(1, int(threads))
    params.ftype = GGUF_TYPES[qtype]
    llama_cpp.llama_backend_init()
    # llama.cpp logs a dozen lines per tensor: collect them, and show them only on failure.
    import llama_cpp._logger as cpp_logging

    lines: list[str] = []

    @llama_cpp.llama_log_callback
    def collect(level, text, user_data):
        lines.append(text.decode("utf-8", "replace"))

    llama_cpp.llama_log_set(collect, ctypes.c_void_p(0))
    try:
        rc = llama_cpp.llama_model_quantize(str(src).encode("utf-8"), str(dst).encode("utf-8"), ctypes.byref(params))
    finally:
        llama_cpp.llama_log_set(cpp_logging.llama_log_callback, ctypes.c_void_p(0))
    if rc != 0 or not Path(dst).exists():
        tail = "".join(lines)[-3000:]
        raise FscoreError(f"llama.cpp could not quantize {Path(src).name} to {qtype} (status {rc}):\n{tail}")
    fallbacks = sum("falling back" in line for line in lines)
    if fallbacks:
        log(f"{fallbacks} tensor(s) are too narrow for {qtype} and were stored in a fallback type")
    return Path(dst)


def build_gguf(
    ckpt: str | Path,
    out_path: str | Path,
    qtype: str = "Q4_K_M",
    *,
    convert_script: str | Path | None = None,
    name: str = "",
    threads: int = 1,
    log=print,
) -> dict:
    """Convert (built-in or ``convert_script``) and quantize: the whole ``llm`` export."""
    qtype = gguf_type(qtype)
    out_path = Path(out_path)
    base_type = qtype if qtype in UNQUANTIZED else "F16"
    with tempfile.TemporaryDirectory(prefix="gguf-", dir=out_path.parent) as tmp:
        base = out_path if qtype in UNQUANTIZED else Path(tmp) / f"base-{base_type.lower()}.gguf"
        if convert_script:
            info = convert_with_script(convert_script, ckpt, base, outtype=base_type, log=log)
        else:
            info = convert_checkpoint(ckpt, base, outtype=base_type, name=name, log=log)
        if qtype not in UNQUANTIZED:
            log(f"quantizing to {qtype} with llama.cpp")
            quantize_gguf(base, out_path, qtype, threads=threads, log=log)
    info["gguf_type"] = qtype
    return info
