"""Generations decoded together are the same bits as decoded one at a time.

``LlamaRunner.generate_many`` decodes up to 3 sequences a step in KV streams of their own
(``backends/llm_parallel.py``). These tests hold its promise with the real 0.5B model: the same
strings as ``generate`` on real atomic-fact prompts, the same logits (compared with ``==``) step by
step for streams of different lengths, the same call-cache entries, and 4 or more sequences
refused (llama.cpp's 4-column kernels make a sequence's result depend on the others).
"""
import numpy as np
import pytest

from fscore_lite.backends.llm import LlamaRunner
from fscore_lite.backends.llm_parallel import MAX_WIDTH, ParallelDecoder
from fscore_lite.cache import CallCache
from fscore_lite.errors import FscoreError
from fscore_lite.factscore import atomic_facts as af

pytestmark = pytest.mark.llm

SENTENCES = [
    "Marie Curie was a Polish physicist who won two Nobel Prizes.",
    "He was born in 1950 in Lagos, Nigeria, and studied law at the University of Lagos.",
    "She later moved to Paris.",
    "The band released three albums between 1990 and 1995, and toured Europe twice.",
    "He is married and has two children.",
]


def runner(like: LlamaRunner, parallel: int, cache=None) -> LlamaRunner:
    return LlamaRunner(like.model_path, like.sha256, like.name, threads=like.threads, n_ctx=2048,
                       cache=cache if cache is not None else CallCache(None), parallel=parallel)


@pytest.fixture(scope="module")
def prompts():
    demos = af.load_demos()
    sel = af.DemoSelector(demos)
    return [af.build_prompt(s, demos, sel) for s in SENTENCES]


@pytest.fixture(scope="module")
def one_at_a_time(test_llm, prompts):
    r = runner(test_llm, 1)
    return r, [r.generate(p, 40, af.STOP) for p in prompts]


def test_generate_many_is_generate_bit_for_bit(test_llm, prompts, one_at_a_time):
    _, expected = one_at_a_time
    r = runner(test_llm, 3)
    got = r.generate_many(prompts, 40, af.STOP)
    assert got == expected
    assert all(got) and len(set(got)) == len(got)  # real, distinct generations
    assert r._parallel is not None and r.stats.tokens_generated > 0  # the parallel path ran
    # two sequences a step, and a cut by max_tokens, give the same strings too
    r2 = runner(test_llm, 2)
    assert r2.generate_many(prompts[:3], 6, af.STOP) == [one_at_a_time[0].generate(p, 6, af.STOP) for p in prompts[:3]]


def test_same_cache_entries(test_llm, prompts, one_at_a_time):
    cache = CallCache(None)
    runner(test_llm, 3, cache).generate_many(prompts[:3], 40, af.STOP)
    again = runner(test_llm, 1, cache)
    assert [again.generate(p, 40, af.STOP) for p in prompts[:3]] == one_at_a_time[1][:3]
    assert again.stats.cached_calls == 3 and again.stats.tokens_evaluated == 0


def test_logits_step_by_step_equal(test_llm, prompts):
    """Prefill and every batched step give the logits a single sequence gets, with streams
    of different lengths in one batch and a stream reusing another's prefix."""
    single = runner(test_llm, 1)
    dec = ParallelDecoder(runner(test_llm, 3), 3)
    toks = [single._prompt_tokens(p) for p in prompts[:3]]
    assert len({len(t) for t in toks}) == 3
    cur = {s: dec.prefill(s, t) for s, t in enumerate(toks)}
    ref = {}
    for s, t in enumerate(toks):
        ref[s] = [single._eval_to(t, reuse=False)]
        for _ in range(4):
            ref[s].append(single._step(int(np.argmax(ref[s][-1]))))
    for s in cur:
        assert np.array_equal(cur[s], ref[s][0])
    for k in range(1, 5):
        live = {s: int(np.argmax(cur[s])) for s in cur if s != 2 or k <= 2}  # stream 2 leaves after 2 steps
        cur.update(dec.step(live))
        for s in live:
            assert np.array_equal(cur[s], ref[s][k]), (s, k)
    dec.close()


def test_width_limits(test_llm):
    with pytest.raises(FscoreError, match="--parallel must be 1 to 3"):
        runner(test_llm, MAX_WIDTH + 1)
    with pytest.raises(FscoreError, match="--parallel must be 1 to 3"):
        runner(test_llm, 0)


def test_prompt_over_context_is_refused(test_llm, prompts):
    r = LlamaRunner(test_llm.model_path, test_llm.sha256, test_llm.name, threads=1, n_ctx=512,
                    cache=CallCache(None), parallel=3)
    with pytest.raises(FscoreError, match="does not fit the context of 512 tokens"):
        r.generate_many(prompts[:2], 8, af.STOP)
