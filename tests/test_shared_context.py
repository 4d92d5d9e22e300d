"""How shared-context mode builds its one context per response: which passages, in what
order, within what budget — with a fake tokenizer (one token per word), no LLM."""
from __future__ import annotations

from fscore_lite.factscore.retrieve import Evidence
from fscore_lite.factscore.verify import Verifier, fact_suffix
from fscore_lite.store import Passage


class WordTokenizer:
    """Counts tokens as whitespace-separated words; records what the verifier evaluates."""

    chat_template = False

    def __init__(self):
        self.prefix_text = None
        self.suffixes: list[str] = []

    def tokenize(self, text, add_bos=False, special=False):
        return text.split()

    def split_template(self, context):
        return context, ""

    def suffix_logprobs(self, prefix, suffix, words):
        self.suffixes.append(suffix)
        good = "good" in suffix
        return {"True": -1.0, " True": -0.5 if good else -3.0, "False": -1.0, " False": -3.0 if good else -0.5}


def P(pid, ordinal, words, title="Ann Lee"):
    # "Title: {title}\nText: {text}\n\n" costs 2 + len(title words) + words tokens
    return Passage(pid, title, " ".join(f"w{pid}" for _ in range(words)), ordinal)


def ev(*passages):
    return [Evidence(p, 1.0 - r / 10, r) for r, p in enumerate(passages)]


def cost(p):
    return len(f"Title: {p.title}\nText: {p.text}\n\n".split())


A, B, C, D, E = P(10, 4, 5), P(11, 0, 5), P(12, 2, 40), P(13, 1, 5), P(14, 3, 5)


def test_priority_is_shared_passages_first_then_best_rank_and_layout_is_page_order():
    # B is retrieved for all three facts, A for two, then C (rank 0 once), D, E
    evidence = [ev(A, B, D), ev(C, B, A), ev(B, E)]
    v = Verifier(WordTokenizer(), "shared-context", context_budget=10_000)
    chosen = v.shared_passages(evidence)
    assert chosen == [B, D, C, E, A]  # every passage fits: laid out by page ordinal, not by priority


def test_budget_skips_what_does_not_fit_and_keeps_smaller_later_passages():
    evidence = [ev(A, B, D), ev(C, B, A), ev(B, E)]
    # priority order: B (3 facts), A (2), then rank 0: C, then rank 1/2: E (rank 1), D (rank 2)
    budget = cost(B) + cost(A) + cost(E) + cost(D)  # C (40 words) does not fit once B and A are in
    v = Verifier(WordTokenizer(), "shared-context", context_budget=budget)
    chosen = v.shared_passages(evidence)
    assert C not in chosen and chosen == [B, D, E, A]
    assert sum(cost(p) for p in chosen) <= budget
    # one token less: the lowest-priority passage that no longer fits (D) is dropped
    v.context_budget = budget - 1
    assert v.shared_passages(evidence) == [B, E, A]


def test_first_passage_is_kept_even_over_budget():
    v = Verifier(WordTokenizer(), "shared-context", context_budget=3)
    assert v.shared_passages([ev(C), ev(A)]) == [C]


def test_context_text_and_one_suffix_per_fact():
    tok = WordTokenizer()
    v = Verifier(tok, "shared-context", context_budget=10_000)
    prefixes = []
    orig = tok.suffix_logprobs

    def record(prefix, suffix, words):
        prefixes.append(" ".join(prefix))
        return orig(prefix, suffix, words)

    tok.suffix_logprobs = record
    b = Passage(1, "Ann Lee", "<s>Ann Lee is a painter.</s>", 0)
    a = Passage(2, "Ann Lee", "<s>She was born in 1950</s>", 1)
    verdicts = v.verify("Ann Lee", ["good fact", "bad fact"], [ev(a, b), ev(a)])
    context = ("Answer the question about Ann Lee based on the given context.\n\n"
               "Title: Ann Lee\nText: Ann Lee is a painter.\n\n"
               "Title: Ann Lee\nText: She was born in 1950.")  # page order, markers removed, "." added
    assert prefixes == [" ".join(context.split())] * 2
    assert tok.suffixes == [fact_suffix("good fact"), fact_suffix("bad fact")]
    assert [x.is_supported for x in verdicts] == [True, False]
    assert all(x.rule == "logprob" and x.margin is not None for x in verdicts)
