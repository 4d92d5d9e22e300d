"""Greedy generation with drafts looked up in the prompt (prompt-lookup decoding).

Atomic facts copy the words of their sentence, so the tokens that follow the last few generated
tokens are often the ones that follow them in the prompt. Each decoding step proposes up to
``draft`` such tokens and evaluates them in one batch after the last token; the longest prefix the
model would itself have chosen greedily is kept, with the model's own next token after it. One
step then yields 1 to ``draft + 1`` tokens for little more than the cost of one.

What is computed is a function of the prompt and the settings alone: the prompt is evaluated on
the runner's fixed schedule (:meth:`LlamaRunner._eval_to`), and every step's batch (the last token
and its drafts) depends only on the prompt and the tokens generated so far. It need not equal
one-token-at-a-time decoding bit for bit (a batch of several tokens takes other CPU kernels), so
the call cache keys these generations apart from :meth:`LlamaRunner.generate`'s. After a call the
context is truncated back to the prompt, so what a later call reuses is always prompt-schedule
state.
"""
from __future__ import annotations

import numpy as np

from ..errors import FscoreError

# Tokens proposed a step (0: off). On 2 busy shared cores a batch of n tokens costs nearly n single
# steps, so drafting gains little there; 3 is what the bench section decomposer measured.
DRAFT = 3
NGRAM = (3, 2, 1)  # suffix lengths looked up, longest first


def lookup_draft(out: list[int], sources: list[list[int]], k: int = DRAFT) -> list[int]:
    """Up to ``k`` tokens that followed the longest suffix of ``out`` (``NGRAM`` lengths) in the
    first source that holds it (its first occurrence there); [] when none does or ``k`` is 0."""
    if k <= 0:
        return []
    for n in NGRAM:
        if len(out) < n:
            continue
        tail = out[-n:]
        for src in sources:
            for i in range(len(src) - n):
                if src[i:i + n] == tail:
                    return src[i + n:i + n + k]
    return []


def _batch_logits(runner, tokens: list[int]) -> np.ndarray:
    """Decode ``tokens`` after what the runner's context holds, one batch, logits for every position."""
    import llama_cpp

    start = len(runner._tokens)
    n = len(tokens)
    if start + n >= runner.n_ctx:
        raise FscoreError(f"generation reached the context of {runner.n_ctx} tokens; raise --n-ctx")
    batch = llama_cpp.llama_batch_init(n, 0, 1)
    try:
        batch.n_tokens = n
        for i, tok in enumerate(tokens):
            batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = tok, start + i, 1, True
            batch.seq_id[i][0] = runner.SEQ
        rc = llama_cpp.llama_decode(runner._llm.ctx, batch)
        if rc != 0:
            runner._forget()
            raise FscoreError(f"llama.cpp failed to decode a batch (llama_decode returned {rc})")
        out = np.empty((n, runner.n_vocab), dtype=np.float32)
        for i in range(n):
            ptr = llama_cpp.llama_get_logits_ith(runner._llm.ctx, i)
            out[i] = np.ctypeslib.as_array(ptr, shape=(runner.n_vocab,))
    finally:
        llama_cpp.llama_batch_free(batch)
    runner._tokens.extend(tokens)
    runner._ends.append(len(runner._tokens))
    runner._llm.n_tokens = len(runner._tokens)
    runner.stats.tokens_evaluated += n
    return out


def generate_lookup(runner, prompt: str, max_tokens: int, stop, sources_from, draft: int = DRAFT) -> str:
    """Greedy decoding of ``prompt`` with prompt-lookup drafts until EOS, ``max_tokens`` or
    ``stop(text)`` returns where the text ends (an index; None goes on).

    ``sources_from(prompt_tokens)`` gives the token lists drafts are looked up in (before the
    tokens generated so far, which are always searched last)."""
    tokens = runner._prompt_tokens(prompt)
    n_prompt = len(tokens)
    logits = runner._eval_to(tokens)
    sources = list(sources_from(tokens))
    out: list[int] = []
    text, cut = "", None
    pending = int(np.argmax(logits))  # the next greedy token, not yet in the context
    steps = 0
    try:
        while True:
            if runner._is_eog(pending):
                break
            out.append(pending)
            text = runner.detokenize(out)
            cut = stop(text)
            if cut is not None or len(out) >= max_tokens:
                break
            drafts = lookup_draft(out, sources + [out[:-1]], min(draft, max_tokens - len(out)))
            rows = _batch_logits(runner, [pending] + drafts)
            steps += 1
            greedy = [int(t) for t in np.argmax(rows, axis=1)]
            accepted = 0
            while accepted < len(drafts) and greedy[accepted] == drafts[accepted]:
                accepted += 1
            # KV cells of rejected drafts go; the accepted drafts are emitted one by one so that
            # stop rules see every prefix, as in one-at-a-time decoding
            runner._truncate(len(runner._tokens) - (len(drafts) - accepted))
            ended = False
            for tok in drafts[:accepted]:
                if runner._is_eog(tok):
                    ended = True
                    break
                out.append(tok)
                text = runner.detokenize(out)
                cut = stop(text)
                if cut is not None or len(out) >= max_tokens:
                    ended = True
                    break
            if ended:
                break
            pending = greedy[accepted]
    finally:
        runner._truncate(min(n_prompt, len(runner._tokens)))  # hold prompt-schedule state only
    runner.stats.tokens_generated += len(out)
    runner.stats.extra["lookup_steps"] = runner.stats.extra.get("lookup_steps", 0) + steps
    return text if cut is None else text[:cut]


def prompt_sources(runner, tokens: list[int]) -> list[list[int]]:
    """Where drafts come from: the prompt's last block (after its last blank line: the sentence
    to break down), then the whole prompt."""
    last = max((i + 1 for i in range(len(tokens) - 1) if runner._ends_blank_line(tokens[i])), default=0)
    return [tokens[last:], tokens]


def cached_generate_lookup(runner, prompt: str, max_tokens: int, stop, rule: str, draft: int = DRAFT) -> str:
    """:func:`generate_lookup` through the call cache; ``rule`` names the stop rule (part of the key)."""
    payload = runner._generate_payload(prompt, max_tokens, ()) | {
        "decoding": {"lookup_draft": draft, "ngram": list(NGRAM), "stop_rule": rule}}
    return runner._cached("generate_lookup", payload, lambda: generate_lookup(
        runner, prompt, max_tokens, stop, lambda toks: prompt_sources(runner, toks), draft))
