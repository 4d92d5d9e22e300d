"""The verifier calibrated on the facts it makes (issue 23, item 3): the bio-level fit, the shipped
own-facts file and its hash, the build's record, the runtime's choice of calibration and the
nested fit of ``meta-eval factscore-er --facts generated --cv K``."""
from __future__ import annotations

import gzip
import json
import shutil
from dataclasses import replace

import numpy as np
import pytest

from fscore_lite.backends.llm import LLMStats
from fscore_lite.errors import FscoreError
from fscore_lite.factscore.atomic_facts import describe_settings
from fscore_lite.factscore.combiner import line_pair
from fscore_lite.factscore.score import pacc_unclipped
from fscore_lite.manifest import Bundle, stamp_decisions
from fscore_lite.training.labeled import AnnotatedBio
from fscore_lite.training.own_calibration import fit_own_calibration, pair_of
from fscore_lite.training.own_facts import fact_settings, read_own_facts, same_facts, sidecar_for, write_own_facts

from .test_e2e_facts import ScriptedLLM
from .test_verifier import _bundle_with_embedder, tiny_build, tiny_inputs  # noqa: F401 - the tiny trained verifier

VERIFIER = "minilm-l6-factscore-verifier"


# --- the fit ---------------------------------------------------------------------------------

def _bios(rng, shares, pair=(0.7, 0.3), shift=0.0, n_facts=12):
    """Per bio: probabilities whose mean is what ``pair`` predicts for its human share, moved by ``shift``."""
    s, ns = pair
    return [np.clip(rng.normal(ns + h * (s - ns) + shift, 0.1, n_facts), 0, 1) for h in shares]


def test_shift_recovers_the_offset_of_own_facts_and_keeps_the_pairs_spread():
    rng = np.random.default_rng(1)
    shares = rng.uniform(0.2, 0.8, 300)
    # own facts read 0.08 lower than the paper pair predicts; half the bios scored by another fold's pair
    pairs = [(0.7, 0.3) if i % 2 else (0.75, 0.25) for i in range(300)]
    probs = [_bios(rng, [h], p, shift=-0.08, n_facts=40)[0] for h, p in zip(shares, pairs)]
    cal = fit_own_calibration(probs, list(shares), pairs, target=(0.72, 0.28))  # one subject: the level only
    assert cal["n_bios"] == 300 and cal["n_facts"] == 12000 and cal["method"] == "share level"
    assert "n_subjects" not in cal and cal["line"][1] == 1.0
    assert cal["p_supported"] - cal["p_not_supported"] == pytest.approx(0.44, abs=1e-12)  # the target's spread
    assert cal["p_not_supported"] - 0.28 == pytest.approx(-0.08, abs=0.01)  # the offset, in probability
    # applied through the PACC path, the mean share estimate of new bios is their mean human share,
    # also for subjects whose shares differ (the spread is kept, so nothing is pulled to the middle)
    for lo, hi in ((0.2, 0.4), (0.6, 0.8)):
        new = rng.uniform(lo, hi, 200)
        est = [pacc_unclipped(float(p.mean()), cal["p_supported"], cal["p_not_supported"])
               for p in _bios(rng, new, (0.72, 0.28), shift=-0.08, n_facts=40)]
        assert np.mean(est) == pytest.approx(np.mean(new), abs=0.02)
    with pytest.raises(ValueError, match="at least 2 bios"):
        fit_own_calibration([np.array([0.4]), np.array([])], [0.5, 0.5], [(0.7, 0.3)] * 2, (0.7, 0.3))


def test_a_calibration_shifts_each_combiners_own_pair():
    from fscore_lite.factscore.combiner import Combiner

    comb = Combiner(("a",), (0.0,), (1.0,), (0.0,), 0.0, 0.5).with_adjustment(0.8, 0.2)
    moved = comb.with_calibration({"threshold": 0.4, "shift": -0.05, "p_supported": 9.0, "p_not_supported": 9.0})
    assert (moved.threshold, moved.p_supported, moved.p_not_supported) == pytest.approx((0.4, 0.75, 0.15))
    assert pair_of(Combiner(("a",), (0.0,), (1.0,), (0.0,), 0.0, 0.5)) == (1.0, 0.0)
    # a record without a shift (recipe 4): its own share means
    old = comb.with_calibration({"threshold": 0.4, "p_supported": 0.7, "p_not_supported": 0.1})
    assert (old.p_supported, old.p_not_supported) == (0.7, 0.1)


def test_own_threshold_falls_as_the_human_share_rises():
    rng = np.random.default_rng(2)
    probs = _bios(rng, rng.uniform(0.1, 0.9, 50))
    thresholds = [fit_own_calibration(probs, [s] * 50, [(0.7, 0.3)] * 50, (0.7, 0.3))["threshold"]
                  for s in (0.2, 0.4, 0.6, 0.8)]
    assert thresholds == sorted(thresholds, reverse=True) and thresholds[0] > thresholds[-1]


# --- the file --------------------------------------------------------------------------------

def _bio(subject, line, topic, output="Ann Lee is a painter."):
    return AnnotatedBio(subject, line, topic, output, (), ())


SETTINGS = fact_settings("scripted", "s" * 64, {"decomposer": "default"}, 1)


def test_own_facts_file_round_trip_same_bytes_in_any_order_and_its_hash_checked(tmp_path):
    bios = [_bio("ChatGPT", 3, "B"), _bio("InstructGPT", 1, "A"), _bio("ChatGPT", 1, "A")]
    facts = [["B is b."], ["A is a.", "A is é."], []]
    path = tmp_path / "own-facts-dev.jsonl.gz"
    sha = write_own_facts(path, SETTINGS, bios, facts)
    first = path.read_bytes()
    assert sha == write_own_facts(path, SETTINGS, bios[::-1], facts[::-1]) and path.read_bytes() == first
    assert gzip.decompress(first).decode().splitlines()[1].startswith('{"facts": []')  # sorted: ChatGPT line 1 first
    own = read_own_facts(path)
    assert own.sha256 == sha and same_facts(own.settings(), SETTINGS) and own.header["n_bios"] == 3
    assert own.facts_of(bios[1]) == ["A is a.", "A is é."] and own.facts_of(_bio("PerplexityAI", 1, "A")) is None
    with pytest.raises(FscoreError, match="another text"):
        own.facts_of(_bio("ChatGPT", 3, "B", output="Another text."))
    assert not same_facts(own.settings(), SETTINGS | {"llm_sha256": "t" * 64})
    assert same_facts(own.settings(), SETTINGS | {"threads": 2, "llm": "renamed"})  # neither changes what is compared
    # a changed file: an error naming it
    data = gzip.decompress(first).decode().replace("A is a.", "A is not a.")
    path.write_bytes(gzip.compress(data.encode(), mtime=0))
    with pytest.raises(FscoreError, match=f"{path}.*does not match"):
        read_own_facts(path)
    sidecar_for(path).unlink()
    with pytest.raises(FscoreError, match="sha256.json not found"):
        read_own_facts(path)


# --- the build -------------------------------------------------------------------------------

def _fake_own_facts(data, path, settings=SETTINGS):
    """Own facts for every training bio of ``data``: the paper's facts' first half (a stand-in)."""
    from fscore_lite.training.examples import load_examples
    from fscore_lite.training.labeled import wiki_pages

    pages, _ = wiki_pages(data)
    ex = load_examples(data, pages)
    return write_own_facts(path, settings, ex.bios, [b.model_facts()[: max(1, len(b.model_facts()) // 2)]
                                                     for b in ex.bios])


@pytest.fixture(scope="module")
def own_build(tmp_path_factory, tiny_inputs):  # noqa: F811
    root = tmp_path_factory.mktemp("verifier-own")
    path = root / "own-facts-dev.jsonl.gz"
    sha = _fake_own_facts(tiny_inputs["data"], path)
    from fscore_lite.settings import Settings
    from fscore_lite_models.verifier.build import SnliConfig, VerifierConfig, train_verifier

    bundle_dir = _bundle_with_embedder(tiny_inputs["embed_bundle"], root / "models")
    settings = Settings(home=root / "home", threads=1)
    cfg = VerifierConfig(threads=1, folds=2, snli=SnliConfig(pairs=12, batch_size=4, max_length=32, epochs=2.0))
    report = train_verifier(bundle_dir, settings, cfg, data=tiny_inputs["data"], log=lambda m: None,
                            snli=tiny_inputs["snli"], checkpoint=tiny_inputs["checkpoint"], own_facts=path)
    return bundle_dir, settings, report, path, sha


def test_build_records_the_own_facts_calibration_and_refits_on_a_changed_file(own_build, tiny_build, tmp_path):  # noqa: F811
    from fscore_lite.commands.models import _trained_with
    from fscore_lite_models.verifier.build import BUILDER, SnliConfig, VerifierConfig

    bundle_dir, _, report, path, sha = own_build
    entry = Bundle(bundle_dir).get(VERIFIER)
    cal = entry.extra["own_facts_calibration"]
    assert cal["calibrated_for_facts"] == SETTINGS | {"facts_file_sha256": sha}
    assert 0 <= cal["threshold"] <= 1 and cal["n_bios"] == report["bios"] and report["own_facts_sha256"] == sha
    comb = entry.extra["combiner"]
    assert cal["method"] == "share level" and cal["line"][1] == 1.0  # the level on the paper facts' line
    assert (cal["p_supported"], cal["p_not_supported"]) == pytest.approx(
        line_pair((comb["p_supported"], comb["p_not_supported"]), *cal["line"]))
    # the same combiner as a build without the file: only the calibration of generated facts is added
    plain = Bundle(tiny_build[0]).get(VERIFIER)
    assert entry.extra["combiner"] == plain.extra["combiner"] and "own_facts_calibration" not in plain.extra
    # decisions_sha256 covers it
    assert entry.decisions_sha256 == entry.recorded_decisions_sha256 != plain.recorded_decisions_sha256
    moved = {**entry.extra, "own_facts_calibration": cal | {"threshold": cal["threshold"] / 2}}
    assert stamp_decisions(moved)["decisions_sha256"] != entry.recorded_decisions_sha256
    # --if-missing: the same file → nothing to do; a changed file or none → rebuild
    cfg = VerifierConfig(threads=1, folds=2, snli=SnliConfig(pairs=12, batch_size=4, max_length=32, epochs=2.0))
    data = Bundle(bundle_dir).get(VERIFIER).extra["training"]["data"]
    from pathlib import Path

    assert _trained_with(bundle_dir, cfg, Path(data), BUILDER, path)
    assert not _trained_with(bundle_dir, cfg, Path(data), BUILDER, None)
    assert not _trained_with(tiny_build[0], cfg, Path(data), BUILDER, path)
    other = tmp_path / "own-facts-dev.jsonl.gz"
    _fake_own_facts(data, other, SETTINGS | {"threads": 2})
    assert not _trained_with(bundle_dir, cfg, Path(data), BUILDER, other)


# --- the runtime -----------------------------------------------------------------------------

class FactsLLM(ScriptedLLM):
    stats = LLMStats()


def _bundle_with_own(src, dest, settings, threshold=0.999999, line=(-0.1, 1.2)):
    """A copy of the tiny bundle whose verifier carries an own-facts calibration fitted for ``settings``
    (its share means: the combiner's mapped by the share ``line``, as the build records them)."""
    from fscore_lite.factscore.combiner import Combiner

    shutil.copytree(src, dest)
    bundle = Bundle(dest)
    entry = bundle.get(VERIFIER)
    pair = line_pair(Combiner.from_json(entry.extra["combiner"]).pair, *line)
    cal = {"threshold": threshold, "p_supported": pair[0], "p_not_supported": pair[1], "line": list(line),
           "method": "share line", "n_subjects": 3,
           "n_bios": 9, "n_facts": 90, "calibrated_for_facts": settings | {"facts_file_sha256": "f" * 64}}
    bundle.add(replace(entry, extra=stamp_decisions({**entry.extra, "own_facts_calibration": cal})))
    bundle.save()
    return dest


def _score(bundle_dir, settings, tmp_path, name, rows, **options):
    from fscore_lite.factscore.pipeline import FactScorer, ScoreOptions, score_file

    opts = ScoreOptions(verifier="trained", gamma=0, progress=False, **options)
    s = settings.with_(models_dir=bundle_dir)
    inp = tmp_path / f"{name}.input.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / f"{name}.jsonl"
    summary = score_file(inp, out, s, opts, scorer=FactScorer(s, opts, llm=FactsLLM()))
    return out.read_bytes(), summary


def test_runtime_applies_the_own_calibration_only_to_generated_facts_of_its_settings(tiny_build, tmp_path):  # noqa: F811
    from fscore_lite.build_step import ensure_store
    from fscore_lite.store import open_store
    from fscore_lite.training.labeled import wiki_pages

    bundle_dir, settings, _ = tiny_build
    _, files = wiki_pages(Bundle(bundle_dir).get(VERIFIER).extra["training"]["data"])
    store = ensure_store(files, settings.with_(models_dir=bundle_dir), None)
    settings = settings.with_(store=store)
    topic = open_store(store).titles()[0]
    generated = [{"topic": topic, "output": f"{topic} is a French footballer who plays as a defender. "
                                            "He was born in 1985 in Bastia."}]
    given = [{"topic": topic, "facts": ["Ann Lee is a painter.", f"{topic} is a person."]}]
    fitted_for = {"llm": "scripted", "llm_sha256": FactsLLM.sha256,
                  "atomic_facts": describe_settings(False, "default"), "threads": 1}
    own_dir = _bundle_with_own(bundle_dir, tmp_path / "own", fitted_for)
    other_dir = _bundle_with_own(bundle_dir, tmp_path / "other", fitted_for | {"llm_sha256": "t" * 64})

    # generated facts of the recorded settings: the own threshold decides, the own share means adjust
    plain_bytes, plain = _score(bundle_dir, settings, tmp_path, "plain", generated)
    own_bytes, own = _score(own_dir, settings, tmp_path, "own", generated)
    rec, base = json.loads(own_bytes), json.loads(plain_bytes)
    assert rec["status"] == "ok" and rec["decisions"]
    assert [d["probability"] for d in rec["decisions"]] == [d["probability"] for d in base["decisions"]]
    assert not any(d["is_supported"] for d in rec["decisions"])  # threshold 0.999999
    assert rec["readable_share"] == base["readable_share"]  # a response's own score stays its mean probability
    ps, pns = (Bundle(own_dir).get(VERIFIER).extra["own_facts_calibration"][k] for k in ("p_supported", "p_not_supported"))
    # (both fields are rounded to 6 places, and the division by the spread magnifies that)
    assert rec["pacc_share_unclipped"] == pytest.approx((rec["readable_share"] - pns) / (ps - pns), abs=1e-4)
    assert own["score_adjusted"] == pytest.approx(min(1, max(0, rec["pacc_share_unclipped"])), abs=1e-6)
    note = own["settings"]["calibration"]
    assert note["fitted_for_these_facts"] and note["applied"].startswith("own facts") and "warning" not in note
    assert note["own_facts"]["fitted_for"]["llm_sha256"] == FactsLLM.sha256
    assert note["own_facts"]["line"] == [-0.1, 1.2] and "-0.1000 + 1.2000 × PACC" in note["own_facts"]["fitted_on"]
    assert plain["settings"]["calibration"]["fitted_for_these_facts"] is False  # today's note, unchanged

    # other fact settings (another LLM sha256, or another decomposer): the paper calibration, said so
    other_bytes, other = _score(other_dir, settings, tmp_path, "other", generated)
    assert other_bytes == plain_bytes
    assert other["settings"]["calibration"]["applied"].startswith("paper facts")
    assert "llm_sha256" in other["settings"]["calibration"]["warning"]
    ref_own, ref = _score(own_dir, settings, tmp_path, "ref-own", generated, decomposer="reference")
    ref_plain, _ = _score(bundle_dir, settings, tmp_path, "ref-plain", generated, decomposer="reference")
    assert ref_own == ref_plain and "atomic_facts" in ref["settings"]["calibration"]["warning"]

    # facts given in the input: always the paper calibration, the same bytes as without the record
    given_own, g = _score(own_dir, settings, tmp_path, "given-own", given)
    given_plain, gp = _score(bundle_dir, settings, tmp_path, "given-plain", given)
    assert given_own == given_plain
    assert g["settings"]["calibration"]["applied"].startswith("paper facts") and "warning" not in g["settings"]["calibration"]
    assert gp["settings"]["calibration"] == {"fitted_on": gp["settings"]["calibration"]["fitted_on"],
                                             "run_facts": "given in the input", "fitted_for_these_facts": False}


# --- meta-eval: the nested fit ---------------------------------------------------------------

def test_meta_eval_nested_own_calibration_never_sees_the_held_out_fold(own_build, monkeypatch):
    from fscore_lite.metaeval.e2e_er import format_e2e_report, run_e2e_cv
    from fscore_lite.training import own_calibration
    from fscore_lite.training.examples import topic_folds

    bundle_dir, settings, _, _, _ = own_build
    data = Bundle(bundle_dir).get(VERIFIER).extra["training"]["data"]
    settings = settings.with_(models_dir=bundle_dir)
    own_path = bundle_dir.parent / "meta-own-facts.jsonl.gz"
    _fake_own_facts(data, own_path, fact_settings("scripted", FactsLLM.sha256, describe_settings(False, "default"), 1))
    seen = []
    real = own_calibration.cross_validate
    monkeypatch.setattr(own_calibration, "cross_validate",
                        lambda ex, names, k, l2, topics, adjust: seen.append(set(topics)) or real(ex, names, k, l2,
                                                                                                   topics=topics,
                                                                                                   adjust=adjust))
    rep = run_e2e_cv(data, settings, folds=2, progress=False, llm=FactsLLM(), own_facts_file=own_path)
    assert rep["facts_source"].startswith(f"read from {own_path.name}")
    folds = topic_folds(sorted({b["topic"] for b in rep["per_bio"]}), 2)
    assert {b["fold"] for b in rep["per_bio"]} == {0, 1}
    fitted = {int(k): c for k, c in rep["own_calibration"].items() if c is not None}
    assert fitted, "no fold had enough training bios"
    for k, c in fitted.items():
        assert c["fit_topics"] and all(folds[t] != k for t in c["fit_topics"])  # no held-out topic in the fit
    # each inner CV ran on exactly the training topics of one outer fold: none of that fold's own
    trains = [{t for t in folds if folds[t] != k} for k in (0, 1)]
    assert seen and all(s in trains for s in seen)
    for b in rep["per_bio"]:
        assert (b["own_calibrated"] is not None) == (b["fold"] in fitted)
        assert b["own_facts"]  # read from the file
    rows = [r for r in rep["subjects"] if r.get("own_calibrated")]
    assert rows and all(0 <= r["own_calibrated"]["estimated"] <= 100 for r in rows)
    assert all(r["own_calibrated_minus_paper"]["ci95"] for r in rows)
    text = format_e2e_report(rep)
    assert "own-facts calibration" in text and "fitted on the other folds' bios only" in text
    assert json.loads(json.dumps(rep)) == rep


def test_make_own_facts_writes_a_fixed_sample_with_its_settings_and_the_same_bytes_twice(tiny_inputs, tmp_path):  # noqa: F811
    from fscore_lite.settings import Settings
    from fscore_lite_models.verifier.own_facts import make_own_facts

    settings = Settings(home=tmp_path / "home", threads=1, use_cache=False)
    out = tmp_path / "own-facts-dev.jsonl.gz"
    made = make_own_facts(settings, out=out, data=tiny_inputs["data"], limit=1, log=lambda m: None, progress=False,
                          llm=FactsLLM())
    first = out.read_bytes()
    own = read_own_facts(out)
    assert own.sha256 == made["sha256"] and made["n_bios"] == len(own.records) == 3  # one bio per subject
    assert own.settings() == fact_settings("scripted", FactsLLM.sha256, describe_settings(False, "default"), 1)
    assert own.header["limit"] == 1 and {s for s, _ in own.records} == {"InstructGPT", "ChatGPT", "PerplexityAI"}
    assert all(set(r["facts"]) <= {"Ann Lee is a painter."} for r in own.records.values())
    again = make_own_facts(settings, out=out, data=tiny_inputs["data"], limit=1, log=lambda m: None, progress=False,
                           llm=FactsLLM())
    assert out.read_bytes() == first and again["sha256"] == made["sha256"]
    with pytest.raises(FscoreError, match="unknown subject"):
        make_own_facts(settings, out=out, data=tiny_inputs["data"], subjects=("Llama",), llm=FactsLLM())
