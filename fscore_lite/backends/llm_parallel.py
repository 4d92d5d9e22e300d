"""Several greedy generations decoded together, each bit for bit what it is decoded alone.

A second llama.cpp context over the runner's model holds ``width`` sequences, each in a KV stream
of its own (``kv_unified = false``): a sequence's cell i holds its position i, exactly the layout
of the runner's single working sequence. Every prompt is prefilled alone, on the runner's own
segment schedule (:meth:`LlamaRunner.segment_ends`), so it is computed by the same kernels on the
same batch shapes; only the decoding steps are batched: one ``llama_decode`` a step carries the
next token of every live sequence.

Why at most 3 a step (measured, ``tests/test_llm_parallel.py`` holds it): llama.cpp's CPU backend
multiplies the repacked Q4_K weights by activations in blocks of 4 columns once a batch has 4
tokens or more, and what such a block computes for one sequence depends on the other sequences
in it; with 1–3 tokens every column goes through the one-column kernel, whose result for a
token depends on that token alone. Three sequences a step decode 1.3–1.5× the tokens per second
of one on this project's CPUs (``python -m bench --only atomic_facts``).

Sequences are refilled from the queue as they finish, and a new prompt starts from the longest
prefix any stream holds on its schedule (a whole-stream copy, then truncation): the fixed
few-shot demos are evaluated once per context, not once per stream.
"""
from __future__ import annotations

import weakref

import numpy as np

from ..errors import FscoreError

MAX_WIDTH = 3  # see the module docstring: 4 or more tokens a step change the bits


def check_width(width: int) -> int:
    """``width`` when it is 1 to :data:`MAX_WIDTH`, else a clear error (``--parallel``)."""
    if not 1 <= width <= MAX_WIDTH:
        raise FscoreError(f"--parallel must be 1 to {MAX_WIDTH}, not {width}: with 4 or more sequences a step "
                          "llama.cpp's CPU kernels give results that depend on the other sequences")
    return width


def generate_many(runner, prompts: list[str], max_tokens: int, stop: tuple[str, ...]) -> list[str]:
    """:meth:`LlamaRunner.generate_many` with ``runner.parallel`` > 1: cached prompts from the call
    cache (the keys of ``generate``), the others decoded together, each cached as it ends."""
    out: list[str | None] = [None] * len(prompts)
    todo: list[int] = []
    for i, p in enumerate(prompts):
        runner.stats.calls += 1
        hit = runner.cache.get(runner.sha256, "generate", runner._generate_payload(p, max_tokens, stop))
        if hit is not None:
            runner.cache.hits += 1
            runner.stats.cached_calls += 1
            out[i] = hit
        else:
            todo.append(i)
    if todo:
        if runner._parallel is None:
            runner._parallel = ParallelDecoder(runner, runner.parallel)

        def done(j: int, text: str) -> None:
            i = todo[j]
            runner.cache.misses += 1
            runner.cache.put(runner.sha256, "generate", runner._generate_payload(prompts[i], max_tokens, stop), text)
            out[i] = text

        runner._parallel.generate([runner._prompt_tokens(prompts[i]) for i in todo], max_tokens, stop, done)
    return out  # type: ignore[return-value]


def _free(ctx, batch) -> None:
    import llama_cpp

    llama_cpp.llama_batch_free(batch)
    llama_cpp.llama_free(ctx)


class ParallelDecoder:
    """``width`` KV streams over ``runner``'s model (public ``llama_cpp`` functions only)."""

    def __init__(self, runner, width: int, strict: bool = True):
        """``strict=False`` allows more than :data:`MAX_WIDTH` streams, for measuring what they
        would change (``bench/llm_batching.py``); the runtime never does."""
        import llama_cpp

        if width < 1 or strict:
            check_width(width)
        self.runner = runner
        self.width = width
        p = llama_cpp.llama_context_default_params()
        p.n_ctx = runner.n_ctx * width  # each stream gets n_ctx / n_seq_max cells: the runner's n_ctx
        p.n_batch = p.n_ubatch = runner.n_batch
        p.n_seq_max = width
        p.n_threads = p.n_threads_batch = runner.threads
        p.kv_unified = False
        p.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED  # as the runner's context
        p.no_perf = True
        self.ctx = llama_cpp.llama_init_from_model(runner.model, p)
        if not self.ctx:
            raise FscoreError(f"llama.cpp could not create a context of {width} sequences")
        self.mem = llama_cpp.llama_get_memory(self.ctx)
        self.batch = llama_cpp.llama_batch_init(max(runner.n_batch, width), 0, 1)
        self._finalizer = weakref.finalize(self, _free, self.ctx, self.batch)
        self.held: list[list[int]] = [[] for _ in range(width)]  # stream s: cell i = position i = held[s][i]
        self.ends: list[list[int]] = [[] for _ in range(width)]

    def close(self) -> None:
        self._finalizer()

    # ---- streams --------------------------------------------------------------------
    def _clear(self, s: int) -> None:
        import llama_cpp

        llama_cpp.llama_memory_seq_rm(self.mem, s, -1, -1)
        self.held[s], self.ends[s] = [], []

    def truncate(self, s: int, keep: int) -> None:
        """Make stream ``s`` hold its first ``keep`` tokens (the cells after them are reused next)."""
        import llama_cpp

        if keep == 0:
            self._clear(s)
            return
        if keep < len(self.held[s]) and not llama_cpp.llama_memory_seq_rm(self.mem, s, keep, -1):
            raise FscoreError("llama.cpp could not truncate its KV cache")
        del self.held[s][keep:]
        self.ends[s] = [e for e in self.ends[s] if e <= keep]

    def _decode(self, items: list[tuple[int, int, int, bool]]) -> None:
        """One ``llama_decode`` of (token, position, stream, wants logits) items."""
        import llama_cpp

        b = self.batch
        b.n_tokens = len(items)
        for i, (tok, pos, s, want) in enumerate(items):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = tok, pos, 1, want
            b.seq_id[i][0] = s
        rc = llama_cpp.llama_decode(self.ctx, b)
        if rc != 0:
            for s in {it[2] for it in items}:
                self._clear(s)
            raise FscoreError(f"llama.cpp failed to decode a batch (llama_decode returned {rc})")

    def _logits(self, i: int) -> np.ndarray:
        import llama_cpp

        ptr = llama_cpp.llama_get_logits_ith(self.ctx, i)
        return np.ctypeslib.as_array(ptr, shape=(self.runner.n_vocab,)).copy()

    def prefill(self, s: int, tokens: list[int]) -> np.ndarray:
        """Make stream ``s`` hold ``tokens`` on the runner's schedule; the last position's logits."""
        import llama_cpp

        r = self.runner
        ends = r.segment_ends(tokens)
        keep = r._common(tokens, ends, self.held[s], self.ends[s])
        for o in range(self.width):  # a longer reusable prefix in another stream: copy that stream
            k = r._common(tokens, ends, self.held[o], self.ends[o]) if o != s else 0
            if k > keep:
                self._clear(s)
                llama_cpp.llama_memory_seq_cp(self.mem, o, s, -1, -1)
                self.held[s], self.ends[s] = list(self.held[o]), list(self.ends[o])
                keep = k
        self.truncate(s, keep)
        r.stats.tokens_reused += keep
        start = keep
        for e in (e for e in ends if e > keep):
            self._decode([(tokens[j], j, s, j == e - 1) for j in range(start, e)])
            self.held[s].extend(tokens[start:e])
            self.ends[s].append(e)
            r.stats.tokens_evaluated += e - start
            start = e
        return self._logits(-1)

    def step(self, tokens: dict[int, int]) -> dict[int, np.ndarray]:
        """Append one token to each stream in ``tokens`` ({stream: token}), all in one batch."""
        order = sorted(tokens)
        for s in order:
            if len(self.held[s]) + 1 >= self.runner.n_ctx:
                raise FscoreError(f"generation reached the context of {self.runner.n_ctx} tokens; raise --n-ctx")
        self._decode([(tokens[s], len(self.held[s]), s, True) for s in order])
        out = {s: self._logits(i) for i, s in enumerate(order)}
        for s in order:
            self.held[s].append(tokens[s])
            self.ends[s].append(len(self.held[s]))
            self.runner.stats.tokens_reused += len(self.held[s]) - 1
            self.runner.stats.tokens_evaluated += 1
        return out

    # ---- generation -----------------------------------------------------------------
    def generate(self, prompts: list[list[int]], max_tokens: int, stop: tuple[str, ...], done) -> None:
        """Greedy generation for every tokenised prompt; ``done(i, text)`` is called as prompt i ends,
        with what :meth:`LlamaRunner.generate` returns for it."""
        r = self.runner
        queue = list(range(len(prompts)))[::-1]
        live: dict[int, tuple[int, list[int], np.ndarray]] = {}  # stream -> (prompt index, tokens out, logits)
        while queue or live:
            for s in range(self.width):
                if s not in live and queue:
                    i = queue.pop()
                    toks = prompts[i]
                    if len(toks) >= r.n_ctx:
                        raise FscoreError(f"prompt of {len(toks)} tokens does not fit the context of {r.n_ctx} "
                                          "tokens; raise --n-ctx")
                    live[s] = (i, [], self.prefill(s, toks))
            nxt: dict[int, int] = {}
            for s in sorted(live):
                i, out, logits = live[s]
                tok = int(np.argmax(logits))
                text = None
                if not r._is_eog(tok):
                    out.append(tok)
                    text = r.detokenize(out)
                    if not any(x in text for x in stop) and len(out) < max_tokens:
                        nxt[s] = tok
                        continue
                else:
                    text = r.detokenize(out)
                del live[s]
                r.stats.tokens_generated += len(out)
                cut = min((text.index(x) for x in stop if x in text), default=len(text))
                done(i, text[:cut])
            if nxt:
                for s, logits in self.step(nxt).items():
                    i, out, _ = live[s]
                    live[s] = (i, out, logits)
