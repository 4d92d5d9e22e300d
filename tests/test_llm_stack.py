"""``--verifier llm+trained``: the window prompt, the combiner fit (build step), the runtime.

The fit runs on the tiny verifier build of ``test_verifier`` with a scripted LLM (its margin
says whether the fact's words are in the prompt's passages), so it takes seconds and its
outcome is known; one test runs the real 0.5B model through the same margin function.
"""
from __future__ import annotations

import hashlib
import math
import re

import numpy as np
import pytest

from fscore_lite.errors import FscoreError
from fscore_lite.factscore.stacked import STACK_FEATURES, llm_margin, window_prompt
from fscore_lite.factscore.trained import evidence_window
from fscore_lite.manifest import Bundle

from .test_verifier import _train, tiny_inputs  # noqa: F401 - the fixture is used by name

pytestmark = pytest.mark.export


class ScriptedLLM:
    """Stands in for LlamaRunner: next-token log-probabilities from word overlap of the fact
    with the prompt's passages (so the margin carries signal), deterministic."""

    name = "scripted-llm"
    sha256 = hashlib.sha256(b"scripted-llm").hexdigest()
    chat_template = False

    def __init__(self):
        self.prompts: list[str] = []

    def tokenize(self, text: str, add_bos: bool = True, special: bool = False) -> list[int]:
        return [len(w) for w in text.split()]

    def next_token_logprobs(self, prompt: str, words: list[str]) -> dict[str, float]:
        self.prompts.append(prompt)
        context, _, question = prompt.rpartition("\n\nInput: ")
        fact = {w.lower() for w in re.findall(r"\w+", question.rsplit(" True or False?", 1)[0])}
        seen = {w.lower() for w in re.findall(r"\w+", context)}
        share = len(fact & seen) / max(1, len(fact))
        m = 4 * share - 2
        return {w: (m / 2 if "True" in w else -m / 2) - 1.0 for w in words}


@pytest.fixture(scope="module")
def stack_build(tmp_path_factory, tiny_inputs):  # noqa: F811
    from fscore_lite_models.verifier.llm_stack import train_llm_combiner

    bundle_dir, settings, _ = _train(tiny_inputs, tmp_path_factory.mktemp("stack"))
    llm = ScriptedLLM()
    record = train_llm_combiner(bundle_dir, settings, llm=llm, every=1, data=tiny_inputs["data"], log=lambda m: None)
    return bundle_dir, settings, record, llm


def test_window_prompt_is_the_reference_frame_around_the_best_windows():
    from fscore_lite.factscore.retrieve import Evidence
    from fscore_lite.store import Passage

    count = lambda t: len(t.split())  # noqa: E731
    p1 = Passage(1, "Ann Lee", "<s>Ann Lee is a painter.</s><s>She lives in Oslo.</s><s>She was born in 1950.</s>", 0)
    p2 = Passage(2, "Ann Lee", "<s>Her father was a sailor.</s><s>He sailed to Peru.</s>", 1)
    ev = [Evidence(p2, 0.5, 1), Evidence(p1, 0.9, 0), Evidence(Passage(3, "Ann Lee", "<s>Other.</s>", 2), 0.1, 2)]
    prompt = window_prompt("Ann Lee", "The painter was born in 1950.", ev, count, passages=2, budget=10)
    best = evidence_window("", p1.text, "The painter was born in 1950.", count, 10)[2:]
    second = evidence_window("", p2.text, "The painter was born in 1950.", count, 10)[2:]
    assert "born in 1950" in best and "Other" not in prompt
    assert prompt == ("Answer the question about Ann Lee based on the given context.\n\n"
                      f"Text: {second}\n\nText: {best}\n\nInput: The painter was born in 1950. True or False?\nOutput:")


def test_fit_records_the_combiner_for_that_llm_with_an_out_of_fold_report(stack_build):
    bundle_dir, _, record, llm = stack_build
    entry = Bundle(bundle_dir).get("minilm-l6-factscore-verifier")
    assert entry.extra["llm_combiners"][llm.sha256] == record
    assert record["llm"] == llm.name and record["chat_template"] is False
    comb = record["combiner"]
    assert tuple(comb["features"]) == STACK_FEATURES and len(comb["coef"]) == 2
    assert comb["coef"][1] > 0  # a margin that says "the words are there" counts toward supported
    cal = record["calibration"]  # the stack's probabilities as they are, under the sample's labelled share
    assert cal["facts"] == "llm+trained" and cal["scale"] == 1.0 and cal["offset"] == 0.0 and 0 < cal["prior"] < 1
    t = record["training"]
    human = entry.extra["training"]["facts"]["human"]
    assert t["sample_facts"] == human and len(llm.prompts) == human  # every=1: every human fact, once
    assert t["folds"] == 2 and t["verifier_sha256"] == entry.sha256
    rows = {r["subject"]: r for r in t["cv"]}
    assert set(rows) == {"InstructGPT", "ChatGPT", "PerplexityAI", "all"}
    assert rows["all"]["n_facts"] == human
    for r in rows.values():
        for side in ("trained", "stacked"):
            assert 0.0 <= r[side]["estimated"] <= 100.0
            assert r[side]["error"] == pytest.approx(abs(r[side]["estimated"] - r["human"]))


def test_a_second_fit_gives_the_same_record(stack_build, tiny_inputs):  # noqa: F811
    from fscore_lite_models.verifier.llm_stack import train_llm_combiner

    bundle_dir, settings, record, _ = stack_build
    again = train_llm_combiner(bundle_dir, settings, llm=ScriptedLLM(), every=1, data=tiny_inputs["data"],
                               log=lambda m: None)
    assert {k: v for k, v in again.items() if k != "training"} == {k: v for k, v in record.items() if k != "training"}
    assert again["training"]["cv"] == record["training"]["cv"]


def _scorer(bundle_dir, settings, llm, verifier="llm+trained"):
    from fscore_lite.factscore.pipeline import FactScorer, ScoreOptions
    from fscore_lite.build_step import ensure_store
    from fscore_lite.training.labeled import wiki_pages

    entry = Bundle(bundle_dir).get("minilm-l6-factscore-verifier")
    _, files = wiki_pages(entry.extra["training"]["data"])
    s = settings.with_(models_dir=bundle_dir)
    s = s.with_(store=ensure_store(files, s, None))
    return FactScorer(s, ScoreOptions(progress=False, verifier=verifier), llm=llm)


def test_runtime_applies_the_stacked_combiner(stack_build):
    from fscore_lite.factscore.pipeline import Item

    bundle_dir, settings, record, _ = stack_build
    llm = ScriptedLLM()
    scorer = _scorer(bundle_dir, settings, llm)
    topic = scorer.store.titles()[0]
    facts = [f"{topic} is a person.", f"{topic} was born on the Moon in 1700."]
    rec = scorer.score_item(Item(1, {"topic": topic}, topic=topic, facts=facts))
    assert rec["status"] == "ok"
    base, c = scorer.verifier.trained.combiner, record["combiner"]
    ps = []
    for fact, d, pos in zip(facts, rec["decisions"], (0.0, 1.0)):
        assert d["rule"] == "llm+trained"
        ev = scorer.retriever.retrieve(topic, fact)
        feats, _ = scorer.verifier.trained.features(topic, fact, ev, pos)
        logit = float(base.logit(base.matrix([feats]))[0])
        margin = llm_margin(llm, topic, fact, ev)
        assert d["features"]["trained_logit"] == round(logit, 5) and d["features"]["llm_margin"] == round(margin, 5)
        z = sum((x - m) / s * w for x, m, s, w in zip((logit, margin), c["mean"], c["scale"], c["coef"]))
        p = 1 / (1 + math.exp(-(z + c["intercept"])))
        assert d["verifier_probability"] == round(p, 6) and d["is_supported"] == (p > 0.5)
        ps.append(p)
    assert rec["calibration"] == "llm+trained" and rec["init_score"] == round(float(np.mean(ps)), 6)
    assert scorer.priors() == {"llm+trained": record["calibration"]["prior"]}
    desc = scorer.describe()
    assert desc["settings"]["verifier"] == "llm+trained" and desc["settings"]["decision"].startswith("llm+trained")
    assert desc["models"]["llm_combiner"]["llm_sha256"] == llm.sha256
    assert desc["models"]["llm"]["sha256"] == llm.sha256
    assert "llm_combiners" not in desc["models"]["verifier"]["extra"]


def test_an_llm_without_a_fitted_combiner_is_refused_with_the_command(stack_build):
    from fscore_lite.factscore.pipeline import Item

    bundle_dir, settings, _, _ = stack_build
    other = ScriptedLLM()
    other.sha256, other.name = "0" * 64, "other-llm"
    scorer = _scorer(bundle_dir, settings, other)
    topic = scorer.store.titles()[0]
    with pytest.raises(FscoreError, match="models train llm-combiner --llm other-llm"):
        scorer.score_item(Item(1, {"topic": topic}, topic=topic, facts=[f"{topic} is a person."]))
    chat = ScriptedLLM()
    chat.chat_template = True
    with pytest.raises(FscoreError, match="chat_template=False"):
        _scorer(bundle_dir, settings, chat).verifier.stacked


def test_real_llm_margin_is_the_prompt_s_true_false_log_odds(test_llm):
    from fscore_lite.factscore.retrieve import Evidence
    from fscore_lite.factscore.verify import FALSE_WORDS, TRUE_WORDS, margin_from_logprobs
    from fscore_lite.store import Passage

    ev = [Evidence(Passage(1, "Ann Lee", "<s>Ann Lee is a Norwegian painter.</s><s>She lives in Oslo.</s>", 0), 0.9, 0)]
    stated = llm_margin(test_llm, "Ann Lee", "Ann Lee lives in Oslo.", ev)
    prompt = window_prompt("Ann Lee", "Ann Lee lives in Oslo.", ev, lambda t: len(test_llm.tokenize(t, add_bos=False)))
    assert stated == margin_from_logprobs(test_llm.next_token_logprobs(prompt, list(TRUE_WORDS + FALSE_WORDS)))
    fabricated = llm_margin(test_llm, "Ann Lee", "Ann Lee lives on the Moon.", ev)
    assert math.isfinite(stated) and math.isfinite(fabricated) and stated > fabricated


def test_cli_fits_a_combiner_for_a_gguf_file(tmp_path, tiny_inputs, settings_1t):  # noqa: F811
    from typer.testing import CliRunner

    from fscore_lite.commands.models import app

    bundle_dir, _, _ = _train(tiny_inputs, tmp_path)
    real = Bundle(settings_1t.models_dir)
    gguf = real.verified_path(real.get(settings_1t.llm))
    result = CliRunner().invoke(app, ["train", "llm-combiner", "--llm", str(gguf), "--every", "25", "--data",
                                      str(tiny_inputs["data"]), "--models-dir", str(bundle_dir), "--threads", "1"])
    assert result.exit_code == 0, result.output
    assert "held-out topics: 2-fold topic-grouped CV over" in result.stdout and "stacked" in result.stdout
    records = Bundle(bundle_dir).get("minilm-l6-factscore-verifier").extra["llm_combiners"]
    assert list(records) == [real.get(settings_1t.llm).sha256]
    assert records[real.get(settings_1t.llm).sha256]["training"]["every"] == 25
    bad = CliRunner().invoke(app, ["train", "llm-combiner", "--every", "0", "--models-dir", str(bundle_dir)])
    assert bad.exit_code != 0 and "--every must be 1 or more" in str(bad.exception)


def test_held_out_er_of_the_stack_beside_the_trained_verifier(stack_build, tiny_inputs):  # noqa: F811
    from fscore_lite.metaeval.heldout import run_heldout
    from fscore_lite.metaeval.stack_er import format_stack_er_report, run_stack_er_cv

    bundle_dir, settings, record, _ = stack_build
    s = settings.with_(models_dir=bundle_dir)
    llm = ScriptedLLM()
    rep = run_stack_er_cv(tiny_inputs["data"], s, 2, llm=llm, progress=False)
    # the human sample is the fit's, and so is its out-of-fold per-fact table
    assert rep["human_sample"] == record["training"]["sample_facts"] and rep["per_fact"] == record["training"]["cv"]
    # one margin per human sample fact and per model fact of every held-out bio
    assert len(llm.prompts) == rep["human_sample"] + rep["model_facts"]
    # the trained column is the trained verifier's own held-out (topic) estimate of the same bios
    trained = {r["subject"]: r for r in run_heldout(tiny_inputs["data"], s, 2, hold_out="topic", progress=False,
                                                    own_facts_files=[])["hold_out_topic"]}
    assert {r["subject"] for r in rep["subjects"]} == set(trained)
    for r in rep["subjects"]:
        t = trained[r["subject"]]
        assert r["n_bios"] == t["n_bios"] and r["human"] == pytest.approx(t["human"])
        assert r["trained"]["estimate"] == pytest.approx(t["estimate"])
        assert r["trained"]["error_ci95"] == t["error_ci95"]
        lo, hi = r["stacked"]["error_ci95"]
        assert lo - 0.01 <= r["stacked"]["estimate"] - r["human"] <= hi + 0.01
        assert 0.0 <= r["stacked"]["estimate"] <= 100.0
        assert r["stacked"]["er"] == pytest.approx(abs(r["stacked"]["estimate"] - r["human"]))
    text = format_stack_er_report(rep)
    assert text.startswith("held-out topics: 2-fold") and "llm+trained" in text.splitlines()[1]

    # a fixed sample of one bio per subject: the same stacks, fewer margins
    one = run_stack_er_cv(tiny_inputs["data"], s, 2, limit=1, llm=ScriptedLLM(), progress=False)
    assert all(r["n_bios"] == 1 for r in one["subjects"]) and one["bios"] == len(one["subjects"])
    again = run_stack_er_cv(tiny_inputs["data"], s, 2, limit=1, llm=ScriptedLLM(), progress=False)
    timing = ("llm_s", "total_s")
    assert {k: v for k, v in again.items() if k not in timing} == {k: v for k, v in one.items() if k not in timing}
    with pytest.raises(FscoreError, match="no llm\\+trained combiner"):
        other = ScriptedLLM()
        other.sha256 = hashlib.sha256(b"another model").hexdigest()
        run_stack_er_cv(tiny_inputs["data"], s, 2, llm=other, progress=False)


def test_stack_meta_eval_decides_each_fact_under_its_bios_own_share():
    """F1(NS) of the stack's table is that of the decisions ``score`` makes: each fact's posterior under its
    bio's own share, not under the run's share."""
    import numpy as np

    from fscore_lite.factscore.calibration import Response, fact_posteriors, posteriors, run_share
    from fscore_lite.stats import f1_not_supported
    from fscore_lite.training.stack import _measure

    # bio 0: 60 facts near 0.45 (its own share is low), bio 1: 60 facts near 0.9 (high)
    prob = np.concatenate([np.linspace(0.40, 0.56, 60), np.linspace(0.55, 0.98, 60)])
    prior = np.full(120, 0.6)
    y = np.concatenate([np.arange(60) % 4 == 0, np.arange(60) % 5 != 0]).astype(float)
    bios = [0] * 60 + [1] * 60
    got = _measure(prob, prior, y, bios, np.ones(120, dtype=bool))
    run = [Response(tuple(prob[:60]), 0.6), Response(tuple(prob[60:]), 0.6)]
    share = run_share(run)
    own = np.concatenate([fact_posteriors(r, share) for r in run])
    at_run = posteriors(prob, 0.6, share)
    labels = [bool(v) for v in y]
    f1_own = f1_not_supported([bool(p > 0.5) for p in own], labels)
    f1_run = f1_not_supported([bool(p > 0.5) for p in at_run], labels)
    assert f1_own != f1_run  # the two rules decide differently here
    assert got["f1_ns"] == f1_own
    assert got["estimated"] == 100 * share
