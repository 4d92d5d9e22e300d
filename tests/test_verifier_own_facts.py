"""The verifier trained and calibrated on the facts it makes: the shipped own-facts file and its
hash, the silver labels, the build's calibrations, the runtime's choice of calibration and the
held-out refits of ``meta-eval factscore-er --cv K`` (the LM held out)."""
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
from fscore_lite.factscore.calibration import GIVEN
from fscore_lite.manifest import Bundle, stamp_decisions
from fscore_lite.training.labeled import AnnotatedBio, AnnotatedSentence, HumanFact
from fscore_lite.training.own_facts import fact_settings, read_own_facts, same_facts, sidecar_for, write_own_facts

from .test_e2e_facts import ScriptedLLM
from .test_verifier import _bundle_with_embedder, tiny_build, tiny_inputs  # noqa: F401 - the tiny trained verifier

VERIFIER = "minilm-l6-factscore-verifier"


# --- silver labels ---------------------------------------------------------------------------

class WordsEmbedder:
    """Bag-of-words vectors over a fixed vocabulary: cosine = shared words."""

    VOCAB = ("ann", "lee", "painter", "born", "ohio", "paris", "1950", "won", "prize", "singer")

    def encode(self, texts):
        return np.asarray([[float(w in t.lower().replace(".", " ").split()) + 1e-3 for w in self.VOCAB]
                           for t in texts])


def test_silver_labels_take_the_label_of_the_closest_annotated_fact():
    from fscore_lite.training.silver import agreement, label_pool, silver_labels

    bio = AnnotatedBio("ChatGPT", 1, "Ann Lee", "...", (), (
        AnnotatedSentence("Ann Lee is a painter born in Ohio.", True, ("Ann Lee is a painter.",),
                          (HumanFact("Ann Lee is a painter.", "S"), HumanFact("Ann Lee was born in Ohio.", "NS"))),
        AnnotatedSentence("She won a prize.", True, (), (HumanFact("Ann Lee won a prize.", "IR"),)),
        AnnotatedSentence("Singer too.", False, ("Ann Lee is a singer.",), ())))
    assert label_pool(bio) == [("Ann Lee is a painter.", 1.0), ("Ann Lee was born in Ohio.", 0.0),
                               ("Ann Lee won a prize.", 0.0), ("Ann Lee is a singer.", 0.0)]  # IR, irrelevant: NS
    facts = [(0, "Lee is a painter."), (0, "Ann was born in Ohio."), (0, "Lee won the prize."), (0, "A singer.")]
    labels, sims = silver_labels([bio], facts, WordsEmbedder())
    assert labels == [1.0, 0.0, 0.0, 0.0] and all(0.5 < x <= 1.0 + 1e-9 for x in sims)
    rows = agreement(labels, [0] * 4, [0.25], ["ChatGPT"])
    assert rows == [{"subject": "ChatGPT", "n_bios": 1, "human": 25.0, "silver": 25.0, "per_bio_mae": 0.0}]


def test_silver_labels_are_the_same_with_the_bios_dealt_to_more_embedders():
    from fscore_lite.training.silver import silver_labels

    def bio(topic, facts):
        return AnnotatedBio("ChatGPT", 1, topic, "...", (), (
            AnnotatedSentence("s", True, (), tuple(HumanFact(t, lab) for t, lab in facts)),))

    bios = [bio("Ann Lee", [("Ann Lee is a painter.", "S"), ("Ann Lee won a prize.", "NS")]),
            bio("Lee", [("Lee was born in Ohio.", "NS"), ("Lee is a singer.", "S")]),
            bio("Paris", [("Ann was born in Paris in 1950.", "S")]),
            AnnotatedBio("ChatGPT", 2, "empty", "...", (), ())]  # no pool: label 0
    facts = [(0, "Lee won the prize."), (1, "A singer."), (2, "Born 1950."), (0, "A painter."),
             (3, "Ann Lee."), (1, "Born in Ohio."), (2, "Paris.")]
    one = silver_labels(bios, facts, WordsEmbedder())
    assert one[0] == [0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0]
    for more in ([WordsEmbedder()], [WordsEmbedder(), WordsEmbedder()]):
        assert silver_labels(bios, facts, WordsEmbedder(), more) == one


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
                            snli=tiny_inputs["snli"], checkpoint=tiny_inputs["checkpoint"], own_facts=[path])
    return bundle_dir, settings, report, path, sha


def test_build_trains_on_the_own_facts_gives_their_decomposer_a_calibration_and_refits_on_a_changed_file(
        own_build, tiny_build, tmp_path):  # noqa: F811
    from pathlib import Path

    from fscore_lite.commands.models import _trained_with
    from fscore_lite_models.verifier.build import BUILDER, SnliConfig, VerifierConfig

    bundle_dir, _, report, path, sha = own_build
    entry = Bundle(bundle_dir).get(VERIFIER)
    cals = {c["facts"]: c for c in entry.extra["calibrations"]}
    assert set(cals) == {GIVEN, "default"}
    assert cals["default"]["fitted_for"] == SETTINGS | {"facts_file_sha256": sha}
    assert cals["default"]["n_bios"] == report["bios"] and 0 < cals["default"]["prior"] < 1
    assert report["own_facts"] == [{"file": path.name, "decomposer": "default", "sha256": sha, "bios": report["bios"],
                                    "facts": report["facts"]["own:default"]}]
    assert {r["subject"] for r in report["silver_labels"]["own:default"]} == {"InstructGPT", "ChatGPT", "PerplexityAI"}
    assert set(report["held_out"]["lm"]) == {"model", "own:default", "f1_ns"}
    # the combiner learnt from the own facts too: not the one a build without the file fits
    plain = Bundle(tiny_build[0]).get(VERIFIER)
    assert entry.extra["combiner"] != plain.extra["combiner"] and len(plain.extra["calibrations"]) == 1
    # decisions_sha256 covers the calibrations
    assert entry.decisions_sha256 == entry.recorded_decisions_sha256 != plain.recorded_decisions_sha256
    moved = {**entry.extra, "calibrations": [c | {"prior": c["prior"] / 2} for c in entry.extra["calibrations"]]}
    assert stamp_decisions(moved)["decisions_sha256"] != entry.recorded_decisions_sha256
    # --if-missing: the same files → nothing to do; a changed file or none → rebuild
    cfg = VerifierConfig(threads=1, folds=2, snli=SnliConfig(pairs=12, batch_size=4, max_length=32, epochs=2.0))
    data = Path(entry.extra["training"]["data"])
    assert _trained_with(bundle_dir, cfg, data, BUILDER, [path])
    assert not _trained_with(bundle_dir, cfg, data, BUILDER, [])
    assert not _trained_with(tiny_build[0], cfg, data, BUILDER, [path])
    other = tmp_path / "own-facts-dev.jsonl.gz"
    _fake_own_facts(data, other, SETTINGS | {"threads": 2})
    assert not _trained_with(bundle_dir, cfg, data, BUILDER, [other])


# --- the runtime -----------------------------------------------------------------------------

class FactsLLM(ScriptedLLM):
    stats = LLMStats()


def _bundle_fitted_for(src, dest, settings):
    """A copy of the own-facts bundle whose decomposer calibration says it was fitted for ``settings``."""
    shutil.copytree(src, dest)
    bundle = Bundle(dest)
    entry = bundle.get(VERIFIER)
    cals = [c | {"fitted_for": settings | {"facts_file_sha256": "f" * 64}} if c["facts"] != GIVEN else c
            for c in entry.extra["calibrations"]]
    bundle.add(replace(entry, extra=stamp_decisions({**entry.extra, "calibrations": cals})))
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
    return [json.loads(x) for x in out.read_text().splitlines()], summary


def test_runtime_applies_a_decomposers_calibration_only_to_its_generated_facts(own_build, tmp_path):
    from fscore_lite.build_step import ensure_store
    from fscore_lite.store import open_store
    from fscore_lite.training.labeled import wiki_pages

    bundle_dir, settings, _, _, _ = own_build
    _, files = wiki_pages(Bundle(bundle_dir).get(VERIFIER).extra["training"]["data"])
    store = ensure_store(files, settings.with_(models_dir=bundle_dir), None)
    settings = settings.with_(store=store)
    topic = open_store(store).titles()[0]
    output = f"{topic} is a French footballer who plays as a defender. He was born in 1985 in Bastia."
    rows = [{"topic": topic, "output": output}, {"topic": topic, "facts": ["Ann Lee is a painter.", f"{topic} is a person."]}]
    fitted_for = {"llm": "scripted", "llm_sha256": FactsLLM.sha256,
                  "atomic_facts": describe_settings(False, "default"), "threads": 1}
    ours = _bundle_fitted_for(bundle_dir, tmp_path / "ours", fitted_for)
    other = _bundle_fitted_for(bundle_dir, tmp_path / "other", fitted_for | {"llm_sha256": "t" * 64})
    cals = {c["facts"]: c for c in Bundle(ours).get(VERIFIER).extra["calibrations"]}

    recs, summary = _score(ours, settings, tmp_path, "ours", rows)
    assert [r["calibration"] for r in recs] == ["default", GIVEN] and [r["generated"] for r in recs] == [True, False]
    note = summary["settings"]["calibration"]
    assert note["responses"] == {GIVEN: 1, "default": 1} and "warning" not in note
    assert note["calibrations"]["default"]["fitted_for"]["llm_sha256"] == FactsLLM.sha256
    # the run share moved every fact; the responses' scores average to the run's
    for r in recs:
        assert all(d["is_supported"] == (d["probability"] > 0.5) for d in r["decisions"])
        assert r["init_score"] == pytest.approx(np.mean([d["probability"] for d in r["decisions"]]), abs=2e-6)
    assert summary["score"] == pytest.approx(np.mean([r["score"] for r in recs]))
    assert 0 < summary["run_share"] < 1

    # other fact settings (another LLM sha256): the given facts' calibration, said so
    recs2, summary2 = _score(other, settings, tmp_path, "other", rows)
    assert [r["calibration"] for r in recs2] == [GIVEN, GIVEN]
    assert summary2["settings"]["calibration"]["responses"] == {GIVEN: 2}
    assert "no calibration was fitted" in summary2["settings"]["calibration"]["warning"]
    # the reference decomposer's facts are not the default's: the given facts' calibration
    recs3, _ = _score(ours, settings, tmp_path, "ref", rows[:1], decomposer="reference")
    assert recs3[0]["calibration"] == GIVEN
    # the calibrated probabilities differ between the two kinds only by their calibrations
    z = [d for d in recs[0]["decisions"]]
    assert [d["verifier_probability"] for d in z] != [d["verifier_probability"] for d in recs2[0]["decisions"]]
    assert cals["default"]["scale"] != cals[GIVEN]["scale"]


# --- meta-eval: every fitted number refitted without the held-out LM and topics ----------------

def test_meta_eval_held_out_lm_never_fits_on_the_lm_or_the_topics_it_scores(own_build, monkeypatch):
    from fscore_lite.metaeval.heldout import format_report, run_heldout
    from fscore_lite.training import heldout
    from fscore_lite.training.examples import topic_folds

    bundle_dir, settings, _, path, _ = own_build
    data = Bundle(bundle_dir).get(VERIFIER).extra["training"]["data"]
    settings = settings.with_(models_dir=bundle_dir)
    seen = []
    real = heldout.fit_verifier
    monkeypatch.setattr(heldout, "fit_verifier", lambda ex, train, *a: seen.append((ex, set(train))) or real(ex, train, *a))
    rep = run_heldout(data, settings, folds=2, hold_out="lm", facts="generated", progress=False, llm=FactsLLM(),
                      own_facts_files=[path])
    # the build's file was made with other fact settings than this run's: its facts are made again
    assert rep["facts_source"].startswith("generated by this run for")
    assert rep["own_facts_files"][0]["sha256"] == read_own_facts(path).sha256
    with pytest.raises(FscoreError, match="was fitted on own-facts-dev.jsonl.gz"):
        run_heldout(data, settings, folds=2, progress=False, own_facts_files=[])
    ex = seen[0][0]
    folds = topic_folds(ex.topics, 2)
    lm_splits = [train for _, train in seen[:6]]  # 3 LMs × 2 folds first, then topic-only, then F1's refits
    for (subject, fold), train in zip([(s, f) for s in ("InstructGPT", "ChatGPT", "PerplexityAI") for f in (0, 1)],
                                      lm_splits):
        assert train and all(ex.bios[i].subject != subject and folds[ex.bios[i].topic] != fold for i in train)
    assert {r["subject"] for r in rep["hold_out_lm"]} == {"InstructGPT", "ChatGPT", "PerplexityAI"}
    for r in rep["hold_out_lm"]:
        assert set(r) >= {"subject", "human", "estimate", "er", "ci95", "per_bio_mae"}
        assert r["er"] == pytest.approx(abs(r["estimate"] - r["human"]))
    assert rep["hold_out_topic"] and rep["own_minus_paper_lm"] and rep["paper_lm"]
    text = format_report(rep)
    assert "leave-one-LM-out" in text and "own − paper on the same bios" in text
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
