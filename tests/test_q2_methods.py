"""The Q² role registry, the LLM answer's span snapping, the token-overlap baseline and the
four-method meta-evaluation report (with fake roles: no model is loaded)."""
from __future__ import annotations

import csv
import json

import pytest

from fscore_lite.errors import FscoreError
from fscore_lite.q2 import roles as roles_mod
from fscore_lite.q2.answer import Answer, LlmQuestionAnswerer, snap_to_span
from fscore_lite.q2.compare import token_f1, token_overlap
from fscore_lite.q2.roles import REGISTRY, Q2Roles, backends_for, load_roles, resolve


# --- registry -----------------------------------------------------------------------------------
def test_registry_has_a_factory_per_role_and_backend():
    assert backends_for("qg") == ("onnx", "llm", "rules")
    assert backends_for("qa") == ("onnx", "llm", "llm-free")
    assert backends_for("nli") == ("onnx", "llm")
    assert {r for r, _ in REGISTRY} == {"qg", "qa", "nli"}


class _Bundle:
    """A bundle stand-in: an ONNX entry for the roles given, nothing else."""

    def __init__(self, onnx_roles):
        self.onnx_roles, self.manifest_path = set(onnx_roles), "fake/manifest.json"

    def first_for_role(self, role):
        return f"tiny-{role}" if role in self.onnx_roles else None


def test_auto_rule_onnx_when_installed_else_llm_stand_in():
    b = _Bundle({"nli"})
    assert resolve("nli", "auto", b) == ("onnx", roles_mod.AUTO_ONNX)
    assert resolve("qa", "auto", b) == ("llm", roles_mod.AUTO_STAND_IN)
    assert resolve("qg", "auto", b) == ("rules", roles_mod.AUTO_RULES)
    assert resolve("qg", "llm", b) == ("llm", "--backend llm")
    assert resolve("qa", "onnx", b) == ("onnx", "--backend onnx")
    assert resolve("qa", "auto", b, "llm-free") == ("llm-free", "--qa-backend llm-free")


def test_auto_passes_over_a_model_its_build_marked_not_for_auto():
    from fscore_lite.manifest import ModelEntry

    class Marked:
        manifest_path = "fake/manifest.json"

        def first_for_role(self, role):
            return ModelEntry(name=f"tiny-{role}", role=role, architecture="x", files=(),
                              extra={"auto_select": False} if role == "qa" else {})

    assert resolve("qa", "auto", Marked()) == ("llm", roles_mod.AUTO_NOT_SELECTED)
    assert resolve("nli", "auto", Marked()) == ("onnx", roles_mod.AUTO_ONNX)
    assert resolve("qa", "onnx", Marked()) == ("onnx", "--backend onnx")
    assert resolve("qa", "auto", Marked(), "onnx") == ("onnx", "--qa-backend onnx")


def test_load_roles_looks_each_role_up_in_the_registry(monkeypatch, capsys):
    built = []

    def factory(role, name):
        def make(ctx):
            built.append((role, name))
            return f"{role}:{name}"
        return make

    for key in list(REGISTRY):
        monkeypatch.setitem(REGISTRY, key, factory(*key))

    class S:
        models_dir, threads = "unused", 1

    roles = load_roles(S(), bundle=_Bundle({"nli"}), qa_backend="llm-free")
    assert (roles.qg, roles.qa, roles.nli) == ("qg:rules", "qa:llm-free", "nli:onnx")
    assert built == [("qg", "rules"), ("qa", "llm-free"), ("nli", "onnx")]
    assert roles.selection == {"qg": roles_mod.AUTO_RULES, "qa": "--qa-backend llm-free",
                               "nli": roles_mod.AUTO_ONNX}
    assert capsys.readouterr().err == ""  # no role went to the LLM by auto: no stand-in warning
    roles = load_roles(S(), bundle=_Bundle({"nli"}))
    assert roles.selection["qa"] == roles_mod.AUTO_STAND_IN
    assert "for qa in" in capsys.readouterr().err  # the stand-in warning names the LLM role


def test_unknown_backend_is_a_clear_error_listing_the_choices():
    class S:
        models_dir, threads = "unused", 1

    with pytest.raises(FscoreError, match=r"--qa-backend must be one of onnx, llm, llm-free, not 'gpu'"):
        load_roles(S(), bundle=_Bundle(()), qa_backend="gpu")
    with pytest.raises(FscoreError, match=r"--backend must be one of auto, onnx, llm, not 'llm-free'"):
        load_roles(S(), bundle=_Bundle(()), backend="llm-free")
    from fscore_lite.q2.score import Q2Options

    with pytest.raises(FscoreError, match="--metric must be one of q2, q2-no-nli, nli, overlap"):
        Q2Options(metric="best")


# --- span snapping ------------------------------------------------------------------------------
def test_snap_to_span_picks_the_best_token_f1_span():
    text = "The Eiffel Tower stands in Paris. It was finished in 1889."
    assert snap_to_span("the city of Paris, France", text) == "Paris"
    # "finished in 1889" (F1 1: "in" is a dropped word) beats "1889" (F1 2/3); the period is trimmed
    assert snap_to_span("finished 1889", text) == "finished in 1889"
    assert snap_to_span("it was finished", text) == "It was finished"
    assert snap_to_span("Tower of Eiffel", text) == "Eiffel Tower"
    assert snap_to_span("London", text) is None and snap_to_span("the", text) is None
    # every contiguous span of whole pieces: none has a higher F1 than the snapped one
    words = text.split()
    spans = [" ".join(words[a:b]) for a in range(len(words)) for b in range(a + 1, len(words) + 1)]
    for answer in ("the city of Paris, France", "finished 1889 tower", "it stands"):
        best = snap_to_span(answer, text)
        assert token_f1(answer, best) == pytest.approx(max(token_f1(answer, s) for s in spans))


def test_ties_go_to_the_earliest_span():
    assert snap_to_span("Paris", "Paris, Texas is not Paris, France.") == "Paris"
    assert snap_to_span("red car", "a red bus and a blue car") == "red"


class _Llm:
    name, sha256 = "fake-llm", "0" * 64

    def __init__(self, completion):
        self.completion = completion

    def generate(self, prompt, max_tokens, stop):
        return self.completion

    def generate_many(self, prompts, max_tokens, stop):
        return [self.completion for _ in prompts]


def test_llm_answer_is_snapped_unless_free():
    text = "The Eiffel Tower stands in Paris."
    snapped = LlmQuestionAnswerer(_Llm(" the city of Paris, France\n"))
    assert snapped.answer("Where?", text) == Answer("Paris", False)
    assert snapped.answer_many([("Where?", text), ("Where?", "London is big.")]) == [Answer("Paris", False),
                                                                                  Answer("", True)]
    assert "snapped" in snapped.describe()["rule"] and snapped.describe()["backend"] == "llm"
    free = LlmQuestionAnswerer(_Llm(" the city of Paris, France\n"), snap=False)
    assert free.answer("Where?", text) == Answer("the city of Paris, France", False)
    assert free.describe()["backend"] == "llm-free" and "snapped" not in free.describe()["rule"]
    assert snapped.answer("Where?", text.replace("Paris", "Lyon")) == Answer("", True)  # no shared token


# --- token overlap ------------------------------------------------------------------------------
def test_token_overlap_counts_content_tokens_of_the_response_found_in_the_knowledge():
    knowledge = "Gardening is considered by many people to be a relaxing activity."
    assert token_overlap("i love gardening . it is relaxing .", knowledge) == pytest.approx(2 / 3)  # love: absent
    assert token_overlap("gardening is relaxing", knowledge) == 1.0
    assert token_overlap("skiing is stressful", knowledge) == 0.0
    assert token_overlap("i do !", knowledge) == 1.0  # no content token: claims nothing


# --- the four-method meta-evaluation ------------------------------------------------------------
class _Fake:
    backend, name, sha256 = "fake", "fake", "0" * 64

    def describe(self):
        return {"backend": "fake", "name": "fake", "sha256": self.sha256}


class _QG(_Fake):
    def questions(self, answer, context):
        return [f"What about {answer}?"]

    def questions_many(self, answers, context):
        return [self.questions(a, context) for a in answers]


class _QA(_Fake):
    """Answers with the question's candidate when the text holds it, else no answer."""

    def answer(self, question, text):
        cand = question[len("What about "):-1]
        return Answer(cand, False) if cand.lower() in text.lower() else Answer("", True)


class _NLI(_Fake):
    """Entailment when every word of the hypothesis occurs in the premise."""

    def label(self, premise, hypothesis):
        words = set(premise.lower().replace(".", " ").split())
        return "entailment" if set(hypothesis.lower().replace(".", " ").split()) <= words else "neutral"


def test_metric_chooses_the_headline_score_and_every_score_is_kept():
    pytest.importorskip("spacy")
    from fscore_lite.q2.pipeline import Q2Scorer, summarise
    from fscore_lite.q2.score import Q2Options
    from fscore_lite.settings import Settings

    roles = Q2Roles(_QG(), _QA(), _NLI(), {})
    data = {"response": "the tower was built in 1950 .", "knowledge": "The tower was built in 1889 by Eiffel."}
    items = {}
    for metric, field in (("q2", "Q2"), ("q2-no-nli", "Q2_no_nli"), ("nli", "e2e_nli"), ("overlap", "overlap")):
        scorer = Q2Scorer(Settings(threads=1, use_cache=False), options=Q2Options(metric=metric), roles=roles)
        items[metric] = item = scorer.record(data).to_json()
        assert item["score"] == item[field] and scorer.describe()["metric"] == {"name": metric, "field": field}
        assert summarise([item])["score"] == item[field]
    # Q²: "the tower" is answered on the knowledge (1), "1950" is not (0); NLI: neutral; overlap: 1950 missing
    assert [(it["Q2"], it["e2e_nli"], it["overlap"]) for it in items.values()] == [(0.5, 0.5, pytest.approx(2 / 3))] * 4
    assert len({it["score"] for it in items.values()}) > 1  # the choice changes the headline


def _write_q2_wow(folder):
    rows = {"consistent": [("paris is the capital of france .", "Paris is the capital of France."),
                           ("the tower was built in 1889 .", "The tower was built in 1889 by Eiffel.")],
            "inconsistent": [("berlin is in spain .", "Berlin is the capital of Germany."),
                             ("the tower was built in 1950 .", "The tower was built in 1889 by Eiffel.")]}
    folder.mkdir(parents=True)
    for system in ("dodeca", "memnet"):
        for label, pairs in rows.items():
            with open(folder / f"{system}_{label}.csv", "w", newline="", encoding="utf-8") as f:
                w = csv.writer(f)
                w.writerow(["", "topic", "response", "knowledge"])
                for i, (r, k) in enumerate(pairs):
                    w.writerow([i, "t", r, k])


def test_meta_eval_q2_reports_four_methods_with_auc_and_intervals(tmp_path, monkeypatch):
    pytest.importorskip("spacy")
    from fscore_lite.metaeval.q2_wow import SCORES, format_report, method_seconds, run_q2_wow
    from fscore_lite.settings import Settings

    _write_q2_wow(tmp_path / "data" / "q2-wow")
    monkeypatch.setattr(roles_mod, "load_roles", lambda *a, **k: Q2Roles(_QG(), _QA(), _NLI(), {}))
    settings = Settings(home=tmp_path / "home", threads=1, use_cache=False)
    report = run_q2_wow(tmp_path / "data", settings, out_dir=tmp_path / "out", progress=False)
    report = json.loads(json.dumps(report))  # what --json prints
    assert [s for s, _ in SCORES] == ["Q2", "Q2_no_nli", "e2e_nli", "overlap"]
    assert set(report["methods"]) == {"Q2", "Q2_no_nli", "e2e_nli", "overlap"} and report["n_responses"] == 8
    for s, m in report["methods"].items():
        assert set(m) >= {"accuracy", "accuracy_ci95", "auc", "auc_ci95", "seconds_per_response"}
        assert 0.0 <= m["auc"] <= 1.0 and m["auc_ci95"][0] <= m["auc"] <= m["auc_ci95"][1]
        assert m["accuracy_ci95"][0] <= m["accuracy"] <= m["accuracy_ci95"][1]
        assert m["seconds_per_response"] >= 0.0
    # the overlap baseline ranks every consistent response above every inconsistent one here
    assert report["methods"]["overlap"]["auc"] == 1.0
    # end-to-end NLI: consistent responses entailed (1.0), inconsistent ones neutral (0.5 <= 0.5)
    assert report["methods"]["e2e_nli"]["accuracy"] == 100.0
    items = [json.loads(x) for x in (tmp_path / "out" / "q2-wow" / "dodeca_inconsistent.q2.jsonl").read_text().splitlines()]
    assert [it["e2e_nli"] for it in items] == [0.5, 0.5] and all(it["score"] == it["Q2"] for it in items)
    text = format_report(report)
    assert "overlap" in text and "AUC" in text
    stages = {s: 1.0 for s in ("candidates", "qg", "qa_response", "qa_knowledge", "nli", "fallback", "e2e_nli",
                               "overlap")}
    assert method_seconds(stages) == {"Q2": 6.0, "Q2_no_nli": 5.0, "e2e_nli": 2.0, "overlap": 1.0}
    assert method_seconds(stages, no_nli_gets_fallback=False)["Q2_no_nli"] == 4.0
