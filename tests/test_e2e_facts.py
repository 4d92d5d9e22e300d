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


def test_subject_row_pairs_own_and_paper_by_bio():
    from fscore_lite.metaeval.e2e_er import subject_row
    from fscore_lite.training.labeled import AnnotatedBio, AnnotatedSentence, HumanFact

    def bio(topic, line):
        s = AnnotatedSentence("x", True, ("A b.", "C d."), (HumanFact("A b.", "S"), HumanFact("C d.", "NS")))
        return AnnotatedBio("ChatGPT", line, topic, "x", (), (s,))

    def rec(score, facts):
        return {"status": "ok", "init_score": score, "decisions": [{"atom": f} for f in facts]}

    bios = [bio(f"T{i}", i) for i in range(4)]
    own = [rec(x, f) for x, f in zip((0.4, 0.8, 0.5, 0.7), (["A b.", "He."], ["A b."], ["A b.", "C d.", "E f."],
                                                            ["A b.", "C d."]))]
    paper = [rec(x, ["A b.", "C d."]) for x in (0.6, 0.7, 0.5, 0.4)]
    r = subject_row("ChatGPT", bios, [0.5] * 4, own, paper)
    assert r["n_bios"] == 4 and r["human"] == 50
    assert r["own"]["estimate"] == pytest.approx(60.0) and r["own"]["er"] == pytest.approx(10.0)
    assert r["own"]["per_bio_mae"] == pytest.approx(100 * np.mean([0.1, 0.3, 0.0, 0.2]))
    diff = 100 * np.mean([0.4 - 0.6, 0.8 - 0.7, 0.0, 0.7 - 0.4])
    assert r["own_minus_paper"]["difference"] == pytest.approx(diff)
    lo, hi = r["own_minus_paper"]["ci95"]
    assert lo <= diff <= hi
    assert r["facts_per_response"] == {"own": 2.0, "paper": 2.0, "human": 2.0}
    assert r["degenerate_share"] == pytest.approx(1 / 8) and r["degenerate_kinds"] == {"fragment": 1}


def test_factscore_er_refuses_bad_fact_options(tmp_path):
    from typer.testing import CliRunner

    from fscore_lite.cli import app

    r = CliRunner().invoke(app, ["meta-eval", "factscore-er", "--facts", "mine", "--data", str(tmp_path)])
    assert r.exit_code != 0 and "--facts must be paper or generated" in str(r.exception)
    r = CliRunner().invoke(app, ["meta-eval", "factscore-er", "--facts", "generated", "--cv", "5", "--data", str(tmp_path)])
    assert r.exit_code != 0 and "--verifier trained" in str(r.exception)
    r = CliRunner().invoke(app, ["meta-eval", "factscore-er", "--verifier", "trained", "--cv", "5", "--hold-out", "bio",
                                 "--data", str(tmp_path)])
    assert r.exit_code != 0 and "--hold-out must be one of topic, lm" in str(r.exception)
    assert "--decomposer" in CliRunner().invoke(app, ["score", "--help"], terminal_width=200).output


def test_proxy_on_two_sentences_with_the_test_llm(data_dir, test_llm):
    from fscore_lite.metaeval.decomposer_proxy import run_proxy
    from fscore_lite.settings import Settings

    rep = run_proxy(data_dir, Settings(threads=1), limit=2, progress=False, llm=test_llm)
    assert rep["sentences"] == 2 and set(rep["variants"]) == {"reference", *ff.FILTERS, "all filters", "parse"}
    assert set(rep["generation_s"]) == {"reference", "parse"}
    for v in rep["variants"].values():
        assert v["facts_per_sentence"] >= 0 and v["human_facts_per_sentence"] > 0
    assert json.loads(json.dumps(rep)) == rep


def test_a_scored_run_is_one_factscore_whose_responses_average_to_it(tiny_build, tmp_path):  # noqa: F811
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
        assert r["init_score"] == r["score"] == pytest.approx(np.mean(probs), abs=1e-5)
        assert r["calibration"] == "given"
    assert summary["score"] == pytest.approx(np.mean([r["score"] for r in recs]), abs=1e-6)
    assert summary["score_ci95"][0] <= summary["score"] <= summary["score_ci95"][1]
    assert "score_adjusted" not in summary and "score_by_decisions" not in summary
    assert summary["settings"]["calibration"]["responses"] == {"given": 3}
    assert summary["settings"]["share"].startswith("estimated")
    assert summary["settings"]["atomic_facts"]["decomposer"] == "default"
    # the partial file kept the calibration's own probabilities: a resumed run gives the same bytes
    out = (tmp_path / "out.jsonl").read_bytes()
    assert score_file(inp, tmp_path / "again.jsonl", settings.with_(store=store),
                      ScoreOptions(verifier="trained", gamma=0, progress=False))["score"] == summary["score"]
    assert (tmp_path / "again.jsonl").read_bytes() == out


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
                                   .read_text())["settings"]["calibration"]  # no calibration of these facts
    again = run_e2e(data, settings, subjects=["ChatGPT", "InstructGPT"], limit=2, out=tmp_path, progress=False,
                    llm=FactsLLM())  # resumed from the outputs: the same table
    assert again["subjects"] == rep["subjects"]
    assert "own − paper on the same bios" in format_e2e_report(rep)
