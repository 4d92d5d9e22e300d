"""Own facts end to end: the named fact filters, the readable per-response score with PACC on
the aggregate, the decomposer proxy and the end-to-end meta-eval's per-subject table."""
from __future__ import annotations

import json

import numpy as np
import pytest

from fscore_lite.factscore import atomic_facts as af
from fscore_lite.factscore import fact_filters as ff
from .test_verifier import tiny_build, tiny_inputs  # noqa: F401 - the tiny trained verifier, used by name

CHAIN = ["The Edition is a translation.", "The Edition is a translation and elucidation.",
         "The Edition is a translation and elucidation of the Talmud.",
         "The Edition is a translation and elucidation of the Talmud into English."]


def test_filters_remove_each_failure_mode():
    assert ff.strip_citations("It published prayer books[1].") == "It published prayer books."
    assert ff.strip_citations("It won [2, 3] prizes [citation needed].") == "It won prizes."
    assert ff.is_fragment("He.") and ff.is_fragment("She is.") and not ff.is_fragment("He was born.")
    loop = "Sandy is a character in a movie that is famous in a movie that is famous."
    assert ff.cut_loop(loop) == "Sandy is a character in a movie that is famous."
    assert ff.cut_loop("He was born in Ohio.") == "He was born in Ohio."
    # a chain of 3 or more growing facts keeps its first and last; a pair (the paper's style) stays
    assert ff.collapse_chains(CHAIN) == [CHAIN[0], CHAIN[-1]]
    assert ff.collapse_chains(CHAIN[:2]) == CHAIN[:2]
    pairs = [("s1", ["He.", "Ann Lee is a painter[1].", *CHAIN]), ("s2", ["Ann Lee is a painter.", "She paints."])]
    no_split = tuple(f for f in ff.FILTERS if f != "conjunctions")  # tests/test_conjunctions.py has the split
    assert ff.apply_filters(pairs, no_split) == [("s1", ["Ann Lee is a painter.", CHAIN[0], CHAIN[-1]]),
                                                 ("s2", ["She paints."])]
    assert ff.apply_filters(pairs, ("fragments",))[0][1][0] == "Ann Lee is a painter[1]."  # one filter alone


def test_degenerate_kinds_are_counted_in_response_order():
    facts = ["He.", "Ann Lee is a painter[1].", *CHAIN, "Ann Lee is a painter.", "A b c d a b c."]
    assert ff.degenerate_counts(facts) == {"fragment": 1, "citation": 1, "loop": 3, "duplicate": 1}
    assert ff.degenerate_counts(["Ann Lee is a painter.", "She was born in Ohio."]) == {}


class ScriptedLLM:
    name, sha256 = "scripted", "s" * 64

    def generate(self, prompt, max_tokens, stop):
        return " - He.\n- Ann Lee is a painter[1].\n- Ann Lee is a painter[1].\n"


def test_reference_decomposer_keeps_the_facts_and_default_filters_them():
    text = "Ann Lee is a painter[1] from Ohio."  # PerplexityAI keeps its citation markers
    ref = af.AtomicFactGenerator(ScriptedLLM(), decomposer="reference")
    default = af.AtomicFactGenerator(ScriptedLLM())
    raw = ["He.", "Ann Lee is a painter[1].", "Ann Lee is a painter[1]."]
    assert ref.facts_for_sentence(text) == raw
    assert [f for s in ref.run(text) for f in s.facts] == [f for _, fs in af.postprocess([(text, raw)], []) for f in fs]
    assert [f for s in default.run(text) for f in s.facts] == ["Ann Lee is a painter."]
    assert ref.describe()["decomposer"] == "reference" and "none" in ref.describe()["filters"]
    assert set(default.describe()["filters"]) == set(ff.FILTERS)
    assert all("deviation" in v for v in default.describe()["filters"].values())


def test_bad_decomposer_is_a_clear_error():
    from fscore_lite.errors import FscoreError
    from fscore_lite.factscore.options import ScoreOptions

    with pytest.raises(FscoreError, match="--decomposer"):
        ScoreOptions(decomposer="fancy").validate()


# --- item 4: a response's readable score, PACC on the run's aggregate ---

def _comb():
    from fscore_lite.factscore.combiner import Combiner

    return Combiner(("a",), (0.0,), (1.0,), (1.0,), 0.0, 0.5).with_adjustment(0.7, 0.3)


def test_readable_share_rises_with_probabilities_and_is_never_0_with_a_supported_fact():
    from fscore_lite.factscore.score import response_shares

    comb = _comb()
    low = response_shares(comb, [0.6, 0.05, 0.05])  # one fact decided supported (0.6 > 0.5)
    assert low["readable_share"] > 0 and low["pacc_share_unclipped"] < 0  # per-response PACC would clip to 0
    assert comb.adjusted_share([0.6, 0.05, 0.05]) == 0.0
    higher = response_shares(comb, [0.7, 0.05, 0.05])
    assert higher["readable_share"] > low["readable_share"]
    assert response_shares(comb.with_adjustment(0.3, 0.3), [0.6]) == {}  # no PACC means: the count stays


def test_aggregate_keeps_the_readable_score_and_the_adjusted_one():
    from fscore_lite.factscore.score import aggregate, response_shares

    comb = _comb()
    items = []
    for probs in ([0.6, 0.05, 0.05], [0.9, 0.8, 0.75], [0.5, 0.4]):
        dec = [{"is_supported": p > 0.5} for p in probs]
        items.append({"status": "ok", "decisions": dec, **response_shares(comb, probs)})
    out = aggregate(items, gamma=0)
    means = [np.mean(p) for p in ([0.6, 0.05, 0.05], [0.9, 0.8, 0.75], [0.5, 0.4])]
    assert out["score"] == pytest.approx(np.mean(means), abs=1e-6)
    raw = [(m - 0.3) / 0.4 for m in means]
    assert out["score_adjusted"] == pytest.approx(min(1, max(0, np.mean(raw))), abs=1e-5)
    assert out["init_score_adjusted"] == pytest.approx(out["score_adjusted"], abs=1e-5)
    lo, hi = out["score_adjusted_ci95"]
    assert 0 <= lo <= out["score_adjusted"] <= hi <= 1
    assert out["score_by_decisions"] == pytest.approx(np.mean([1 / 3, 1, 0]))
    # the same items without shares: the reference's counting, no adjusted fields
    plain = aggregate([{"status": "ok", "decisions": it["decisions"]} for it in items], gamma=0)
    assert "score_adjusted" not in plain and plain["score"] == pytest.approx(out["score_by_decisions"])


# --- the proxy and the end-to-end table ---

def test_proxy_compares_facts_with_human_facts_by_token_overlap():
    from fscore_lite.metaeval.decomposer_proxy import compare, entails

    assert entails("Ann Lee is an American painter.", "Ann Lee is a painter.")
    assert not entails("Ann Lee is a painter.", "Ann Lee was born in Ohio.")
    got = compare([["Ann Lee is a painter.", "He."], ["Bo sings."]],
                  [["Ann Lee is a painter.", "Ann Lee is American."], ["Bo sings.", "Bo dances."]])
    assert got["facts_per_sentence"] == 1.5 and got["human_facts_per_sentence"] == 2
    assert got["coverage"] == 0.5 and got["precision"] == pytest.approx(2 / 3)
    assert got["degenerate_share"] == pytest.approx(1 / 3)


def test_proxy_sample_is_fixed_and_from_annotated_sentences(data_dir):
    from fscore_lite.metaeval.decomposer_proxy import sample_sentences
    from fscore_lite.metaeval.factscore_er import wiki_pages

    pages, _ = wiki_pages(data_dir)
    five = sample_sentences(data_dir, pages, 5)
    assert five == sample_sentences(data_dir, pages, 10)[:5] and len(five) == 5
    assert all(t in pages and h for t, _, h in five)


def test_subject_rows_pair_own_and_paper_by_bio():
    from fscore_lite.metaeval.e2e_er import bio_scores, record_scores, subject_rows
    from fscore_lite.training.labeled import AnnotatedBio, AnnotatedSentence, HumanFact

    def bio(topic, line):
        s = AnnotatedSentence("x", True, ("A b.", "C d."), (HumanFact("A b.", "S"), HumanFact("C d.", "NS")))
        return AnnotatedBio("ChatGPT", line, topic, "x", (), (s,))

    comb = _comb()
    bios = [bio(f"T{i}", i) for i in range(4)]
    own = [bio_scores(comb, np.asarray(p)) for p in ([0.6, 0.2], [0.8], [0.3, 0.3, 0.9], [0.7, 0.7])]
    paper = [bio_scores(comb, np.asarray(p)) for p in ([0.7, 0.6], [0.5, 0.9], [0.3, 0.8], [0.7, 0.2])]
    facts = [["A b.", "He."], ["A b."], ["A b.", "C d.", "E f."], ["A b.", "C d."]]
    rows = subject_rows(bios, [0.5] * 4, own + [], paper, facts)
    (r,) = rows
    assert r["n_bios"] == 4 and r["human"] == 50
    diff = 100 * np.mean([o["pacc"] - p["pacc"] for o, p in zip(own, paper)])
    assert r["own_minus_paper"]["difference"] == pytest.approx(diff)
    lo, hi = r["own_minus_paper"]["ci95"]
    assert lo <= diff <= hi
    assert r["facts_per_response"] == {"own": 2.0, "paper": 2.0, "human": 2.0}
    assert r["degenerate_share"] == pytest.approx(1 / 8) and r["degenerate_kinds"] == {"fragment": 1}
    assert r["own"]["estimated"] == pytest.approx(100 * min(1, max(0, np.mean([o["pacc"] for o in own]))))
    # a bio without own facts is left out of both columns
    rows2 = subject_rows(bios, [0.5] * 4, [None] + own[1:], paper, facts)
    assert rows2[0]["n_bios"] == 3 and rows2[0]["n_no_own_facts"] == 1
    rec = {"status": "ok", "init_score": 0.6, "pacc_share_unclipped": -0.1,
           "decisions": [{"is_supported": True}, {"is_supported": False}]}
    assert record_scores(rec) == {"readable": 0.6, "decisions": 0.5, "pacc": -0.1, "pacc_clipped": 0.0}
    assert record_scores({"status": "no_facts"}) is None


def test_factscore_er_refuses_bad_fact_options(tmp_path):
    from typer.testing import CliRunner

    from fscore_lite.cli import app

    r = CliRunner().invoke(app, ["meta-eval", "factscore-er", "--facts", "mine", "--data", str(tmp_path)])
    assert r.exit_code != 0 and "--facts must be paper or generated" in str(r.exception)
    r = CliRunner().invoke(app, ["meta-eval", "factscore-er", "--facts", "generated", "--cv", "5", "--data", str(tmp_path)])
    assert r.exit_code != 0 and "--verifier trained" in str(r.exception)
    assert "--decomposer" in CliRunner().invoke(app, ["score", "--help"], terminal_width=200).output


def test_proxy_on_two_sentences_with_the_test_llm(data_dir, test_llm):
    from fscore_lite.metaeval.decomposer_proxy import run_proxy
    from fscore_lite.settings import Settings

    rep = run_proxy(data_dir, Settings(threads=1), limit=2, progress=False, llm=test_llm)
    assert rep["sentences"] == 2 and set(rep["variants"]) == {"reference", *ff.FILTERS, "all filters"}
    for v in rep["variants"].values():
        assert v["facts_per_sentence"] >= 0 and v["human_facts_per_sentence"] > 0
    assert json.loads(json.dumps(rep)) == rep


def test_calibration_note_says_when_the_run_facts_differ():
    from fscore_lite.factscore.score import PAPER_CALIBRATION, calibration_note

    assert calibration_note(None, 5, "default") is None  # LM judge: nothing fitted
    given = calibration_note({}, 0, "default")
    assert given["fitted_on"] == PAPER_CALIBRATION and given["run_facts"] == "given in the input"
    assert "warning" not in given
    own = calibration_note({}, 12, "default")
    assert not own["fitted_for_these_facts"] and "warning" in own
    fitted = calibration_note({"calibrated_for_facts": {"decomposer": "default"}}, 12, "default")
    assert fitted["fitted_for_these_facts"] and "warning" not in fitted
    assert "warning" in calibration_note({"calibrated_for_facts": {"decomposer": "default"}}, 12, "reference")


def test_a_scored_run_keeps_readable_scores_and_the_adjusted_aggregate(tiny_build, tmp_path):  # noqa: F811
    """Through ``score_file`` with the tiny trained verifier and facts given in the input."""
    from fscore_lite.factscore.pipeline import ScoreOptions, score_file
    from fscore_lite.manifest import Bundle
    from fscore_lite.metaeval.factscore_er import ensure_store, wiki_pages

    bundle_dir, settings, _ = tiny_build
    entry = Bundle(bundle_dir).get("minilm-l6-factscore-verifier")
    _, files = wiki_pages(entry.extra["training"]["data"])
    settings = settings.with_(models_dir=bundle_dir)
    store = ensure_store(files, settings, None)
    from fscore_lite.store import open_store

    topic = open_store(store).titles()[0]
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"topic": topic, "facts": fs}) + "\n" for fs in (
        [f"{topic} is a person.", f"{topic} was born on the Moon in 1700."], [f"{topic} is a person."],
        [f"{topic} lived on Mars.", f"{topic} is a fish.", f"{topic} is a person."])), encoding="utf-8")
    summary = score_file(inp, tmp_path / "out.jsonl", settings.with_(store=store),
                         ScoreOptions(verifier="trained", gamma=0, progress=False))
    recs = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    for r in recs:
        probs = [d["probability"] for d in r["decisions"]]
        assert r["init_score"] == r["readable_share"] == pytest.approx(np.mean(probs), abs=1e-5)
        assert r["score"] > 0  # never 0 with a positive probability
    raw = np.mean([r["pacc_share_unclipped"] for r in recs])
    assert summary["score_adjusted"] == pytest.approx(min(1, max(0, raw)), abs=1e-6)
    assert summary["score"] == pytest.approx(np.mean([r["score"] for r in recs]), abs=1e-6)
    assert summary["settings"]["calibration"]["run_facts"] == "given in the input"
    assert summary["settings"]["atomic_facts"]["decomposer"] == "default"


def test_end_to_end_without_cv_scores_own_and_paper_facts_of_the_same_bios(tiny_build, tmp_path):  # noqa: F811
    """``--facts generated`` with the installed (here: tiny) verifier: both runs, paired by bio."""
    from fscore_lite.backends.llm import LLMStats
    from fscore_lite.manifest import Bundle
    from fscore_lite.metaeval.e2e_er import format_e2e_report, run_e2e

    class FactsLLM(ScriptedLLM):
        stats = LLMStats()

    bundle_dir, settings, _ = tiny_build
    data = Bundle(bundle_dir).get("minilm-l6-factscore-verifier").extra["training"]["data"]
    settings = settings.with_(models_dir=bundle_dir)
    rep = run_e2e(data, settings, subjects=["ChatGPT", "InstructGPT"], limit=2, out=tmp_path, progress=False,
                  llm=FactsLLM())
    assert [r["subject"] for r in rep["subjects"]] == ["ChatGPT", "InstructGPT"]
    for r in rep["subjects"]:
        assert r["n_bios"] == 2 and r["facts_per_response"]["own"] == 1.0  # one filtered fact per sentence
        assert r["facts_per_response"]["paper"] > 1 and r["degenerate_share"] == 0
        assert r["own_minus_paper"]["ci95"] is not None
    assert "warning" in json.loads((tmp_path / "e2e-ChatGPT-trained-own-default.jsonl").with_suffix(".summary.json")
                                   .read_text())["settings"]["calibration"]
    again = run_e2e(data, settings, subjects=["ChatGPT", "InstructGPT"], limit=2, out=tmp_path, progress=False,
                    llm=FactsLLM())  # resumed from the outputs: the same table
    assert again["subjects"] == rep["subjects"]
    assert "own − paper on the same bios" in format_e2e_report(rep)


def test_end_to_end_cv_scores_own_facts_with_the_fold_combiners(tiny_build):  # noqa: F811
    """``--facts generated --cv K``: own facts featurised like the paper's and scored out of fold."""
    from fscore_lite.backends.llm import LLMStats
    from fscore_lite.manifest import Bundle
    from fscore_lite.metaeval.e2e_er import format_e2e_report, run_e2e_cv

    class FactsLLM(ScriptedLLM):
        stats = LLMStats()

    bundle_dir, settings, _ = tiny_build
    data = Bundle(bundle_dir).get("minilm-l6-factscore-verifier").extra["training"]["data"]
    settings = settings.with_(models_dir=bundle_dir)
    rep = run_e2e_cv(data, settings, folds=2, limit=1, progress=False, llm=FactsLLM())
    assert rep["calibrated_on"] == "paper facts" and rep["bios"] == len(rep["per_bio"]) == 3
    for b in rep["per_bio"]:
        assert set(b["own_facts"]) == {"Ann Lee is a painter."}  # one fact a sentence, duplicates dropped
        assert 0 <= b["own"]["readable"] <= 1 and 0 <= b["paper"]["readable"] <= 1
    for r in rep["subjects"]:
        assert r["n_bios"] == 1 and r["facts_per_response"]["human"] > 0
    assert set(rep["ranking_preserved"]) == {"own", "paper"}
    assert "calibrated on paper facts" in format_e2e_report(rep)
    again = run_e2e_cv(data, settings, folds=2, limit=1, progress=False, llm=FactsLLM())
    assert again["subjects"] == rep["subjects"]  # the same bytes on a second run (features and calls cached)
