"""Same prompt, same bits: what the LLM runner returns does not depend on what it ran before.

llama.cpp's results for a token depend on the batch it was decoded in and on the KV-cache cells
its context sits in. The runner decodes every prompt on a schedule fixed by the prompt alone
(``LlamaRunner.segment_ends``), in a working sequence whose cell i holds position i, and reuses
a prefix only where it was decoded on that same schedule. These tests compare floats with ``==``.
They bypass the call cache, which would otherwise hand back the first value.
"""
import pytest

from fscore_lite.backends.llm import LlamaRunner
from fscore_lite.factscore.verify import FALSE_WORDS, TRUE_WORDS, fact_suffix, margin_from_logprobs

pytestmark = pytest.mark.llm
WORDS = list(TRUE_WORDS + FALSE_WORDS)

DEFINITION = "Answer the question about Ada Lovelace based on the given context.\n\n"
P1 = ("Title: Ada Lovelace\nText: Ada Lovelace was an English mathematician and writer, known for her "
      "work on the Analytical Engine.\n\n")
P2 = "Title: Ada Lovelace\nText: She was the only legitimate child of the poet Lord Byron."
P2_OTHER = "Title: Ada Lovelace\nText: She died in London in 1852 at the age of 36."
CONTEXT = DEFINITION + P1 + P2
B = CONTEXT + fact_suffix("Ada Lovelace was born in Japan.")
A = DEFINITION + P1 + P2_OTHER + fact_suffix("Ada Lovelace was a mathematician.")  # shares definition + P1
A2 = CONTEXT + fact_suffix("Ada Lovelace was a poet.")  # shares the whole context with B
OTHER = ("Answer the question about Alan Turing based on the given context.\n\nTitle: Alan Turing\n"
         "Text: Alan Turing was a British mathematician.\n\nInput: Alan Turing was British. True or False?\nOutput:")
GEN = "Ada Lovelace facts:\n\n- Ada Lovelace was"
GEN_SIBLING = "Ada Lovelace facts:\n\n- She was the daughter of"  # shares GEN's first segment


class NoCache:
    """Computes every call (an in-memory CallCache would return the first value again)."""

    hits = 0

    def cached(self, model, kind, payload, compute):
        return compute()


def fresh(like: LlamaRunner, **kw) -> LlamaRunner:
    """A new runner on the same model file and settings: a cold start, as after ``--resume``."""
    kw = {"threads": like.threads, "n_ctx": like.n_ctx, "n_batch": like.n_batch, "cache": NoCache(), **kw}
    return LlamaRunner(like.model_path, like.sha256, like.name, **kw)


@pytest.fixture
def warm(test_llm, monkeypatch):
    """The session's runner, in whatever state earlier tests left it, without its call cache."""
    monkeypatch.setattr(test_llm, "cache", NoCache())
    return test_llm


def margin(llm, prompt):
    return margin_from_logprobs(llm.next_token_logprobs(prompt, WORDS))


def shared_margin(llm, fact):
    prefix = llm.tokenize(CONTEXT, add_bos=True)
    return margin_from_logprobs(llm.suffix_logprobs(prefix, fact_suffix(fact), WORDS))


def test_schedule_depends_on_the_prompt_alone(warm):
    toks = warm.tokenize(B, add_bos=True)
    ends = warm.segment_ends(toks)
    assert ends[-1] == len(toks) and ends == sorted(set(ends))
    # a segment ends after the definition's, the first passage's and the context's blank line
    texts = [warm.detokenize(toks[:e]) for e in ends[:-1]]
    assert texts == [DEFINITION, DEFINITION + P1, CONTEXT + "\n\n"]
    cut = len(warm.tokenize(DEFINITION + "Title: Ada", add_bos=True))
    assert warm.segment_ends(toks, cuts=(cut,)) == sorted(ends + [cut])
    small = fresh(warm, n_batch=16)
    split = small.segment_ends(toks)
    assert all(b - a <= 16 for a, b in zip([0] + split, split)) and set(ends) <= set(split)
    assert small.segment_ends(toks) == split  # pure: same prompt, same schedule


def test_margin_identical_alone_after_other_prompts_and_shared_context(warm):
    r = fresh(warm)
    alone = margin(r, B)  # cold: nothing ran before
    after = []
    for before in ([A], [A2], [A, "shared"], [OTHER, A2], ["shared", A2]):
        for p in before:
            if p == "shared":
                shared_margin(r, "Ada Lovelace was a poet.")
            else:
                margin(r, p)
        after.append(margin(r, B))
    assert r.stats.tokens_reused > 0  # the later calls did reuse prefixes
    r.reuse_prefix = False
    margin(r, A2)
    after.append(margin(r, B))  # evaluated from scratch
    after.append(margin(warm, B))  # the session's runner, after whatever other tests ran
    assert after == [alone] * len(after)
    # shared-context margins: cold on one runner, after other calls on another
    s_alone = shared_margin(fresh(warm), "Ada Lovelace was a poet.")
    margin(r, B)
    shared_margin(r, "Ada Lovelace was a mathematician.")
    r.reuse_prefix = True
    s_after = [shared_margin(r, "Ada Lovelace was a poet.")]
    margin(r, A)
    s_after.append(shared_margin(r, "Ada Lovelace was a poet."))
    assert s_after == [s_alone, s_alone]


def test_generate_identical_alone_and_after_other_calls(warm):
    r = fresh(warm)
    alone = r.generate(GEN, 12, ())
    assert alone.strip()
    outs = []
    for before in (lambda: margin(r, A), lambda: r.generate(GEN_SIBLING, 6, ()),
                   lambda: shared_margin(r, "Ada Lovelace was a poet."), lambda: None):
        before()
        outs.append(r.generate(GEN, 12, ()))
    outs.append(warm.generate(GEN, 12, ()))
    assert outs == [alone] * len(outs)
    # the step after a generation continues on the same schedule: its margin is that of a cold run
    cont = GEN + alone
    assert margin(r, cont) == margin(fresh(warm), cont)


def test_cold_start_matches_warm_runner(warm):
    """What ``--resume`` does: a new process loads the model and continues with the next item."""
    margin(warm, A2)  # the previous item: same topic, same passages
    warm_values = [margin(warm, B), shared_margin(warm, "Ada Lovelace was a poet.")]
    warm.generate(GEN_SIBLING, 4, ())
    warm_values.append(warm.generate(GEN, 12, ()))
    cold = fresh(warm)
    cold_values = [margin(cold, B), shared_margin(cold, "Ada Lovelace was a poet."), cold.generate(GEN, 12, ())]
    assert cold_values == warm_values


def test_kept_prefix_restored_gives_the_evaluated_bits(warm):
    r = fresh(warm)
    r.keep_prefix(DEFINITION + P1)
    first = margin(r, B)  # evaluates the kept prefix and saves it
    assert r.stats.extra["snapshots_saved"] == 1
    margin(r, OTHER)  # the context now holds something else
    evaluated = r.stats.tokens_evaluated
    again = margin(r, B)
    assert r.stats.extra["snapshots_restored"] == 1
    n_kept = len(r.tokenize(DEFINITION + P1, add_bos=True))
    assert r.stats.tokens_evaluated - evaluated == len(r.tokenize(B, add_bos=True)) - n_kept
    assert again == first == margin(fresh(warm), B)
    # a snapshot llama.cpp refuses to load: the prompt is evaluated instead, same bits, saved anew
    (snap,) = [v for v in r._keep.values() if v is not None]
    snap.size = 16
    margin(r, OTHER)
    assert margin(r, B) == first
    assert r.stats.extra["snapshots_restored"] == 1 and r.stats.extra["snapshots_saved"] == 2


def test_demo_prefix_evaluated_once_across_generation_and_verification(warm):
    from fscore_lite.factscore.atomic_facts import AtomicFactGenerator, build_prompt, fixed_prefix

    r = fresh(warm)
    gen = AtomicFactGenerator(r, decomposer="reference")  # registers the fixed demos (only) with the runner
    n_prefix = len(r.tokenize(fixed_prefix(gen.demos), add_bos=True))
    assert n_prefix > 500
    sentences = ["Adil Rami is a French footballer.", "He played for Lille and Marseille.",
                 "Ada Lovelace wrote the first program."]
    prompts = [build_prompt(s, gen.demos, gen.selector) for s in sentences]
    lengths = [len(r.tokenize(p, add_bos=True)) for p in prompts]
    shared_prefix = r.tokenize(CONTEXT, add_bos=True)
    verify_lengths = [len(r.tokenize(B, add_bos=True)),
                      len(shared_prefix) + len(r.tokenize(fact_suffix("Ada Lovelace was a poet."), add_bos=False))]
    r.generate(prompts[0], 4, ())  # no stop strings: every generated token is decoded once
    margin(r, B)  # parity verification in between
    r.generate(prompts[1], 4, ())
    shared_margin(r, "Ada Lovelace was a poet.")  # shared-context verification in between
    r.generate(prompts[2], 4, ())
    s = r.stats
    assert s.extra["snapshots_saved"] == 1 and s.extra["snapshots_restored"] == 2
    # the demo prefix once, the rest of each prompt, each generated token, the verification prompts
    assert s.tokens_evaluated == n_prefix + sum(n - n_prefix for n in lengths) + s.tokens_generated + sum(verify_lengths)


def test_runner_uses_only_public_llama_cpp_api():
    """The KV-cache and state calls the runner makes exist in the pinned llama-cpp-python, and it
    reaches them through ``Llama.ctx`` / ``Llama.model``, never through private attributes."""
    import inspect

    import llama_cpp

    import fscore_lite.backends.llm as llm_module

    for name in ("llama_get_memory", "llama_memory_clear", "llama_memory_seq_rm", "llama_memory_seq_pos_max",
                 "llama_state_seq_get_size", "llama_state_seq_get_data", "llama_state_seq_set_data",
                 "llama_get_logits_ith", "llama_model_get_vocab", "llama_vocab_is_eog", "llama_vocab_get_text"):
        assert callable(getattr(llama_cpp, name, None)), name
    assert isinstance(llama_cpp.Llama.ctx, property) and isinstance(llama_cpp.Llama.model, property)
    source = inspect.getsource(llm_module)
    for private in ("._ctx", "._model", "._batch", "._llm._"):
        assert private not in source, private


def test_thread_count_is_part_of_the_cache_key(warm, tmp_path):
    """Other threads give other bits, so a cache filled at one thread count never answers another."""
    from fscore_lite.cache import CallCache

    cache = CallCache(tmp_path / "calls.sqlite")
    one = fresh(warm, cache=cache)
    one.next_token_logprobs("The sky is", ["blue"])
    fresh(warm, cache=cache).next_token_logprobs("The sky is", ["blue"])
    assert cache.hits == 1  # same threads: answered from the cache
    fresh(warm, cache=cache, threads=2).next_token_logprobs("The sky is", ["blue"])
    assert cache.hits == 1 and cache.misses == 2
