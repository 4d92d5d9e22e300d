"""One test per SPEC FActScore rule: abstention, sentences, atomic-fact prompt and parsing,
verification prompt, both decision rules, length penalty and aggregation."""
import math

import pytest

from fscore_lite.bm25 import BM25Okapi
from fscore_lite.factscore import abstain, atomic_facts, score, sentences, verify
from fscore_lite.factscore.retrieve import Evidence, retrieval_query
from fscore_lite.store import Passage


# ---- §1 abstention ----------------------------------------------------------------------
def test_generic_abstention():
    assert abstain.is_abstained("I'm sorry, I cannot find anything.", "generic")
    assert abstain.is_abstained("Could you provide more context?", "generic")
    assert not abstain.is_abstained("Jane Doe is a painter.", "generic")
    assert not abstain.is_abstained("I'm sorry, I cannot find anything.", "none")


def test_perplexity_abstention():
    assert abstain.is_abstained("I could not find any information about X [1].", "perplexity_ai")
    assert abstain.is_abstained("\n\nJane Doe is a painter.", "perplexity_ai")  # no valid first paragraph
    assert not abstain.is_abstained("Jane Doe is a painter [1].\n\nNo sources found.", "perplexity_ai")
    with pytest.raises(ValueError):
        abstain.is_abstained("x", "bogus")


# ---- §2 sentences -------------------------------------------------------------------------
def test_initials_detected_and_remerged():
    assert sentences.detect_initials("He met J. R. Smith and A.B. Jones.") == ["J. R.", "A.B."]
    fixed = sentences.fix_sentence_splitter(["He was J.", "R. Smith's son.", "He left."], ["J. R."])
    assert fixed == ["He was J. R. Smith's son.", "He left."]


def test_one_word_and_lowercase_sentences_merge_into_previous():
    assert sentences.fix_sentence_splitter(["He was born.", "Yes.", "and then he left."], []) == [
        "He was born. Yes. and then he left."
    ]
    # a one-word FIRST sentence is merged with the one after it
    assert sentences.fix_sentence_splitter(["Sure!", "Here it is.", "Next one."], []) == [
        "Sure! Here it is.", "Next one."
    ]


def test_split_sentences_paragraphs_and_abbreviations():
    sents, breaks = sentences.split_sentences("Dr. Ann Lee was born in the U.S. in 1950. She sings.\n\nShe paints.")
    assert sents == ["Dr. Ann Lee was born in the U.S. in 1950.", "She sings.", "She paints."]
    assert breaks == [2]


def test_sentences_that_get_no_facts():
    assert sentences.gets_no_facts("Sure, here is a bio.", 3)
    assert sentences.gets_no_facts("Please note that facts may change.", 2)
    assert sentences.gets_no_facts("Here are some facts.", 0)
    assert not sentences.gets_no_facts("Here are some facts.", 1)
    assert not sentences.gets_no_facts("She is a painter.", 0)


# ---- §3 atomic facts ------------------------------------------------------------------------
def test_atomic_fact_prompt_exact_layout():
    demos = atomic_facts.load_demos()
    keys = list(demos)
    selector = atomic_facts.DemoSelector(demos)
    target = "She won the Nobel Prize in 1990."
    prompt = atomic_facts.build_prompt(target, demos, selector)
    expected = ""
    for key in keys[:7] + selector.best(target):
        expected += f"Please breakdown the following sentence into independent facts: {key}\n"
        expected += "".join(f"- {f}\n" for f in demos[key]) + "\n"
    expected += f"Please breakdown the following sentence into independent facts: {target}\n"
    assert prompt == expected
    assert prompt.count("Please breakdown") == 9 and prompt.endswith(f"facts: {target}\n")


def test_bm25_demo_choice_matches_rank_bm25_formula():
    corpus = [["a", "cat", "sat"], ["a", "dog", "ran"], ["the", "cat", "ran", "far"]]
    bm = BM25Okapi(corpus)
    n, avgdl = 3, 10 / 3
    idf_cat = math.log(n - 2 + 0.5) - math.log(2 + 0.5)  # negative → epsilon * average idf
    assert idf_cat < 0
    avg = (2 * idf_cat + 2 * (math.log(n - 2 + 0.5) - math.log(2 + 0.5)) + 5 * (math.log(3 - 1 + 0.5) - math.log(1.5))) / 7
    assert bm.idf["cat"] == pytest.approx(0.25 * avg)
    s = bm.get_scores(["dog"])
    tf, dl = 1, 3
    idf_dog = math.log(2.5) - math.log(1.5)
    assert s[1] == pytest.approx(idf_dog * tf * 2.5 / (tf + 1.5 * (1 - 0.75 + 0.75 * dl / avgdl)))
    assert bm.top_n(["dog"], 1) == [1]


def test_parse_facts():
    assert atomic_facts.parse_facts(" - He is a singer.\n- He was born in 1950\n") == [
        "He is a singer.", "He was born in 1950."
    ]
    assert atomic_facts.parse_facts("preamble - A.\n- B") == ["A.", "B."]
    assert atomic_facts.parse_facts("no list here") == []


def test_postprocess_drops_fact_with_foreign_number_and_merges_one_word_sentence():
    pairs = [("He was born in 1950 in Paris.", ["He was born in 1950.", "He was born in 1962.", "He was born in Paris."]),
             ("Really.", ["Extra."])]
    out = atomic_facts.postprocess(pairs, [])
    assert len(out) == 1 and out[0][0] == "He was born in 1950 in Paris. Really."
    assert "He was born in 1962." not in out[0][1]
    assert "He was born in 1950." in out[0][1]


# ---- §4 retrieval query, §5 verification prompt ------------------------------------------------
def _ev(pid, title, text, rank, score_=0.0):
    return Evidence(Passage(pid, title, text, pid), score_, rank)


def test_retrieval_query():
    assert retrieval_query("Ann Lee", " She sings. ") == "Ann Lee She sings."


def test_verification_prompt_byte_for_byte():
    ev = [_ev(1, "Ann Lee", "<s>Ann Lee is a singer.</s>", 0), _ev(2, "Ann Lee", "<s>Born 1950</s>", 1)]
    prompt = verify.build_prompt("Ann Lee", " She sings. ", ev)
    assert prompt == (
        "Answer the question about Ann Lee based on the given context.\n\n"
        "Title: Ann Lee\nText: Born 1950\n\n"
        "Title: Ann Lee\nText: Ann Lee is a singer."
        "\n\nInput: She sings. True or False?\nOutput:"
    )
    # a period is added only when the context does not end in punctuation
    assert "Text: Born 1950.\n\nInput" in verify.build_prompt("Ann Lee", "x", [ev[1]])


# ---- §6 decisions ----------------------------------------------------------------------------
class _LogprobLLM:
    """Serves fixed next-token log-probabilities and keeps the prompts it was asked."""

    def __init__(self, logprobs):
        self.logprobs, self.prompts = logprobs, []

    def next_token_logprobs(self, prompt, words):
        self.prompts.append(prompt)
        return {w: self.logprobs[w] for w in words}


@pytest.mark.parametrize("logprobs,supported", [
    ({"True": -5.0, " True": -0.5, "False": -6.0, " False": -1.2}, True),
    ({"True": -5.0, " True": -2.0, "False": -6.0, " False": -0.3}, False),
])
def test_logprob_decision_compares_true_and_false(logprobs, supported):
    """SPEC §6 through the LLM judge: supported iff P(True) beats P(False), each summed over
    the word with and without its leading space."""
    llm = _LogprobLLM(logprobs)
    ev = [_ev(1, "Ann Lee", "<s>Ann Lee is a singer.</s>", 0)]
    (v,) = verify.Verifier(llm).verify("Ann Lee", ["She sings."], [ev])
    lse = lambda a, b: math.log(math.exp(a) + math.exp(b))  # noqa: E731
    margin = lse(logprobs["True"], logprobs[" True"]) - lse(logprobs["False"], logprobs[" False"])
    assert v.is_supported is supported and v.rule == "logprob" and v.margin == pytest.approx(margin)
    assert llm.prompts == [verify.build_prompt("Ann Lee", "She sings.", ev)]


@pytest.mark.parametrize("answer,expected", [
    ("True", True), ("false.", False), ("It is false, not true", True), ("True... no, False", False),
    ("Yes", True), ("There is not enough information", False), ("Unknown.", False), ("cannot tell", False),
])
def test_text_decision_rule(answer, expected):
    assert verify.decide_from_text(answer) is expected


def test_prefix_order_groups_identical_passage_sequences():
    a = [_ev(1, "T", "x", 0), _ev(2, "T", "y", 1)]
    b = [_ev(3, "T", "z", 0), _ev(2, "T", "y", 1)]
    order = verify.Verifier.prefix_order("T", [a, b, a])
    assert order in ([0, 2, 1], [1, 0, 2])
    assert abs(order.index(0) - order.index(2)) == 1


# ---- §8 score ---------------------------------------------------------------------------------
def test_length_penalty():
    assert score.length_penalty(11) == 1.0
    assert score.length_penalty(10) == pytest.approx(1.0)
    assert score.length_penalty(5) == pytest.approx(math.exp(1 - 2))
    assert score.length_penalty(3, gamma=0) == 1.0


def test_aggregate_fields():
    def scored(supported):
        sc, init = score.response_score(supported, gamma=10)
        return {"status": "ok", "decisions": [{"is_supported": s} for s in supported], "score": sc, "init_score": init}

    items = [
        scored([True] * 3 + [False]),
        scored([True] * 11 + [False]),
        {"status": "abstained", "decisions": None},
        {"status": "topic_not_found", "decisions": None},
    ]
    out = score.aggregate(items, gamma=10)
    assert out["init_score"] == pytest.approx((0.75 + 11 / 12) / 2)
    assert out["score"] == pytest.approx((0.75 * math.exp(1 - 10 / 4) + 11 / 12) / 2)
    assert out["respond_ratio"] == pytest.approx(2 / 3)
    assert out["num_facts_per_response"] == 8
    assert out["num_responding"] == 2 and out["num_items"] == 4
