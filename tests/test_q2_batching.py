"""Batched Q² model calls against the one-at-a-time path, on the tiny exported models.

QA: every question of a batch (every window of every pair) in one onnxruntime call, padded to
the longest with an attention mask. NLI: every answer pair of a response in one call. The
logits must equal the one-at-a-time ones up to float rounding (fp32 graphs), the decisions
must be the same (fp32 and the default int8), and a whole response must give the same steps
and scores with ``Q2Options(batch=True)`` (the default) as with ``batch=False``, in fewer
model calls.
"""
from __future__ import annotations

import numpy as np
import pytest

from fscore_lite.cache import CallCache
from fscore_lite.manifest import Bundle

pytestmark = pytest.mark.export

LONG = " ".join(["Marie Curie was a Polish and naturalised-French physicist and chemist."] * 60)
QA_PAIRS = [
    ("Where was she born?", "She was born in Warsaw on 7 November 1867 and died in 1934."),
    ("Where is the Eiffel Tower?", "The Eiffel Tower is in Paris."),
    ("Who won the Nobel Prize in Physics?", "She won the Nobel Prize in Physics in 1903 and the Nobel Prize in Chemistry in 1911."),
    ("What is the capital of France?", "The Eiffel Tower is in Paris, the capital of France."),
    ("Where was she born?", LONG),  # several windows, all in the same batch
]
NLI_PAIRS = [
    ("Where is the tower? Paris.", "Where is the tower? France."),
    ("marie curie won the nobel prize in physics in 1903.", "she won it in 1911 ."),
    ("Who won the Nobel Prize? Marie Curie.", "Who won the Nobel Prize? Albert Einstein developed the theory of relativity."),
    ("x.", "The Eiffel Tower is in Paris, the capital of France, and it was built in 1889 for the World's Fair."),
]
ROWS = [
    ("The Eiffel Tower is in Paris.", "The Eiffel Tower is in Paris, France."),
    ("Marie Curie was born in Warsaw.", "She was born in Warsaw in 1867."),
    ("Marie Curie won the Nobel Prize in Physics in 1903 and she was born in Warsaw.",
     "Marie Curie was a Polish and naturalised-French physicist and chemist. She won the Nobel Prize in Physics in 1903."),
    ("Kang Ji-hwan is a South Korean actor who was born on March 20, 1977.",
     "Kang Ji-hwan is a South Korean actor who was born on March 20, 1977 in Seoul."),
]


class CountingSession:
    """Wraps an onnxruntime session and counts ``run`` calls and the rows they carried."""

    def __init__(self, inner):
        self.inner, self.calls, self.rows = inner, 0, 0

    def run(self, names, feeds):
        self.calls += 1
        self.rows += int(next(iter(feeds.values())).shape[0])
        return self.inner.run(names, feeds)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.fixture(scope="module")
def bundle(tiny_bundle):
    return Bundle(tiny_bundle)


def _qa(bundle, precision):
    from fscore_lite.backends.onnx_qa import ExtractiveQA

    return ExtractiveQA.from_bundle(bundle, bundle.get("tiny-qa"), precision=precision, cache=CallCache(None))


def _nli(bundle, precision):
    from fscore_lite.backends.onnx_nli import NliCrossEncoder

    return NliCrossEncoder.from_bundle(bundle, bundle.get("tiny-nli"), precision=precision, cache=CallCache(None))


def test_qa_logits_batch_equals_one_at_a_time_fp32(bundle):
    qa = _qa(bundle, "fp32")
    rows = [(w.ids, w.type_ids) for q, c in QA_PAIRS for w in qa._windows(q, c)]
    assert len({len(ids) for ids, _ in rows}) > 3  # really padded
    batched = qa.logits_batch(rows)
    for (ids, types), (s, e) in zip(rows, batched):
        s1, e1 = qa.logits(ids, types)
        assert s.shape == s1.shape == (len(ids),)  # cut back to the row's own length
        np.testing.assert_allclose(s, s1, atol=1e-4)
        np.testing.assert_allclose(e, e1, atol=1e-4)


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_qa_answer_batch_gives_the_same_answers(bundle, precision):
    one, many = _qa(bundle, precision), _qa(bundle, precision)
    many.session = CountingSession(many.session)
    want = [one.answer(q, c) for q, c in QA_PAIRS]
    got = many.answer_batch(QA_PAIRS)
    assert got == want
    assert got[-1].window == want[-1].window and len(many._windows(*QA_PAIRS[-1])) > 1
    assert many.session.calls == 1 and many.session.rows == sum(len(many._windows(q, c)) for q, c in QA_PAIRS)
    again = many.answer_batch(QA_PAIRS)  # cached as a batch: no model call
    assert again == got and many.session.calls == 1
    assert many.answer_batch([]) == [] and many.answer_batch(QA_PAIRS[:1]) == want[:1]


def test_a_batch_result_does_not_depend_on_what_was_cached_before(bundle):
    cache = CallCache(None)
    from fscore_lite.backends.onnx_qa import ExtractiveQA

    warm = ExtractiveQA.from_bundle(bundle, bundle.get("tiny-qa"), cache=cache)
    warm.answer_batch(QA_PAIRS[:2])  # shares its first pair with the batch below
    misses = cache.misses
    after = warm.answer_batch([QA_PAIRS[0], QA_PAIRS[2]])
    assert cache.misses == misses + 1  # a different batch is its own cache entry ...
    fresh = _qa(bundle, "int8").answer_batch([QA_PAIRS[0], QA_PAIRS[2]])
    assert after == fresh  # ... so it is what this batch computes, whatever ran before


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_nli_predict_batch_equals_predict(bundle, precision):
    one, many = _nli(bundle, precision), _nli(bundle, precision)
    many.session = CountingSession(many.session)
    want = [one.predict(p, h) for p, h in NLI_PAIRS]
    got = many.predict_batch(NLI_PAIRS)
    assert [g["label"] for g in got] == [w["label"] for w in want]
    tol = 1e-4 if precision == "fp32" else 0.05 * max(abs(v) for w in want for v in w["logits"].values())
    for g, w in zip(got, want):
        assert list(g["logits"]) == list(w["logits"]) == one.labels
        np.testing.assert_allclose(list(g["logits"].values()), list(w["logits"].values()), atol=tol)
    assert many.session.calls == 1 and many.session.rows == len(NLI_PAIRS)


@pytest.mark.parametrize("precision,questions", [("int8", "single"), ("int8", "multi"), ("fp32", "single"), ("fp32", "multi")])
def test_response_scores_batched_equal_one_at_a_time(tiny_bundle, tmp_path, precision, questions):
    from fscore_lite.q2.roles import load_roles
    from fscore_lite.q2.score import Q2Options, score_response
    from fscore_lite.q2.spans import load_nlp
    from fscore_lite.settings import Settings

    settings = Settings(home=tmp_path / "home", threads=1, models_dir=tiny_bundle, llm="none")
    nlp = load_nlp()
    results, counts = {}, {}
    for batch in (False, True):
        roles = load_roles(settings, backend="onnx", cache=CallCache(None), precision=precision)
        qa, nli = roles.qa.model, roles.nli.model
        qa.session, nli.session = CountingSession(qa.session), CountingSession(nli.session)
        # int8: QG batched on both sides (its int8 beams move with the batch's activation scale
        # too; that the batched search is the same algorithm is checked in fp32 here and in
        # test_q2_onnx), so that this compares the batching of QA and NLI
        opts = Q2Options(questions=questions, remove_personal=False, batch=batch,
                         batch_qg=True if precision == "int8" else None)
        results[batch] = [score_response(r, k, roles, nlp, opts) for r, k in ROWS]
        counts[batch] = (qa.session.calls, qa.session.rows, nli.session.calls)
    if precision == "fp32":
        assert results[True] == results[False]  # every step, answer, label and score
    else:
        # int8 graphs quantize activations with one scale per call, so a batch moves the logits a
        # little more than float rounding: on these random (nearly flat) models 1 of the 85 answers
        # on the response changes its text. The decisions must not change.
        assert [_decisions(r) for r in results[True]] == [_decisions(r) for r in results[False]]
        answers = [(c["response_answer"], d["response_answer"])
                   for a, b in zip(results[True], results[False])
                   for ca, cb in zip(a["candidates"], b["candidates"]) for c, d in zip(ca["checked"], cb["checked"])]
        assert sum(x == y for x, y in answers) >= 0.95 * len(answers)
    checked = sum(len(c["checked"]) for res in results[True] for c in res["candidates"])
    valid = sum(len(res["questions"]) for res in results[True])
    assert checked >= 2 * len(ROWS)
    # the same QA work, in fewer calls
    assert counts[True][1] == counts[False][1] == checked + valid
    assert counts[True][0] < counts[False][0]
    if questions == "multi":  # one call on the response and at most one on the knowledge per row
        assert counts[True][0] <= 2 * len(ROWS)


def _decisions(result: dict):
    """What a Q² result decides: scores, fallback, every filter verdict, every valid question's
    answer on the knowledge, F1 and NLI label."""
    return (result["Q2"], result["Q2_no_nli"], result["fallback"],
            [[(c["question"], c["personal"], c["consistent"]) for c in cand["checked"]] for cand in result["candidates"]],
            [(v["question"], v["knowledge_answer"], v["f1"], v["nli_label"], v["score"]) for v in result["questions"]])
