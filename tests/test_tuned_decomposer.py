"""The fine-tuned decomposer: its GGUF writer, its training on the runtime's tokens, the build step and the
``tuned`` entry of the decomposer registry, on tiny causal LMs the tests build (models/tiny.py)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fscore_lite.errors import FscoreError

pytestmark = pytest.mark.export

SENTENCE = "Ada Lovelace was an English mathematician who wrote the first program."
FACTS = ["Ada Lovelace was English.", "Ada Lovelace was a mathematician.", "Ada Lovelace wrote the first program."]


def _quiet(*a):
    return None


def _base(tmp_path: Path, arch: str = "llama") -> Path:
    """A tiny causal LM as a Q8_0 GGUF file, the base a decomposer is trained from."""
    pytest.importorskip("llama_cpp")
    from fscore_lite_models.gguf import build_gguf
    from fscore_lite_models.tiny import tiny_llama_causal

    ckpt = tiny_llama_causal(tmp_path / f"ckpt-{arch}", arch=arch)
    out = tmp_path / f"base-{arch}" / "model.gguf"
    out.parent.mkdir(parents=True)
    build_gguf(ckpt, out, "Q8_0", log=_quiet)
    return out


def _logits(path: Path, text: str) -> np.ndarray:
    import llama_cpp

    from fscore_lite.backends.llama_kernels import ensure_kernel

    ensure_kernel("portable")
    llm = llama_cpp.Llama(str(path), n_ctx=128, n_threads=1, verbose=False, logits_all=True)
    ids = llm.tokenize(text.encode(), add_bos=True, special=False)
    llm.eval(ids)
    return np.array(llm.scores[: len(ids)])


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_written_gguf_keeps_the_base_model(tmp_path, arch):
    """Dequantized by transformers and written back untrained, the model computes the base's logits: the
    tensor names, llama's RoPE row order and the copied tokenizer metadata are right."""
    from fscore_lite_models.decomposer.build import load_base, write_gguf

    base = _base(tmp_path, arch)
    out = write_gguf(base, load_base(base), tmp_path / "same.gguf", "Q8_0", 1, log=_quiet)
    want, got = _logits(base, SENTENCE), _logits(out, SENTENCE)
    assert want.shape == got.shape
    np.testing.assert_allclose(got, want, atol=2e-2)
    assert not (tmp_path / "same.gguf.f32.tmp").exists()


def test_training_teaches_the_runtime_prompt(tmp_path):
    """A model trained on one sentence's facts writes those facts when the runtime decodes it: training
    sees the tokens the runtime feeds (prompt by llama.cpp, loss on the target only)."""
    from fscore_lite.backends.llm import LlamaRunner
    from fscore_lite.factscore.tuned_facts import TunedDecomposer
    from fscore_lite.manifest import sha256_file
    from fscore_lite_models.decomposer.build import DecomposerConfig, Pair, train_model, write_gguf

    base = _base(tmp_path)
    pair = Pair("InstructGPT", "Ada Lovelace", SENTENCE, tuple(FACTS))
    cfg = DecomposerConfig(epochs=120, batch_size=1, lr=3e-3, threads=1, bf16=False)
    model, report = train_model(base, [pair], [pair], cfg, False, log=_quiet)
    loss = report["held_out_token_loss"]
    assert loss["after"] < 0.1 < loss["before"]
    out = write_gguf(base, model, tmp_path / "tuned.gguf", "Q8_0", 1, log=_quiet)
    dec = TunedDecomposer(LlamaRunner(out, sha256_file(out), "tuned", threads=1, n_ctx=512))
    assert dec.sentence_facts(SENTENCE) == FACTS
    # the same fact twice in a response is kept once; a "Sure" opener gets none
    text = "Sure, here it is. " + SENTENCE + " " + SENTENCE
    run = dec.run(text)
    assert [s.facts for s in run] == [[], FACTS, []]
    dec.run("Grace Hopper wrote a compiler.")  # another item between: the same facts after it
    assert dec.run(text) == run


def test_prompt_and_parse():
    from fscore_lite.factscore.tuned_facts import parse, prompt, target

    assert prompt("  A b.  ") == "Sentence: A b.\nFacts:\n"
    assert target(["x.", " y. "]) == "- x.\n- y.\n\n"
    assert parse("- x.\n-\n- y.\nnot a fact\n- ") == ["x.", "y."]


def _tiny_bundle_with_base(tmp_path: Path) -> tuple[Path, str]:
    from fscore_lite.manifest import Bundle, ModelEntry, describe_file

    root = tmp_path / "bundle"
    base = _base(tmp_path)
    (root / "tiny-base").mkdir(parents=True)
    (root / "tiny-base" / "model.gguf").write_bytes(base.read_bytes())
    bundle = Bundle(root)
    bundle.add(ModelEntry("tiny-base", "llm", "llama", (describe_file(root, "tiny-base/model.gguf", "weights"),),
                          "Q8_0", "MIT (random test weights)", "models.tiny"))
    bundle.save()
    return root, "tiny-base"


def test_build_installs_a_checked_decomposer_that_score_uses(tmp_path, data_dir):
    """``train_decomposer`` on the dev sentences: a role-decomposer entry with its sha256, the data hash, the
    config and the held-out proxy; the registry's ``tuned`` finds it, names it as the facts' source, runs it,
    and refuses it once its file is edited."""
    from fscore_lite.errors import ModelIntegrityError
    from fscore_lite.factscore.decomposers import Models, describe_settings, fact_source, make_decomposer
    from fscore_lite.manifest import Bundle
    from fscore_lite.settings import Settings
    from fscore_lite_models.decomposer.build import DecomposerConfig, train_decomposer, trained_with

    root, base = _tiny_bundle_with_base(tmp_path)
    settings = Settings(home=tmp_path / "home", models_dir=root, threads=1)
    cfg = DecomposerConfig(name="tiny-facts", base=base, threads=1, bf16=False, max_sentences=12, eval_sentences=3)
    report = train_decomposer(root, settings, cfg, data=data_dir, log=_quiet)
    assert report["sentences"] == 12 and report["held_out_proxy"]["sentences"] == 3
    assert report["held_out_topics"] and len(report["pairs_sha256"]) == 64
    bundle = Bundle(root)
    entry = bundle.first_for_role("decomposer")
    assert entry.name == "tiny-facts" and entry.extra["training"]["config"]["max_sentences"] == 12
    assert trained_with(root, cfg, data_dir) and not trained_with(root, DecomposerConfig(name="tiny-facts"), data_dir)

    models = Models(settings, bundle)
    assert fact_source("tuned", lambda: pytest.fail("no LLM"), models) == ("tiny-facts", entry.sha256)
    dec = make_decomposer("tuned", lambda: pytest.fail("no LLM"), models=models)
    facts = dec.run("Ada Lovelace was a mathematician. She wrote programs.")
    assert len(facts) == 2 and all(isinstance(f, str) for s in facts for f in s.facts)
    assert describe_settings("tuned")["decomposer"] == "tuned"

    path = root / entry.files[0].path
    path.write_bytes(path.read_bytes()[:-1] + bytes([path.read_bytes()[-1] ^ 1]))
    with pytest.raises(ModelIntegrityError):
        make_decomposer("tuned", lambda: None, models=Models(settings, Bundle(root)))
    assert not trained_with(root, cfg, data_dir)


def test_tuned_without_a_decomposer_says_how_to_make_one(tmp_path):
    from fscore_lite.factscore.decomposers import Models, fact_source
    from fscore_lite.manifest import Bundle
    from fscore_lite.settings import Settings

    settings = Settings(home=tmp_path, models_dir=tmp_path / "empty", threads=1)
    with pytest.raises(FscoreError, match="models train decomposer"):
        fact_source("tuned", lambda: None, Models(settings, Bundle(settings.models_dir)))


def test_cross_fitted_facts_come_from_models_that_never_saw_the_bio(tmp_path, data_dir):
    """Each bio's facts are made by a fold model trained without its LM's sentences and its topic fold; the
    file's header names the installed decomposer (what the calibration is matched against) and the folds."""
    import gzip

    from fscore_lite.manifest import Bundle
    from fscore_lite.settings import Settings
    from fscore_lite_models.decomposer import build

    root, base = _tiny_bundle_with_base(tmp_path)
    settings = Settings(home=tmp_path / "home", models_dir=root, threads=1)
    cfg = build.DecomposerConfig(name="tiny-facts", base=base, threads=1, bf16=False, max_sentences=6,
                                 eval_sentences=1)
    build.train_decomposer(root, settings, cfg, data=data_dir, log=_quiet)
    trained: list[list] = []
    real = build.train_model

    def spy(base_gguf, train, held, cfg_, bf16, log=print):
        trained.append(train)
        return real(base_gguf, train, held, cfg_, bf16, log)

    build.train_model = spy
    try:
        made = build.cross_fitted_own_facts(settings, cfg, data=data_dir, out=tmp_path / "own.jsonl.gz", limit=1,
                                            log=_quiet, progress=False)
    finally:
        build.train_model = real
    entry = Bundle(root).first_for_role("decomposer")
    assert made["llm"] == "tiny-facts" and made["llm_sha256"] == entry.sha256
    folds = made["cross_fitted"]["folds"]
    assert made["n_bios"] == 3 and sum(f["bios"] for f in folds.values()) == 3
    assert len(trained) == len(folds)
    with gzip.open(tmp_path / "own.jsonl.gz", "rt") as fh:
        records = [json.loads(line) for line in fh][1:]
    assert sorted((r["subject"], build.fold_of(r["topic"], cfg.topic_folds)) for r in records) == sorted(
        (k.split("/")[0], int(k.split("/")[1])) for k in folds)
    for train, cell in zip(trained, folds):  # no fold model saw the LM or the topic fold it makes facts for
        subject, fold = cell.split("/")
        assert train and all(p.subject != subject and build.fold_of(p.topic, cfg.topic_folds) != int(fold)
                             for p in train)
    # a second run reuses the fold models (no training) and writes the same bytes
    build.train_model = spy
    trained.clear()
    try:
        again = build.cross_fitted_own_facts(settings, cfg, data=data_dir, out=tmp_path / "again.jsonl.gz", limit=1,
                                             log=_quiet, progress=False)
    finally:
        build.train_model = real
    assert trained == [] and again["sha256"] == made["sha256"]
