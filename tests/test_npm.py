"""NP, the nonparametric probability (SPEC FActScore §7)."""
import numpy as np
import pytest

from fscore_lite.factscore.npm import NPM, np_probability
from fscore_lite.store import Passage


class FakeEncoder:
    """Hidden state of token t = one-hot-ish fixed vector per token id; masks use vector M."""

    mask_id = 99
    name, sha256 = "fake", "0" * 64

    def __init__(self):
        rng = np.random.default_rng(0)
        self.table = {t: rng.normal(size=8).astype(np.float32) for t in range(100)}
        self.words = {1: "Fact", 2: ":", 5: " painter", 6: " the", 7: " Paris", 8: " born"}

    def token_text(self, t):
        return self.words.get(t, f" w{t}")

    def hidden_states(self, batch):
        return [np.stack([self.table[t] for t in seq]) for seq in batch]


def test_np_probability_formula():
    enc = FakeEncoder()
    fact = [1, 2, 5, 6, 7]  # "Fact: painter the Paris" → masks 'painter' and 'Paris', skips stopword 'the'
    passages = [[5, 8, 30], [7, 31]]
    got = np_probability(fact, 2, enc, passages, bos=[0], eos=[3])
    vecs = np.stack([enc.table[t] for t in [5, 8, 30, 7, 31]])
    tokens = np.array([5, 8, 30, 7, 31])
    q = enc.table[99]  # the masked position's hidden state (fake encoder: the mask's vector)
    w = np.exp(vecs @ q / np.sqrt(8) - (vecs @ q / np.sqrt(8)).max())
    expected = np.mean([w[tokens == 5].sum() / w.sum(), w[tokens == 7].sum() / w.sum()])
    assert got == pytest.approx(expected, rel=1e-5)


def test_token_absent_from_passages_scores_zero():
    enc = FakeEncoder()
    assert np_probability([1, 2, 40], 2, enc, [[5, 8]], bos=[0], eos=[3]) == 0.0


class OnePageStore:
    def __init__(self, texts):
        self.ps = [Passage(i, "Marie Curie", t, i) for i, t in enumerate(texts)]

    def page_passages(self, title):
        return self.ps if title == "Marie Curie" else []


@pytest.mark.export
def test_npm_with_exported_tiny_mlm_matches_torch(tiny_bundle, tiny_checkpoints):
    import torch
    from transformers import AutoModelForMaskedLM

    from fscore_lite.backends.onnx_mlm import MaskedLMEncoder
    from fscore_lite.manifest import Bundle

    b = Bundle(tiny_bundle)
    e = b.get("tiny-mlm")
    enc = MaskedLMEncoder(b.verified_path(e, "weights_fp32"), b.path(e, "tokenizer"), e.name, e.sha256)
    store = OnePageStore(["<s>Marie Curie was a Polish physicist.</s>", "<s>She won the Nobel Prize in 1903.</s>",
                          "<s>The Eiffel Tower is in Paris.</s>", "<s>She was born in Warsaw.</s>"])
    npm = NPM(enc, store)
    fact = "Marie Curie won the Nobel Prize."
    p = npm.probability("Marie Curie", fact)
    assert 0.0 <= p <= 1.0
    # the same computation with torch on the fp32 checkpoint
    model = AutoModelForMaskedLM.from_pretrained(tiny_checkpoints["mlm"]).eval()
    passages = npm.passages("Marie Curie", fact)
    assert len(passages) == 3

    def hidden(ids):
        with torch.no_grad():
            out = model(torch.tensor([ids]), output_hidden_states=True)
        return out.hidden_states[-1][0].numpy()

    pids = [enc.ids(t, special=False) for t in passages]
    vecs = np.concatenate([hidden(x) for x in pids])
    toks = np.concatenate(pids)
    fact_ids = enc.ids("Fact: " + fact, special=False)
    pre = len(enc.ids("Fact:", special=False))
    from fscore_lite.factscore.npm import _is_stop

    probs = []
    for i in range(pre, len(fact_ids)):
        if _is_stop(enc.token_text(fact_ids[i])):
            continue
        ids = list(fact_ids)
        ids[i] = enc.mask_id
        q = hidden(npm.bos + ids + npm.eos)[len(npm.bos) + i]
        s = vecs @ q / np.sqrt(vecs.shape[1])
        w = np.exp(s - s.max())
        probs.append(w[toks == fact_ids[i]].sum() / w.sum() if (toks == fact_ids[i]).any() else 0.0)
    assert p == pytest.approx(float(np.mean(probs)), abs=1e-4)


@pytest.mark.export
@pytest.mark.llm
def test_pipeline_applies_np_to_supported_facts(tiny_bundle, settings_1t, tmp_path):
    """--npm: facts the LM supports get an NP probability and are re-decided at 0.3."""
    import json
    import shutil

    from fscore_lite.backends.llm import load_llm
    from fscore_lite.cache import CallCache
    from fscore_lite.factscore.pipeline import FactScorer, Item, ScoreOptions
    from fscore_lite.manifest import Bundle
    from fscore_lite_index.build import build_store

    real, tiny = Bundle(settings_1t.models_dir), Bundle(tiny_bundle)
    combo = Bundle(tmp_path / "bundle")
    for name, src in ((settings_1t.llm, real), ("all-minilm-l6-v2-int8", real), ("tiny-mlm", tiny)):
        entry = src.get(name)
        for f in entry.files:
            (combo.root / f.path).parent.mkdir(parents=True, exist_ok=True)
            (combo.root / f.path).symlink_to((src.root / f.path).resolve())
        combo.add(entry)
    combo.save()
    pages = tmp_path / "pages.jsonl"
    pages.write_text(json.dumps({"title": "Marie Curie", "text": "Marie Curie was a Polish physicist. "
                                 "She won the Nobel Prize in Physics in 1903."}) + "\n")
    build_store(pages, tmp_path / "store", threads=1, models_dir=combo.root, progress=False)
    s = settings_1t.with_(models_dir=combo.root, store=tmp_path / "store")
    llm = load_llm(s, combo, CallCache(None))
    scorer = FactScorer(s, ScoreOptions(npm=True, progress=False, k=1, verifier="llm"), cache=llm.cache, llm=llm)
    rec = scorer.score_item(Item(1, {}, topic="Marie Curie",
                                 facts=["Marie Curie was a Polish physicist.", "Marie Curie was a Japanese chef."]))
    assert scorer.describe()["models"]["mlm"]["name"] == "tiny-mlm"
    assert any("npprob" in d for d in rec["decisions"]), rec["decisions"]
    for d in rec["decisions"]:
        if "npprob" in d:  # only LM-supported facts are checked, and NP then decides
            assert d["is_supported"] == (d["npprob"] > 0.3)
        else:
            assert d["is_supported"] is False
