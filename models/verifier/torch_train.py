"""The training loop both stages share: fixed seed, fixed threads, fixed order, AdamW.

Batches are made from pairs with the runtime's own pair encoding
(:func:`fscore_lite.backends.cross_encoder.encode_pairs`), so the ids the model learns from are
the ids the exported graph is fed. The word-embedding matrix is frozen (most of MiniLM's
parameters; updating it costs time and helps little). On CPUs with bfloat16 matrix units
(AMX / AVX512-BF16) the forward and backward passes run under bfloat16 autocast, much faster;
master weights stay fp32. AdamW runs fused where torch has the kernel. Same machine, seed and
inputs → same weights.

torch is loaded by :func:`load_torch`, with libgomp's own bounded spin-wait between parallel
regions rather than the runtime's passive waiting: a training step is hundreds of short parallel
regions, and waking sleeping threads for each one is slow (measured: docs/BENCHMARKS.md).
"""
from __future__ import annotations

import hashlib
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np


# the CPU features whose kernels torch and onnxruntime choose between: a build on a CPU with another set
# may differ in the last bits (docs/VERIFIER.md, "Same bytes")
KERNEL_FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16",
                "amx_int8", "amx_tile")


def _cpuinfo() -> tuple[str, set[str]]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown", set()
    field = lambda name: next((ln.split(":", 1)[1].strip() for ln in text.splitlines()  # noqa: E731
                               if ln.split(":", 1)[0].strip() == name), "")
    return field("model name") or "unknown", set(field("flags").split())


def cpu_has_bf16() -> bool:
    flags = _cpuinfo()[1]
    return "amx_bf16" in flags or "avx512_bf16" in flags


def cpu_record() -> dict:
    """The build machine's CPU as the build records it: its model, the kernel-relevant features it has,
    and the kernels torch chose on it (ATen's vector width, oneDNN's instruction set: ``ATEN_CPU_CAPABILITY``
    and ``ONEDNN_MAX_CPU_ISA`` cap them)."""
    import platform

    model, flags = _cpuinfo()
    torch = load_torch()
    kernels = {"aten": torch.backends.cpu.get_cpu_capability(),
               "onednn_max_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", "default")}
    return {"model": model, "machine": platform.machine(), "kernel_flags": [f for f in KERNEL_FLAGS if f in flags],
            "torch": torch.__version__, "torch_kernels": kernels}


def load_torch():
    """Import torch for training; the first import runs with ``OMP_WAIT_POLICY`` unset (libgomp's
    default: spin about 3 ms, then sleep) unless the user set it, and restores the variable after,
    so an OpenMP runtime loaded later (llama.cpp) still gets the runtime's passive default."""
    if "torch" in sys.modules:
        return sys.modules["torch"]
    from fscore_lite import USER_OMP_WAIT_POLICY

    saved = os.environ.get("OMP_WAIT_POLICY")
    if USER_OMP_WAIT_POLICY is None:
        os.environ.pop("OMP_WAIT_POLICY", None)
    try:
        import torch
    finally:
        if saved is not None:
            os.environ["OMP_WAIT_POLICY"] = saved
    return torch


def seed_everything(seed: int, threads: int) -> None:
    torch = load_torch()

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(max(1, int(threads)))


def state_sha256(model) -> str:
    """sha256 over the model's parameters and buffers (names, shapes, fp32 bytes), sorted."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(t.detach().cpu().float().contiguous().numpy().tobytes())
    return h.hexdigest()


def adamw(torch, params, lr: float):
    """AdamW (weight decay 0.01), fused into one kernel where this torch has it for the CPU."""
    try:
        return torch.optim.AdamW(params, lr=lr, weight_decay=0.01, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.AdamW(params, lr=lr, weight_decay=0.01)


@dataclass
class LoopReport:
    steps: int
    examples: int
    seconds: float
    final_loss: float
    bf16: bool


def train_loop(model, batches, loss_fn, *, lr: float, steps_total: int, warmup: float = 0.1, bf16: bool = False,
               log=print, label: str = "train") -> LoopReport:
    """Run ``loss_fn(model, batch)`` over ``batches`` (an iterable, already in its fixed order)
    with AdamW and a linear warm-up / decay schedule."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    opt = adamw(torch, params, lr)
    warm = max(1, int(warmup * steps_total))

    def schedule(step):
        return (step + 1) / warm if step < warm else max(0.0, (steps_total - step) / max(1, steps_total - warm))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    model.train()
    t0, step, seen, ema = time.monotonic(), 0, 0, None
    for batch in batches:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn(model, batch)
        loss.float().backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        seen += int(batch["labels"].shape[0])
        value = float(loss.detach())
        ema = value if ema is None else 0.98 * ema + 0.02 * value
        if step % 100 == 0 or step == steps_total:
            el = time.monotonic() - t0
            log(f"{label}: step {step}/{steps_total}, loss {ema:.4f}, {seen / el:.0f} examples/s")
        if step >= steps_total:
            break
    model.eval()
    return LoopReport(step, seen, round(time.monotonic() - t0, 1), round(ema or 0.0, 5), bf16)


def save_checkpoint(model, base: Path, dest: Path) -> Path:
    """``model`` as a Hugging Face folder at ``dest``, with ``base``'s tokenizer files."""
    import shutil

    model.save_pretrained(str(dest), safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        if (base / f).exists():
            shutil.copy2(base / f, dest / f)
    return dest


def tensors(feeds: dict[str, np.ndarray], labels) -> dict:
    import torch

    out = {k: torch.from_numpy(v) for k, v in feeds.items()}
    out["labels"] = torch.as_tensor(np.asarray(labels))
    return out


def pad_id_of(model) -> int:
    """The padding id of ``model``'s vocabulary (0 for BERT, 1 for MPNet)."""
    return int(getattr(model.config, "pad_token_id", 0) or 0)


def model_inputs(model, feeds: dict) -> dict:
    """The feeds ``model`` takes (MPNet has no token types); ``labels`` kept."""
    import inspect

    accepted = set(inspect.signature(model.forward).parameters)
    return {k: v for k, v in feeds.items() if k in accepted}


def predict_logits(model, tokenizer, pairs: list[tuple[str, str]], pad_id: int | None = None, batch_size: int = 64,
                   bf16: bool = False) -> np.ndarray:
    """Torch logits for pairs (for the SNLI test accuracy and parity checks)."""
    import torch

    from fscore_lite.backends.cross_encoder import encode_pairs

    out = []
    model.eval()
    pad = pad_id_of(model) if pad_id is None else pad_id
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        for b in range(0, len(pairs), batch_size):
            feeds = encode_pairs(tokenizer, pairs[b : b + batch_size], pad)
            z = model(**model_inputs(model, {k: torch.from_numpy(v) for k, v in feeds.items()})).logits
            out.append(z.float().numpy())
    return np.concatenate(out) if out else np.zeros((0, 3), dtype=np.float32)
