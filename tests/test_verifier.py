"""The trained verifier: tiny end-to-end training, determinism, graphs, combiner, runtime, CLI.

The tiny trainings use a tiny random BERT (``fscore_lite_models.tiny``), a dozen made-up
SNLI-format pairs and three annotated topics, so they take seconds; the store is embedded
with the real installed all-MiniLM-L6-v2. The last tests use the real verifier that
``make test`` builds (``fscore-lite models train verifier``).
"""
from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from fscore_lite.factscore.calibration import GIVEN, Calibration
from fscore_lite.factscore.combiner import Combiner, fit_logistic
from fscore_lite.factscore.page_features import FEATURES, PageIndex, fact_features
from fscore_lite.factscore.trained import CE_FEATURES, POSITION_FEATURES, evidence_window, passage_sentences
from fscore_lite.manifest import Bundle
from fscore_lite.settings import DEFAULT_EMBED, Settings

pytestmark = pytest.mark.export

TOPICS = 3
SNLI = [
    ("A man is playing a guitar on stage.", "A man plays music.", "entailment"),
    ("A man is playing a guitar on stage.", "A woman is sleeping.", "contradiction"),
    ("A man is playing a guitar on stage.", "The man is famous.", "neutral"),
    ("Two dogs run through a field.", "Animals are outside.", "entailment"),
    ("Two dogs run through a field.", "The dogs are asleep indoors.", "contradiction"),
    ("Two dogs run through a field.", "The dogs are chasing a ball.", "neutral"),
    ("A child eats an apple in the kitchen.", "A kid is eating.", "entailment"),
    ("A child eats an apple in the kitchen.", "The child is swimming.", "contradiction"),
    ("A child eats an apple in the kitchen.", "The apple is red.", "neutral"),
    ("A woman reads a book on a bench.", "Someone is reading.", "entailment"),
    ("A woman reads a book on a bench.", "The woman is running a race.", "contradiction"),
    ("A woman reads a book on a bench.", "The book is a novel.", "neutral"),
]


def _snli(tmp: Path) -> dict[str, Path]:
    tmp.mkdir(parents=True, exist_ok=True)
    rows = "".join(json.dumps({"sentence1": a, "sentence2": b, "gold_label": y}) + "\n" for a, b, y in SNLI)
    rows += json.dumps({"sentence1": "x", "sentence2": "y", "gold_label": "-"}) + "\n"  # no gold label: dropped
    (tmp / "train.jsonl").write_text(rows, encoding="utf-8")
    (tmp / "test.jsonl").write_text(rows, encoding="utf-8")
    return {"train": tmp / "train.jsonl", "test": tmp / "test.jsonl"}


def _tiny_data(src: Path, dest: Path, n: int = TOPICS) -> Path:
    pages = [json.loads(x) for x in (src / "wiki-factscore-dev" / "pages.jsonl").read_text().splitlines()]
    keep = sorted(p["topic"] for p in pages)[:n]
    (dest / "wiki-factscore-dev").mkdir(parents=True)
    (dest / "factscore-labeled").mkdir()
    (dest / "wiki-factscore-dev" / "pages.jsonl").write_text(
        "".join(json.dumps(p) + "\n" for p in pages if p["topic"] in keep), encoding="utf-8")
    for f in sorted((src / "factscore-labeled").glob("*.jsonl")):
        lines = [x for x in f.read_text().splitlines() if json.loads(x)["topic"] in keep]
        (dest / "factscore-labeled" / f.name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dest


@pytest.fixture(scope="module")
def tiny_inputs(tmp_path_factory, data_dir, minilm_bundle_dir):
    from fscore_lite_models.tiny import tiny_bert_embed

    root = tmp_path_factory.mktemp("verifier-inputs")
    ckpt = tiny_bert_embed(root / "tiny-bert")
    return {"snli": _snli(root / "snli"), "checkpoint": ckpt, "data": _tiny_data(data_dir, root / "data"),
            "embed_bundle": minilm_bundle_dir}


def _bundle_with_embedder(src: Path, dest: Path) -> Path:
    bundle = Bundle(src)
    entry = bundle.get(DEFAULT_EMBED)
    dest.mkdir(parents=True)
    shutil.copytree(src / entry.name, dest / entry.name)
    out = Bundle(dest)
    out.add(entry)
    out.save()
    return dest


def _train(tiny_inputs, root: Path, **cfg_kw):
    from fscore_lite_models.verifier.build import SnliConfig, VerifierConfig, train_verifier

    bundle_dir = _bundle_with_embedder(tiny_inputs["embed_bundle"], root / "models")
    settings = Settings(home=root / "home", threads=1)
    cfg = VerifierConfig(threads=1, folds=2, snli=SnliConfig(pairs=12, batch_size=4, max_length=32, epochs=2.0),
                         **cfg_kw)
    report = train_verifier(bundle_dir, settings, cfg, data=tiny_inputs["data"], log=lambda m: None,
                            snli=tiny_inputs["snli"], checkpoint=tiny_inputs["checkpoint"])
    return bundle_dir, settings, report


@pytest.fixture(scope="module")
def tiny_build(tmp_path_factory, tiny_inputs):
    root = tmp_path_factory.mktemp("verifier-a")
    return _train(tiny_inputs, root)


def test_tiny_training_writes_both_entries_with_their_records(tiny_build):
    bundle_dir, _, report = tiny_build
    bundle = Bundle(bundle_dir)
    nli, ver = bundle.get("minilm-l6-snli-nli"), bundle.get("minilm-l6-factscore-verifier")
    assert nli.role == "nli" and ver.role == "verifier"
    assert {f.kind for f in nli.files} >= {"weights", "weights_fp32", "tokenizer", "config"}
    assert ver.files == nli.files  # the verifier runs the NLI graph; it adds the combiner
    assert nli.extra["labels"] == ["entailment", "neutral", "contradiction"]
    comb = ver.extra["combiner"]
    assert tuple(comb["features"]) == CE_FEATURES + FEATURES + POSITION_FEATURES
    assert len(comb["coef"]) == len(comb["mean"]) == len(comb["scale"]) == len(comb["features"])
    assert set(comb) == {"features", "mean", "scale", "coef", "intercept"}  # no threshold, no share means
    assert ver.extra["recipe"] == 7
    # no own-facts file with other data: one calibration, of given facts, fitted on the paper's facts' silver labels
    (cal,) = [Calibration.from_json(c) for c in ver.extra["calibrations"]]
    t = ver.extra["training"]
    assert cal.facts == GIVEN and cal.scale > 0 and 0.0 < cal.prior < 1.0 and cal.n_facts == t["facts"]["model"]
    assert {r["subject"] for r in t["silver_labels"]["model"]} == {"InstructGPT", "ChatGPT", "PerplexityAI"}
    assert t["snli"]["train_pairs"] == 12 and t["snli"]["test_pairs"] == 12  # the "-" pair is dropped
    assert set(t["inputs_sha256"]) >= {"snli_train", "snli_test", "checkpoint/model.safetensors",
                                       "factscore-labeled/ChatGPT.jsonl", "wiki-factscore-dev/pages.jsonl"}
    assert all(len(h) == 64 for h in t["inputs_sha256"].values())
    assert t["config"]["folds"] == 2 and t["config"]["seed"] == 0 and t["training_topics"] == TOPICS
    assert len(t["topics"]) == TOPICS and t["facts"]["human"] > 50 and t["facts"]["model"] > 50
    # the held-out report: the LM held out, and topics held out, each with every subject
    for hold in ("lm", "topic"):
        assert {r["subject"] for r in t["held_out"][hold]["model"]} == {"InstructGPT", "ChatGPT", "PerplexityAI"}
    # the machine and the kernels that trained the weights: on the verifier and on the NLI model it runs
    import torch

    cpu = t["build_cpu"]
    assert cpu["torch"] == torch.__version__ and cpu["torch_kernels"]["aten"] == torch.backends.cpu.get_cpu_capability()
    assert t["snli_stage_cpu"] is None and nli.extra["training"]["build_cpu"] == cpu
    assert report == t


def test_exported_graph_matches_torch_and_int8_agrees(tiny_build):
    checks = tiny_build[2]["graph_checks"]
    assert checks["fp32_onnx_vs_torch_max_abs_diff"] < 1e-4
    assert checks["int8_vs_fp32_argmax_agreement"] >= 0.75


def test_two_tiny_trainings_give_the_same_weights(tmp_path, tiny_inputs, tiny_build):
    bundle_dir, _, report = _train(tiny_inputs, tmp_path)
    assert report["snli"]["weights_sha256"] == tiny_build[2]["snli"]["weights_sha256"]
    a, b = Bundle(tiny_build[0]).get("minilm-l6-snli-nli"), Bundle(bundle_dir).get("minilm-l6-snli-nli")
    assert [(f.kind, f.sha256) for f in a.files] == [(f.kind, f.sha256) for f in b.files]
    assert report["held_out"] == tiny_build[2]["held_out"]
    assert (Bundle(bundle_dir).get("minilm-l6-factscore-verifier").decisions_sha256
            == Bundle(tiny_build[0]).get("minilm-l6-factscore-verifier").decisions_sha256)
    assert (Bundle(bundle_dir).get("minilm-l6-factscore-verifier").extra["combiner"]
            == Bundle(tiny_build[0]).get("minilm-l6-factscore-verifier").extra["combiner"])


def test_runtime_applies_the_recorded_combiner(tiny_build):
    from fscore_lite.backends.embed import SentenceEmbedder
    from fscore_lite.factscore.retrieve import Retriever
    from fscore_lite.factscore.trained import TrainedVerifier
    from fscore_lite.build_step import ensure_store
    from fscore_lite.training.labeled import wiki_pages
    from fscore_lite.store import open_store

    bundle_dir, settings, _ = tiny_build
    bundle = Bundle(bundle_dir)
    entry = bundle.get("minilm-l6-factscore-verifier")
    _, files = wiki_pages(entry.extra["training"]["data"])
    store = open_store(ensure_store(files, settings.with_(models_dir=bundle_dir), None))
    topic = store.titles()[0]
    retriever = Retriever(store, SentenceEmbedder.from_bundle(bundle, store.embed_model), 5)
    verifier = TrainedVerifier.from_bundle(bundle, store)
    cal = verifier.calibrations[GIVEN]
    facts = [f"{topic} is a person.", f"{topic} was born on the Moon in 1700."]
    evidence = [retriever.retrieve(topic, f) for f in facts]
    verdicts = verifier.verify(topic, facts, evidence, cal)
    c = entry.extra["combiner"]
    for fact, ev, v, pos in zip(facts, evidence, verdicts, (0.0, 1.0)):
        feats = verifier.features(topic, fact, ev, pos)[0]
        assert {k: round(x, 5) for k, x in feats.items()} == v.features
        z = sum((feats[n] - m) / s * w for n, m, s, w in zip(c["features"], c["mean"], c["scale"], c["coef"]))
        p = 1 / (1 + math.exp(-(cal.scale * (z + c["intercept"]) + cal.offset)))
        assert v.probability == pytest.approx(p, abs=1e-9)
        assert v.is_supported == (v.probability > 0.5)
        assert len(v.passage_scores) == entry.extra["ce_passages"]
    # same response → same bytes, whatever was scored before
    verifier.verify(topic, facts[::-1], evidence[::-1], cal)
    again = verifier.verify(topic, facts, evidence, cal)
    assert [(v.probability, v.passage_scores) for v in again] == [(v.probability, v.passage_scores) for v in verdicts]
    # the position is the fact's place in its response: the same fact last is scored with position 1
    assert verifier.verify(topic, facts[::-1], evidence[::-1], cal)[0].features["position"] == 0.0
    assert verdicts[1].features["position"] == 1.0


def test_if_missing_skips_a_build_with_the_same_settings(tiny_build, tiny_inputs):
    from fscore_lite.commands.models import _trained_with
    from fscore_lite_models.verifier.build import BUILDER, SnliConfig, VerifierConfig

    bundle_dir = tiny_build[0]
    same = VerifierConfig(threads=1, folds=2, snli=SnliConfig(pairs=12, batch_size=4, max_length=32, epochs=2.0))
    assert _trained_with(bundle_dir, same, tiny_inputs["data"], BUILDER)
    assert not _trained_with(bundle_dir, VerifierConfig(threads=1, folds=3), tiny_inputs["data"], BUILDER)
    assert not _trained_with(bundle_dir, same, None, BUILDER)  # other training data
    assert not _trained_with(bundle_dir, same, tiny_inputs["data"], BUILDER - 1)  # an older recipe is rebuilt


def test_if_missing_keeps_a_fact_stage_build_of_the_same_settings(tiny_fact_build, tiny_inputs):
    from fscore_lite.commands.models import _trained_with
    from fscore_lite_models.verifier.build import BUILDER, FactStageConfig, SnliConfig, VerifierConfig

    snli = SnliConfig(pairs=12, batch_size=4, max_length=32, epochs=2.0)
    plain = VerifierConfig(threads=1, folds=2, snli=snli)  # what `make test` asks for
    assert _trained_with(tiny_fact_build[0], plain, tiny_inputs["data"], BUILDER)
    other = VerifierConfig(threads=1, folds=2, snli=snli, fact_stage=FactStageConfig(epochs=2.0))
    assert not _trained_with(tiny_fact_build[0], other, tiny_inputs["data"], BUILDER)


@pytest.fixture(scope="module")
def tiny_fact_build(tmp_path_factory, tiny_inputs):
    from fscore_lite_models.verifier.fact_stage import FactStageConfig

    root = tmp_path_factory.mktemp("verifier-facts")
    return _train(tiny_inputs, root, fact_stage=FactStageConfig(epochs=1.0, lr=1e-4, facts_per_batch=8))


def test_fact_stage_installs_its_own_cross_encoder_and_its_out_of_fold_scores(tiny_build, tiny_fact_build):
    bundle_dir, _, report = tiny_fact_build
    bundle = Bundle(bundle_dir)
    ver, nli = bundle.get("minilm-l6-factscore-verifier"), bundle.get("minilm-l6-snli-nli")
    assert {"weights", "weights_fp32", "tokenizer", "config", "oof_scores"} <= {f.kind for f in ver.files}
    weights = lambda e: [f.sha256 for f in e.files if f.kind == "weights"]  # noqa: E731
    assert weights(ver) != weights(nli)  # the verifier runs its own, fact-tuned graph; Q² keeps the SNLI one
    bundle.verify(ver)
    bundle.verify(nli)
    fs = report["fact_stage"]
    lms = sorted({f["held_out_lm"] for f in fs["folds"]})
    assert len(lms) == 3 and [(f["held_out_lm"], f["fold"]) for f in fs["folds"]] == [
        (lm, fold) for lm in dict.fromkeys(f["held_out_lm"] for f in fs["folds"]) for fold in (0, 1)]
    # for each LM held out, every fact is scored by exactly one fold's model, the one that did not train on it
    assert sum(f["held_out_facts"] for f in fs["folds"]) == len(lms) * sum(report["facts"].values())
    # 2 folds: a human fact trains the one model of the other fold for each of the two LMs that are not its own
    assert sum(f["train_facts"] for f in fs["folds"]) == 2 * report["facts"]["human"]
    assert fs["final"]["train_facts"] == report["facts"]["human"]
    assert fs["graph_checks"]["fp32_onnx_vs_torch_max_abs_diff"] < 1e-4
    assert report["snli"]["weights_sha256"] == tiny_build[2]["snli"]["weights_sha256"]  # the same stage 1
    assert fs["final"]["weights_sha256"] != report["snli"]["weights_sha256"]


def test_frozen_lower_layers_split_the_forward_pass_exactly(tiny_inputs):
    from tokenizers import Tokenizer
    from transformers import BertForSequenceClassification

    from fscore_lite.backends.cross_encoder import encode_pairs, pair_tokenizer
    from fscore_lite_models.verifier.facts import finetune_facts, lower_states, torch_fact_logits, upper_logits
    from fscore_lite_models.verifier.torch_train import load_torch

    torch = load_torch()
    ckpt = tiny_inputs["checkpoint"]
    torch.manual_seed(0)
    model = BertForSequenceClassification.from_pretrained(str(ckpt), num_labels=3, attn_implementation="eager").eval()
    tok = pair_tokenizer(Tokenizer.from_file(str(ckpt / "tokenizer.json")), 32)
    facts = [[("Ada Lovelace was a mathematician in London.", "Ada was a mathematician."),
              ("She wrote notes on the engine.", "Ada was a mathematician.")],
             [],
             [("The engine was never built.", "The engine was built in 1850.")]]
    layers = len(model.bert.encoder.layer)
    per_fact = torch_fact_logits(model, tok, facts, bf16=False, facts_per_batch=2)
    assert [z.shape for z in per_fact] == [(2, 3), (0, 3), (1, 3)]
    for frozen in range(1, layers):
        states = lower_states(model, tok, facts, frozen, bf16=False, facts_per_batch=2)
        assert states[1] is None and [s[0].shape[0] for s in states if s] == [2, 1]
        for pairs, (hidden, mask) in zip([facts[0], facts[2]], [states[0], states[2]]):
            with torch.no_grad():
                whole = model(**{k: torch.from_numpy(v) for k, v in encode_pairs(tok, pairs).items()}).logits
                split = upper_logits(model, hidden, mask, frozen)
            assert torch.allclose(whole, split, atol=1e-5)
            assert any(np.allclose(whole.numpy(), z, atol=1e-5) for z in per_fact if len(z) == len(pairs))
    # a frozen fine-tune moves only the layers above the split
    before = {k: v.clone() for k, v in model.state_dict().items()}
    states = lower_states(model, tok, facts, 1, bf16=False)
    finetune_facts(model, tok, [(facts[0], True), (facts[1], False), (facts[2], False)], epochs=4.0, lr=1e-3,
                   facts_per_batch=2, seed=0, threads=1, bf16=False, log=lambda m: None, frozen_layers=1, states=states)
    moved = {k for k, v in model.state_dict().items() if not torch.equal(v, before[k])}
    assert moved and all(k.startswith(("bert.encoder.layer.1.", "bert.pooler.", "classifier.")) for k in moved)
    assert any(k.startswith("bert.encoder.layer.1.") for k in moved)


def test_fact_stage_with_frozen_lower_layers_cross_fits_like_the_full_one(tiny_inputs, tiny_fact_build, tmp_path):
    from fscore_lite_models.verifier.fact_stage import FactStageConfig

    bundle_dir, _, report = _train(tiny_inputs, tmp_path,
                                   fact_stage=FactStageConfig(epochs=1.0, lr=1e-4, facts_per_batch=8, frozen_layers=1))
    fs, full = report["fact_stage"], tiny_fact_build[2]["fact_stage"]
    assert fs["config"]["frozen_layers"] == 1 and fs["lower_states_s"] > 0 and full["lower_states_s"] == 0
    assert [f["train_facts"] for f in fs["folds"]] == [f["train_facts"] for f in full["folds"]]
    assert [f["held_out_facts"] for f in fs["folds"]] == [f["held_out_facts"] for f in full["folds"]]
    # the same stage 1, continued differently: its own weights, and recorded scores for every fact
    assert report["snli"]["weights_sha256"] == tiny_fact_build[2]["snli"]["weights_sha256"]
    assert len({fs["final"]["weights_sha256"], full["final"]["weights_sha256"], report["snli"]["weights_sha256"]}) == 3
    assert fs["graph_checks"]["fp32_onnx_vs_torch_max_abs_diff"] < 1e-4
    ver = Bundle(bundle_dir).get("minilm-l6-factscore-verifier")
    Bundle(bundle_dir).verify(ver)
    assert "oof_scores" in {f.kind for f in ver.files}


def test_held_out_figures_of_a_fact_stage_verifier_use_the_recorded_scores(tiny_fact_build, tiny_inputs):
    from fscore_lite.errors import FscoreError
    from fscore_lite.factscore.trained import TrainedVerifier
    from fscore_lite.build_step import ensure_store
    from fscore_lite.metaeval.heldout import format_report, run_heldout
    from fscore_lite.training.examples import Fact, featurise, load_examples, use_recorded_scores, worker_pool
    from fscore_lite.training.labeled import wiki_pages
    from fscore_lite.store import open_store

    bundle_dir, settings, report = tiny_fact_build
    settings = settings.with_(models_dir=bundle_dir)
    bundle = Bundle(bundle_dir)
    entry = bundle.get("minilm-l6-factscore-verifier")
    pages, files = wiki_pages(tiny_inputs["data"])
    store = open_store(ensure_store(files, settings, None))
    ex = load_examples(tiny_inputs["data"], pages)
    pool = worker_pool(bundle, store, entry, None, 1, entry.extra["k"], entry.extra["window_tokens"],
                       entry.extra["ce_passages"])
    featurise(ex, *pool[0])
    in_sample = [dict(r) for r in ex.features["human"]]
    assert use_recorded_scores(ex, bundle, entry) == len(ex.human) + len(ex.model)
    assert any(a["ce_max"] != b["ce_max"] for a, b in zip(in_sample, ex.features["human"]))
    # the meta-eval refits everything on exactly the scores the build's own held-out report used
    rep = run_heldout(tiny_inputs["data"], settings, folds=2, hold_out="topic", progress=False, own_facts_files=[])
    assert rep["hold_out_topic"] == [{k: r[k] for k in rep["hold_out_topic"][0]} for r in report["held_out"]["topic"]["model"]]
    for r in rep["hold_out_topic"]:
        assert r["ci95"][0] - 1e-6 <= r["estimate"] <= r["ci95"][1] + 1e-6
        lo, hi = r["error_ci95"]
        assert lo - 0.01 <= r["estimate"] - r["human"] <= hi + 0.01
    assert "topics held out" in format_report(rep)
    # every LM's view: a fact of an LM as its own view scores it, other LMs' facts by models that never saw that LM
    lms = sorted(ex.held_lm_features)
    assert lms == sorted({b.subject for b in ex.bios}) and not ex.ce_saw_every_lm
    for lm in lms:
        view = ex.without_lm(lm).features["human"]
        own = [i for i, f in enumerate(ex.human) if ex.bios[f.bio].subject == lm]
        assert all(view[i] == ex.features["human"][i] for i in own)
        assert any(view[i]["ce_max"] != ex.features["human"][i]["ce_max"] for i in range(len(ex.human)) if i not in own)
    # and the held-out LM's figures are those of the build's own report, which fitted on the same views
    rep = run_heldout(tiny_inputs["data"], settings, folds=2, hold_out="lm", progress=False, own_facts_files=[])
    assert rep["hold_out_lm"] == [{k: r[k] for k in rep["hold_out_lm"][0]} for r in report["held_out"]["lm"]["model"]]
    # the installed (in-sample) model still serves score
    verifier = TrainedVerifier.from_bundle(bundle, store)
    assert verifier.sha256 == [f.sha256 for f in entry.files if f.kind == "weights"][0]
    # a training topic's fact the build never scored out of fold is refused, not scored in-sample
    ex.model.append(Fact(ex.topics[0], "A sentence the build never saw.", 0, None))
    ex.features["model"].append(dict(ex.features["model"][0]))
    with pytest.raises(FscoreError, match="optimistic"):
        use_recorded_scores(ex, bundle, entry)



def test_a_fact_stage_record_without_lms_cannot_hold_an_lm_out(tiny_fact_build, tiny_inputs, tmp_path):
    """A build that recorded one score per fact (one model per topic fold, every LM seen) still gives
    topic-held-out figures, and refuses LM-held-out ones instead of reporting them optimistic."""
    import dataclasses
    import gzip

    from fscore_lite.errors import FscoreError
    from fscore_lite.manifest import describe_file
    from fscore_lite.metaeval.heldout import run_heldout

    src, settings, _ = tiny_fact_build
    bundle_dir = tmp_path / "models"
    shutil.copytree(src, bundle_dir)
    bundle = Bundle(bundle_dir)
    entry = bundle.get("minilm-l6-factscore-verifier")
    oof = next(f for f in entry.files if f.kind == "oof_scores")
    rows = {}
    with gzip.open(bundle_dir / oof.path, "rt", encoding="utf-8") as f:
        for d in map(json.loads, f):
            rows[(d["topic"], d["fact"])] = {k: v for k, v in d.items() if k != "held_lm"}
    with gzip.open(bundle_dir / oof.path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r, sort_keys=True) + "\n" for _, r in sorted(rows.items()))
    files = tuple(describe_file(bundle_dir, oof.path, oof.kind) if g is oof else g for g in entry.files)
    bundle.add(dataclasses.replace(entry, files=files))
    bundle.save()
    settings = settings.with_(models_dir=bundle_dir)
    rep = run_heldout(tiny_inputs["data"], settings, folds=2, hold_out="topic", progress=False, own_facts_files=[])
    assert len(rep["hold_out_topic"]) == 3
    with pytest.raises(FscoreError, match="--hold-out topic"):
        run_heldout(tiny_inputs["data"], settings, folds=2, hold_out="lm", progress=False, own_facts_files=[])


_SPY_TORCH_IMPORT = """
import importlib.abc, json, os, sys
seen = []
class Spy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" and not seen:
            seen.append(os.environ.get("OMP_WAIT_POLICY"))
        return None
sys.meta_path.insert(0, Spy())
import fscore_lite
from fscore_lite_models.verifier.torch_train import load_torch
load_torch()
print(json.dumps({"at_import": seen[0], "after": os.environ.get("OMP_WAIT_POLICY")}))
"""


@pytest.mark.parametrize("user,at_import,after", [(None, None, "PASSIVE"), ("ACTIVE", "ACTIVE", "ACTIVE")])
def test_training_loads_torch_with_libgomp_bounded_spin_unless_the_user_chose(user, at_import, after):
    """libgomp reads OMP_WAIT_POLICY when torch loads: the build's torch sees it unset (its own
    bounded spin-wait) unless the user set it; the runtime's passive default is restored after."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if user:
        env["OMP_WAIT_POLICY"] = user
    out = subprocess.run([sys.executable, "-c", _SPY_TORCH_IMPORT], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out.strip().splitlines()[-1]) == {"at_import": at_import, "after": after}


# --- the pieces, without training ---

def test_page_features_see_what_the_page_says():
    page = PageIndex.build("Ada Lovelace", "Ada Lovelace was an English mathematician.\n"
                                           "She was born in London in 1815. She worked with Charles Babbage.")
    on = fact_features("Ada Lovelace was born in 1815.", page, [])
    off = fact_features("Ada Lovelace was born in Paris in 1820.", page, [])
    assert on["cov_page"] == 1.0 and on["num_found"] == 1.0 and on["n_missing"] == 0
    assert off["cov_page"] < 1.0 and off["num_found"] == 0.0 and off["cap_found"] == 0.0 and off["n_missing"] == 2
    assert set(on) == set(FEATURES)


def test_evidence_window_centres_on_the_best_sentence_and_fits_the_budget():
    text = "<s>Alpha one.</s><s>Bravo two.</s><s>Charlie was born in Rome.</s><s>Delta four.</s><s>Echo five.</s>"
    assert passage_sentences(text)[2] == "Charlie was born in Rome."
    count = lambda s: len(s.split())  # noqa: E731  (one token a word)
    w = evidence_window("Page", text, "Charlie was born in Rome", count, budget=7)
    assert w == "Page. Charlie was born in Rome."  # 1 + 5 words; the next sentence would pass the budget
    assert evidence_window("Page", text, "Charlie was born in Rome", count, budget=20) == (
        "Page. Alpha one. Bravo two. Charlie was born in Rome. Delta four. Echo five.")


def test_combiner_fit_recovers_the_informative_feature_and_round_trips():
    rng = np.random.RandomState(0)
    x = rng.normal(size=(400, 2))
    y = (x[:, 0] + 0.3 * rng.normal(size=400) > 0).astype(float)
    comb = fit_logistic(x, y, ("a", "b"))
    assert comb.coef[0] > 1.0 and abs(comb.coef[1]) < 0.5 * comb.coef[0]
    assert Combiner.from_json(comb.to_json()) == comb


# --- the real verifier (built by `make test`: fscore-lite models train verifier) ---

@pytest.fixture(scope="module")
def real_verifier():
    import os

    from fscore_lite.backends.embed import SentenceEmbedder
    from fscore_lite.factscore.retrieve import Retriever
    from fscore_lite.factscore.trained import TrainedVerifier
    from fscore_lite.build_step import ensure_store
    from fscore_lite.training.labeled import wiki_pages
    from fscore_lite.store import open_store

    settings = Settings(threads=1)
    bundle = Bundle(settings.models_dir)
    entry = bundle.first_for_role("verifier")
    if entry is None:
        msg = f"no trained verifier in {settings.models_dir}: run `make models-verifier`"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    data = entry.extra["training"]["data"]
    data = settings.home / "build" / "factscore-dev" if data == "shipped" else Path(data)
    _, files = wiki_pages(data)
    store = open_store(ensure_store(files, settings, None))
    retriever = Retriever(store, SentenceEmbedder.from_bundle(bundle, store.embed_model), int(entry.extra["k"]))
    return TrainedVerifier.from_bundle(bundle, store), retriever, entry


@pytest.mark.parametrize("topic,stated,fabricated", [
    ("Adil Rami", "Adil Rami is a French former professional footballer.",
     "Adil Rami won the Nobel Prize in Chemistry in 1931."),
    ("Annika Sörenstam", "Annika Sörenstam is a professional golfer.",
     "Annika Sörenstam was a famous opera singer in Vienna."),
])
def test_real_verifier_supports_a_stated_fact_and_not_a_fabricated_one(real_verifier, topic, stated, fabricated):
    verifier, retriever, _ = real_verifier
    facts = [stated, fabricated]
    v = verifier.verify(topic, facts, [retriever.retrieve(topic, f) for f in facts], verifier.calibrations[GIVEN])
    assert v[0].is_supported and not v[1].is_supported
    assert v[0].probability > v[1].probability + 0.3


def test_real_verifier_records_its_quality(real_verifier):
    t = real_verifier[2].extra["training"]
    assert t["snli"]["test_pairs"] == 9824  # the whole SNLI test set, less its pairs without a gold label
    assert t["graph_checks"]["fp32_onnx_vs_torch_max_abs_diff"] < 1e-4
    assert t["graph_checks"]["int8_vs_fp32_argmax_agreement"] > 0.95
    assert t["snli"]["test_accuracy"] > 0.7
    # held out (the LM and the topic), against the human FActScore of the same bios: every kind of facts
    for kind, rows in t["held_out"]["lm"].items():
        if kind != "f1_ns":
            assert len(rows) == 3 and all(r["er"] < 6 and r["per_bio_mae"] < 20 for r in rows), kind
    assert all(r["f1_ns"] > 0.3 for r in t["held_out"]["lm"]["f1_ns"])
    assert {r["decomposer"] for r in t["own_facts"]} >= {"default"}  # the shipped own facts were fitted on
