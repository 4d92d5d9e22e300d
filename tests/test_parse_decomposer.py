"""The decomposer registry and the ``parse`` decomposer: facts from spaCy's dependency parse, no LLM."""
from __future__ import annotations

import json

import pytest

from fscore_lite.factscore import decomposers
from fscore_lite.factscore import spacy_pipeline
from fscore_lite.factscore.parse_facts import RULES, sentence_facts
from .test_verifier import tiny_build, tiny_inputs  # noqa: F401 - the tiny trained verifier, used by name


@pytest.fixture(scope="module")
def nlp():
    pipe = spacy_pipeline.pipeline()
    assert pipe is not None, spacy_pipeline.status()
    return pipe


@pytest.mark.parametrize("sentence, facts", [
    ("Marie Curie was a Polish physicist who won two Nobel Prizes.",
     ["Marie Curie was a Polish physicist.", "Marie Curie won two Nobel Prizes."]),
    ("He was born in 1950 in Lagos, Nigeria, and studied law at the University of Lagos.",
     ["He was born in 1950.", "He was born in Lagos, Nigeria.", "He studied law at the University of Lagos."]),
    ("Ann Lee, a British chemist, discovered a new element.",
     ["Ann Lee discovered a new element.", "Ann Lee is a British chemist."]),
    ("Ann Lee (born 4 May 1950) is an English actress.",
     ["Ann Lee is an English actress.", "Ann Lee was born 4 May 1950."]),
    ("The band released three albums between 1990 and 1995, and toured Europe twice.",
     ["The band released three albums between 1990 and 1995.", "The band toured Europe twice."]),
    ("She starred in the film Heat, directed by Michael Mann.",
     ["She starred in the film Heat.", "The film Heat was directed by Michael Mann."]),
])
def test_a_sentence_is_split_at_its_clauses_appositions_and_adjuncts(nlp, sentence, facts):
    assert sentence_facts(sentence, nlp) == facts


def test_a_sentence_without_usable_clauses_is_its_own_fact(nlp):
    assert sentence_facts("Great!", nlp) == ["Great!"]
    assert sentence_facts("A singer", nlp) == ["A singer."]


def test_the_registry_names_every_decomposer_and_checks_the_name():
    from fscore_lite.errors import FscoreError
    from fscore_lite.factscore.options import DECOMPOSERS

    assert decomposers.NAMES == DECOMPOSERS == ("default", "reference", "parse", "tuned")
    assert [decomposers.uses_llm(n) for n in decomposers.NAMES] == [True, True, False, False]
    parse = decomposers.describe_settings("parse")
    assert parse["decomposer"] == "parse" and RULES in parse["decoding"] and "deviation" in parse["decoding"]
    assert decomposers.describe_settings("default")["decomposer"] == "default"
    with pytest.raises(FscoreError, match="must be one of default, reference, parse, tuned, not 'fast'"):
        decomposers.describe_settings("fast")


def test_parse_facts_are_a_function_of_the_response_alone(nlp):
    gen = decomposers.make_decomposer("parse", lambda: pytest.fail("the parse decomposer loads no LLM"))
    a = "Ann Lee is an English actress. Ann Lee is an English actress who sings."
    b = "Bo Chen (born 1970) is a Chinese painter. He lives in Paris and teaches art."
    first = [(s.sentence, s.facts) for s in gen.run(a)]
    assert first[0] == ("Ann Lee is an English actress.", ["Ann Lee is an English actress."])
    assert first[1][1] == ["Ann Lee sings."]  # the repeated fact is dropped, within the response only
    gen.run(b)
    assert [(s.sentence, s.facts) for s in gen.run(a)] == first
    assert [(s.sentence, s.facts) for s in decomposers.ParseDecomposer(nlp).run(a)] == first
    name, sha = decomposers.fact_source("parse", lambda: pytest.fail("no LLM"))
    assert name.startswith("spacy:en_core_web_sm") and len(sha) == 64


def test_a_run_with_the_parse_decomposer_loads_no_llm(tiny_build, tmp_path):  # noqa: F811
    from fscore_lite.factscore.pipeline import FactScorer, ScoreOptions, score_file
    from fscore_lite.manifest import Bundle
    from fscore_lite.metaeval.factscore_er import ensure_store, wiki_pages
    from fscore_lite.store import open_store

    bundle_dir, settings, _ = tiny_build
    entry = Bundle(bundle_dir).get("minilm-l6-factscore-verifier")
    _, files = wiki_pages(entry.extra["training"]["data"])
    settings = settings.with_(models_dir=bundle_dir, llm="no-such-llm")
    store = ensure_store(files, settings, None)
    topic = open_store(store).titles()[0]
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"topic": topic, "output": f"{topic} is a person who lived on Mars. "
                                                         f"{topic} was born in 1700 in Paris."}) + "\n",
                   encoding="utf-8")
    opts = ScoreOptions(verifier="trained", gamma=0, progress=False, decomposer="parse")
    summary = score_file(inp, tmp_path / "out.jsonl", settings.with_(store=store), opts)
    rec = json.loads((tmp_path / "out.jsonl").read_text())
    assert [d["atom"] for d in rec["decisions"]] == [f"{topic} is a person.", f"{topic} lived on Mars.",
                                                    f"{topic} was born in 1700.", f"{topic} was born in Paris."]
    assert summary["settings"]["atomic_facts"]["decomposer"] == "parse"
    assert summary["settings"]["decode_parallel"] is None  # nothing decoded
    scorer = FactScorer(settings.with_(store=store), opts)
    assert scorer.run_fact_settings()["llm"].startswith("spacy:") and not scorer.llm_loaded
