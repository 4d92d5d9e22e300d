"""The Q² role registry and the LLM answer's span snapping (with fake models: none is loaded)."""
from __future__ import annotations

import pytest

from fscore_lite.errors import FscoreError
from fscore_lite.q2 import roles as roles_mod
from fscore_lite.q2.answer import Answer, LlmQuestionAnswerer, snap_to_span
from fscore_lite.q2.compare import token_f1
from fscore_lite.q2.roles import REGISTRY, Q2Roles, backends_for, load_roles, resolve


# --- registry -----------------------------------------------------------------------------------
def test_registry_has_a_factory_per_role_and_backend():
    assert backends_for("qg") == ("onnx", "llm")
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
    assert resolve("qa", "onnx", b) == ("onnx", "--backend onnx")
    assert resolve("qa", "auto", b, "llm-free") == ("llm-free", "--qa-backend llm-free")


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
    assert (roles.qg, roles.qa, roles.nli) == ("qg:llm", "qa:llm-free", "nli:onnx")
    assert built == [("qg", "llm"), ("qa", "llm-free"), ("nli", "onnx")]
    assert roles.selection == {"qg": roles_mod.AUTO_STAND_IN, "qa": "--qa-backend llm-free",
                               "nli": roles_mod.AUTO_ONNX}
    assert "qg" in capsys.readouterr().err  # the stand-in warning names the LLM role


def test_unknown_backend_is_a_clear_error_listing_the_choices():
    class S:
        models_dir, threads = "unused", 1

    with pytest.raises(FscoreError, match=r"--qa-backend must be one of onnx, llm, llm-free, not 'gpu'"):
        load_roles(S(), bundle=_Bundle(()), qa_backend="gpu")
    with pytest.raises(FscoreError, match=r"--backend must be one of auto, onnx, llm, not 'llm-free'"):
        load_roles(S(), bundle=_Bundle(()), backend="llm-free")


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
