"""Every deviation from the reference is named, recorded and visible (no model needed).

- a sentence that is a demo goes to the LM by default (the reference); ``--demo-shortcut``
  answers it with the demo's facts, and the summary says which;
- spaCy failing to load skips the date/number clean-up with one warning, and the summary says so;
- ``q2 --backend auto`` giving a role to the LLM warns on stderr and records it per role;
- NP's passage text (markers removed) is named in the summary settings.
"""
from __future__ import annotations

import json

import pytest

from fscore_lite.factscore import atomic_facts as af
from fscore_lite.factscore import spacy_pipeline as sp


class FakeLLM:
    name, sha256 = "fake-llm", "f" * 64

    def __init__(self):
        self.prompts: list[str] = []

    def generate(self, prompt, max_tokens, stop):
        self.prompts.append(prompt)
        return " - An LM fact.\n"


def test_demo_sentence_goes_to_the_lm_by_default():
    demo, demo_facts = next(iter(af.load_demos().items()))
    llm = FakeLLM()
    gen = af.AtomicFactGenerator(llm)
    assert gen.facts_for_sentence(demo) == ["An LM fact."]
    assert len(llm.prompts) == 1 and llm.prompts[0].endswith(f"facts: {demo}\n")
    assert gen.describe()["demo_sentences"] == "sent to the LM (reference)"

    llm2 = FakeLLM()
    short = af.AtomicFactGenerator(llm2, demo_shortcut=True)
    assert short.facts_for_sentence(demo) == list(demo_facts) and llm2.prompts == []
    assert short.facts_for_sentence("Ann Lee is a painter.") == ["An LM fact."]  # other sentences: the LM
    assert "--demo-shortcut" in short.describe()["demo_sentences"]


def test_score_cli_has_the_demo_shortcut_option():
    from typer.testing import CliRunner

    from fscore_lite.cli import app

    out = CliRunner().invoke(app, ["score", "--help"], terminal_width=200).output
    assert "--demo-shortcut" in out and "--max-output-chars" in out


def test_spacy_failure_is_warned_once_and_recorded(monkeypatch, capsys):
    monkeypatch.setattr(sp, "load", lambda: (None, "OSError: [E050] Can't find model"))
    sp.warn_skipped.cache_clear()
    pairs = [("He was born in 1950.", ["He was born in 1962."])]
    assert af.postprocess(pairs, []) == pairs  # skipped: the raw facts stay
    assert af.postprocess(pairs, []) == pairs
    err = capsys.readouterr().err
    assert err.count("warning: spaCy") == 1 and "clean-up of atomic facts is skipped" in err
    assert af.AtomicFactGenerator(FakeLLM()).describe()["spacy_cleanup"] == "skipped: OSError: [E050] Can't find model"
    sp.warn_skipped.cache_clear()


def test_spacy_cleanup_recorded_as_applied_when_it_loads(monkeypatch):
    monkeypatch.setattr(sp, "load", lambda: (object(), None))
    assert sp.status() == f"applied ({sp.SPACY_MODEL})"


def _settings_of(options, models_dir, store, embedder, tmp_path) -> dict:
    """The summary settings of a FactScorer built for ``options`` (the LM is the fake)."""
    from fscore_lite.factscore.pipeline import FactScorer
    from fscore_lite.settings import Settings

    settings = Settings(home=tmp_path / "home", models_dir=models_dir, store=store.path, threads=2, use_cache=False)
    scorer = FactScorer(settings, options, llm=FakeLLM(), store=store, embedder=embedder)
    assert scorer.describe()["settings"] == scorer.identity()["settings"]  # what is recorded is what resumes
    return scorer.describe()["settings"]


@pytest.mark.parametrize("shortcut", [False, True])
def test_factscore_summary_settings_name_the_deviations(shortcut, tmp_path, example_store, minilm_embedder,
                                                        minilm_bundle_dir):
    """FactScorer.describe() reports the atomic-fact settings (demo sentences, spaCy clean-up)."""
    from fscore_lite.factscore.pipeline import ScoreOptions

    s = _settings_of(ScoreOptions(verifier="llm", demo_shortcut=shortcut), minilm_bundle_dir, example_store,
                     minilm_embedder, tmp_path)
    assert s["atomic_facts"] == af.AtomicFactGenerator(FakeLLM(), demo_shortcut=shortcut).describe()
    assert ("--demo-shortcut" in s["atomic_facts"]["demo_sentences"]) is shortcut
    assert s["atomic_facts"]["spacy_cleanup"].startswith(("applied (", "skipped: "))
    assert s["npm_passages"] is None and s["npm"] is False
    assert s["verifier"] == "llm" and s["decision"].startswith("logprob of first token")
    assert s["threads"] == 2


def test_factscore_summary_names_np_s_passage_text(tmp_path, tiny_bundle, example_store, minilm_embedder):
    """With --npm the summary names NP's passage text and the masked LM, and counts the share."""
    from fscore_lite.factscore.npm import PASSAGE_TEXT
    from fscore_lite.factscore.pipeline import FactScorer, ScoreOptions
    from fscore_lite.settings import Settings

    settings = Settings(home=tmp_path / "home", models_dir=tiny_bundle, store=example_store.path, threads=1,
                        use_cache=False)
    scorer = FactScorer(settings, ScoreOptions(verifier="llm", npm=True), llm=FakeLLM(), store=example_store,
                        embedder=minilm_embedder)
    d = scorer.describe()
    assert d["settings"]["npm_passages"] == PASSAGE_TEXT and d["settings"]["npm_threshold"] == 0.3
    assert d["settings"]["share"].startswith("decisions") and d["models"]["mlm"]["name"] == "tiny-mlm"


def test_q2_auto_backend_warns_and_records_llm_stand_ins(tmp_path, monkeypatch, capsys):
    import fscore_lite.backends.llm as llm_mod
    from fscore_lite.q2.roles import load_roles
    from fscore_lite.settings import Settings

    monkeypatch.setattr(llm_mod, "load_llm", lambda *a, **k: FakeLLM())
    settings = Settings(home=tmp_path, models_dir=tmp_path / "models", threads=1)  # no ONNX model installed
    roles = load_roles(settings, backend="auto")
    err = capsys.readouterr().err
    assert err.count("warning: --backend auto") == 1
    assert "qa, nli" in err and "qg" not in err and "not the paper's Q2" in err and "contradiction" in err
    d = roles.describe()
    assert d["qg"]["backend"] == "rules" and d["qg"]["selection"] == "auto: no ONNX model installed, rules (no model)"
    for role in ("qa", "nli"):
        assert d[role]["backend"] == "llm"
        assert d[role]["selection"] == "auto: no ONNX model installed, LLM stand-in"
    json.dumps(d)  # the summary can hold it

    roles = load_roles(settings, backend="llm")  # asked for explicitly: recorded, no warning
    assert capsys.readouterr().err == ""
    assert {r: v["selection"] for r, v in roles.describe().items()} == {r: "--backend llm" for r in ("qg", "qa", "nli")}


def test_verifier_text_rule_is_used_without_logprobs():
    """With use_logprobs=False the verdict comes from the generated text (SPEC §6, text rule)."""
    from fscore_lite.factscore.retrieve import Evidence
    from fscore_lite.factscore.verify import Verifier
    from fscore_lite.store import Passage

    answers = {"A.": "True", "B.": "False, it is not", "C.": "I cannot say", "D.": "It is true... no, false"}

    class TextLLM:
        def generate(self, prompt, max_tokens, stop):
            assert stop == ("\n",) and prompt.endswith("True or False?\nOutput:")
            return answers[prompt.split("Input: ")[1].split(" True or False?")[0]]

    ev = [Evidence(Passage(1, "T", "<s>T is a thing.</s>", 0), 1.0, 0)]
    verdicts = Verifier(TextLLM(), use_logprobs=False).verify("T", list(answers), [ev] * len(answers))
    assert [v.is_supported for v in verdicts] == [True, False, False, False]
    assert all(v.rule == "text" and v.margin is None for v in verdicts)


@pytest.mark.parametrize("answer,expected", [
    ("untrue", True),  # the reference tests substrings: "untrue" contains "true"
    ("TRUE", True), ("It's False.", False),
    ("false at first, but true", True),  # both: the later one wins
    ("true at first, but false", False),
    ("", True), ("   ", True),  # neither word, no negative cue: supported
    ("No information.", False), ("not", False), ("nothing", True),  # whole words only: "nothing" is no cue
    ("It is unknown!", False),
])
def test_text_decision_rule_edge_cases(answer, expected):
    from fscore_lite.factscore.verify import decide_from_text

    assert decide_from_text(answer) is expected
