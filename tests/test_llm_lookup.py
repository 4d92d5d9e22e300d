"""The default decomposer's decoding: prompt-lookup drafts and the stop rules of the fact list.

The rules and the draft lookup are checked without a model; with the real 0.5B model, drafted
decoding is checked to be a function of the prompt alone (cold, after other prompts, with a kept
prefix restored), to be cached apart from the reference's decoding, and to need fewer decoding
steps than tokens on atomic-fact prompts.
"""
import pytest

from fscore_lite.backends.llm_lookup import lookup_draft
from fscore_lite.factscore import atomic_facts as af
from fscore_lite.factscore import fact_decoding as fd


# ---- stop rules (no model) ------------------------------------------------------------------
def test_stop_at_blank_line_and_non_item_line():
    assert fd.fact_stop("- A.\n- B.\n\nPlease") == len("- A.\n- B.")
    assert fd.fact_stop("- A.\n- B.\nPlease breakdown") == len("- A.\n- B.\n")
    assert fd.fact_stop("- A.\n- B.\n") is None and fd.fact_stop("- A.\n- B") is None


def test_stop_at_a_repeated_fact_and_a_runaway_fact():
    loop = "- He is a singer.\n- He is famous.\n- he is a singer .\n- He"
    assert fd.fact_stop(loop) == len("- He is a singer.\n- He is famous.\n")
    long = "- A.\n- " + " ".join(["word"] * (fd.MAX_FACT_WORDS + 1))
    assert fd.fact_stop(long) == len("- A.\n")
    ok = "- A.\n- " + " ".join(["word"] * fd.MAX_FACT_WORDS)
    assert fd.fact_stop(ok) is None


def test_cut_then_parse_drops_the_loop():
    text = "- She is an actress.\n- She is a singer.\n- She is an actress.\n- She is a singer."
    assert af.parse_facts(fd.cut(text)) == ["She is an actress.", "She is a singer."]
    assert af.parse_facts(fd.cut(" - One fact.")) == ["One fact."]


def test_lookup_draft_prefers_the_longest_ngram_and_the_first_source():
    sentence = [5, 6, 7, 8, 9, 10]
    prompt = [1, 2, 7, 3, 3] + sentence
    assert lookup_draft([4, 6, 7], [sentence, prompt], k=3) == [8, 9, 10]  # the 2-gram 6 7
    assert lookup_draft([7], [sentence, prompt], k=2) == [8, 9]  # first source first
    assert lookup_draft([2], [sentence, prompt], k=2) == [7, 3]  # then the whole prompt
    assert lookup_draft([42], [sentence, prompt]) == [] and lookup_draft([], [sentence]) == []


def test_decomposer_named_in_the_settings_and_checked():
    from fscore_lite.errors import FscoreError

    default, reference = af.describe_settings(False), af.describe_settings(False, "reference")
    assert default["decomposer"] == "default" and "deviation" in default["decoding"]
    assert reference["decomposer"] == "reference" and reference["decoding"].startswith("reference")
    assert list(reference["filters"]) == ["none"] and all("deviation" in r for r in default["filters"].values())
    from fscore_lite.factscore import decomposers

    with pytest.raises(FscoreError, match="--decomposer must be one of default, reference, parse"):
        decomposers.make_decomposer("fast", lambda: pytest.fail("an unknown decomposer loads no LLM"))
    with pytest.raises(ValueError, match="not an LLM decomposer"):
        af.AtomicFactGenerator(object(), decomposer="parse")


def test_score_cli_has_the_decomposer_option():
    from typer.testing import CliRunner

    from fscore_lite.cli import app

    out = CliRunner().invoke(app, ["score", "--help"], terminal_width=200).output
    assert "--decomposer" in out


# ---- with the 0.5B model ---------------------------------------------------------------------
SENTENCES = [
    "Marie Curie was a Polish physicist who won two Nobel Prizes.",
    "He was born in 1950 in Lagos, Nigeria, and studied law at the University of Lagos.",
    "The band released three albums between 1990 and 1995, and toured Europe twice.",
]


def _runner(like, cache=None):
    from fscore_lite.backends.llm import LlamaRunner
    from fscore_lite.cache import CallCache

    return LlamaRunner(like.model_path, like.sha256, like.name, threads=like.threads, n_ctx=2048,
                       cache=cache if cache is not None else CallCache(None))


@pytest.fixture(scope="module")
def prompts():
    demos = af.load_demos()
    sel = af.DemoSelector(demos)
    return [af.build_prompt(s, demos, sel) for s in SENTENCES]


@pytest.mark.llm
def test_drafted_decoding_depends_on_the_prompt_alone(test_llm, prompts):
    def lookup(r, p):
        return r.generate_lookup(p, af.MAX_FACT_TOKENS, fd.fact_stop, fd.STOP_RULE, draft=3)

    cold = [lookup(_runner(test_llm), p) for p in prompts]  # a fresh context each
    assert all(af.parse_facts(c) for c in cold) and len(set(cold)) == len(cold)
    r = _runner(test_llm)
    r.keep_prefix(af.fixed_prefix(af.load_demos()))
    assert [lookup(r, p) for p in prompts] == cold  # after each other, the demos reused
    r.generate(prompts[0], 5, ())  # reference decoding in between
    assert [lookup(r, p) for p in reversed(prompts)] == cold[::-1]
    assert r.stats.extra["lookup_steps"] < r.stats.tokens_generated  # drafts were accepted


@pytest.mark.llm
def test_drafted_decoding_is_cached_apart(test_llm, prompts):
    from fscore_lite.cache import CallCache

    cache = CallCache(None)
    r = _runner(test_llm, cache)
    ref = r.generate(prompts[0], af.MAX_FACT_TOKENS, af.STOP)
    fast = r.generate_lookup(prompts[0], af.MAX_FACT_TOKENS, fd.fact_stop, fd.STOP_RULE)
    assert cache.hits == 0  # two keys, two computations
    again = _runner(test_llm, cache)
    assert again.generate_lookup(prompts[0], af.MAX_FACT_TOKENS, fd.fact_stop, fd.STOP_RULE) == fast
    assert again.generate(prompts[0], af.MAX_FACT_TOKENS, af.STOP) == ref
    assert cache.hits == 2 and again.stats.tokens_generated == 0
