"""Local causal LM through llama.cpp: greedy generation and next-token log-probabilities.

Same input, same bits, whatever ran before. What llama.cpp computes for a token depends on how
it was evaluated: in which batch (the CPU kernels take different paths for different batch
shapes) and in which KV-cache cells the context sits. So every prompt is evaluated on one
fixed schedule that depends on the call alone:

* layout: one working sequence whose cell i holds position i. Before each call the context is
  truncated to a reusable prefix or cleared; it never keeps holes or other sequences.
* segments: the prompt is decoded in segments that end after every token that ends a blank
  line (``"\n\n"``), at the cuts a call names (the end of a shared-context prefix) and every
  ``n_batch`` tokens inside a longer segment; each generated token is a segment of its own.

A call reuses what the context holds only up to a segment end at which the tokens and all
segment ends so far agree with its own schedule: the reused cells then hold exactly the bytes
a cold evaluation writes. Calls that share a prefix (the definition and passages of
verification prompts, a shared verification context) pay for it once.

Prefixes named with :meth:`LlamaRunner.keep_prefix` (the fixed demos of the atomic-fact
prompt) are saved as a sequence-state snapshot when first evaluated and restored into the
cleared context (so at cells 0..n-1 again) when a later prompt starts with them and the
context holds something else: verification and generation do not push each other's prefixes
out. Every call goes through the SQLite call cache, keyed by the model's sha256, the exact
input, the schedule's version, ``n_batch`` and the thread count (which changes the bits too).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..cache import CallCache
from ..errors import FscoreError
from .llm_snapshots import PrefixSnapshots, Snapshot

# Part of every call-cache key, with n_batch and the thread count. Version 2: the fixed schedule
# above (values computed before it depended on what ran earlier in the process and are not reused).
LAYOUT = 2


@dataclass
class LLMStats:
    calls: int = 0
    cached_calls: int = 0
    tokens_evaluated: int = 0
    tokens_reused: int = 0
    tokens_generated: int = 0
    extra: dict = field(default_factory=dict)


class LlamaRunner(PrefixSnapshots):
    """One llama.cpp context; greedy, deterministic, prefix-reusing (see the module docstring)."""

    SEQ = 0  # the working sequence; the only one the context ever holds

    def __init__(
        self,
        model_path: str | Path,
        sha256: str,
        name: str = "",
        threads: int = 1,
        n_ctx: int = 4096,
        n_batch: int = 512,
        cache: CallCache | None = None,
        chat_template: bool = False,
        reuse_prefix: bool = True,
        parallel: int = 1,
        kernel: str = "portable",
    ):
        try:
            import llama_cpp
            from llama_cpp import Llama
        except ImportError as e:  # pragma: no cover - install problem
            raise FscoreError("llama-cpp-python is not installed: pip install llama-cpp-python") from e
        from .llama_kernels import ensure_kernel

        # the CPU kernel is chosen before the first model loads (a build with loadable variants
        # has no kernel until one is loaded) and is part of every call-cache key below
        self.kernel = ensure_kernel(kernel)
        self.name = name or Path(model_path).stem
        self.model_path = str(model_path)
        self.sha256 = sha256
        self.threads = threads
        self.cache = cache if cache is not None else CallCache(None)
        self.chat_template = chat_template
        # False: every prompt is evaluated from scratch (for tests and benchmarks); same results
        self.reuse_prefix = reuse_prefix
        # sequences decoded together by generate_many (1: one at a time); same results either way
        from .llm_parallel import check_width

        self.parallel = check_width(parallel)
        self._parallel = None  # the ParallelDecoder, made on first use
        self.stats = LLMStats(extra={"snapshots_saved": 0, "snapshots_restored": 0})
        # llama.cpp prints its load log on stderr; keep it quiet.
        self._llm = Llama(
            model_path=str(model_path),
            n_ctx=n_ctx,
            n_batch=n_batch,
            n_ubatch=n_batch,
            n_threads=threads,
            n_threads_batch=threads,
            logits_all=False,
            verbose=False,
            seed=0,
        )
        self.n_ctx = n_ctx
        self.n_batch = self._llm.n_batch
        self.n_vocab = self._llm.n_vocab()
        self.eos = self._llm.token_eos()
        self._vocab = llama_cpp.llama_model_get_vocab(self._llm.model)
        self._mem = llama_cpp.llama_get_memory(self._llm.ctx)
        self._tokens: list[int] = []  # what the working sequence holds: cell i = position i = _tokens[i]
        self._ends: list[int] = []  # the ends of the segments they were decoded in
        self._keep: dict[tuple[int, ...], Snapshot | None] = {}  # kept prefixes and their snapshots
        self._blank: dict[int, bool] = {}  # token id -> its text ends a blank line
        # What the bits depend on besides the input: the schedule and the threads that ran (the
        # matmul split changes with the thread count). Part of every call-cache key.
        self._numerics = {"version": LAYOUT, "n_batch": self.n_batch,
                          "threads": [self._llm.n_threads, self._llm.n_threads_batch]}
        if self.kernel.cache_tag is not None:  # the AVX2 kernel's calls keep their earlier keys
            self._numerics["cpu"] = self.kernel.cache_tag

    @property
    def model(self):
        """The loaded llama.cpp model (``Llama.model``), shared by the parallel decoder's context."""
        return self._llm.model

    # ---- tokens -----------------------------------------------------------------------
    def _is_eog(self, token: int) -> bool:
        import llama_cpp

        return token == self.eos or bool(llama_cpp.llama_vocab_is_eog(self._vocab, token))

    def _token_text(self, token: int) -> str:
        import llama_cpp

        return llama_cpp.llama_vocab_get_text(self._vocab, token).decode("utf-8", errors="replace")

    def tokenize(self, text: str, add_bos: bool = True, special: bool = False) -> list[int]:
        return self._llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=special)

    def split_template(self, text: str) -> tuple[str, str]:
        """(head, tail) with ``format_prompt(text + x) == head + x + tail`` for any appended x."""
        if not self.chat_template:
            return text, ""
        head, tail = self.format_prompt(text + "\x00").split("\x00")
        return head, tail

    def detokenize(self, tokens: list[int]) -> str:
        return self._llm.detokenize(tokens).decode("utf-8", errors="replace")

    def first_token(self, word: str) -> int:
        """The first token id of ``word`` in this model's own vocabulary."""
        toks = self._llm.tokenize(word.encode("utf-8"), add_bos=False, special=False)
        return toks[0]

    def format_prompt(self, prompt: str) -> str:
        """Completion-style (the reference) by default; with ``chat_template`` the prompt is one
        user turn rendered by the model's own chat template (from the GGUF metadata)."""
        if not self.chat_template:
            return prompt
        if not hasattr(self, "_chat"):
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            tmpl = self._llm.metadata.get("tokenizer.chat_template")
            if not tmpl:
                raise FscoreError(f"model {self.name} has no chat template; run without --chat-template")
            eos = self._token_text(self.eos) if self.eos >= 0 else ""
            bos_id = self._llm.token_bos()
            bos = self._token_text(bos_id) if bos_id >= 0 else ""
            self._chat = Jinja2ChatFormatter(tmpl, eos_token=eos, bos_token=bos, add_generation_prompt=True)
        return self._chat(messages=[{"role": "user", "content": prompt}]).prompt

    def _prompt_tokens(self, prompt: str) -> list[int]:
        text = self.format_prompt(prompt)
        return self._llm.tokenize(text.encode("utf-8"), add_bos=True, special=self.chat_template)

    # ---- the evaluation schedule ------------------------------------------------------
    def _ends_blank_line(self, token: int) -> bool:
        v = self._blank.get(token)
        if v is None:
            v = self._blank[token] = self._llm.detokenize([token]).endswith(b"\n\n")
        return v

    def segment_ends(self, tokens: list[int], cuts=()) -> list[int]:
        """Where the segments ``tokens`` is decoded in end: after each token that ends a blank
        line, at ``cuts``, every ``n_batch`` tokens inside a longer segment, and at the end."""
        n = len(tokens)
        marks = {i + 1 for i in range(n - 1) if self._ends_blank_line(tokens[i])}
        marks.update(c for c in cuts if 0 < c < n)
        marks.add(n)
        ends: list[int] = []
        start = 0
        for e in sorted(marks):
            while e - start > self.n_batch:
                start += self.n_batch
                ends.append(start)
            ends.append(e)
            start = e
        return ends

    @staticmethod
    def _common(tokens: list[int], ends: list[int], held: list[int], held_ends: list[int]) -> int:
        """The longest prefix of ``tokens`` (short of all of it) that ``held`` holds bit for bit:
        a segment end of both schedules with equal tokens and equal segment ends up to it."""
        best = 0
        for a, b in zip(ends, held_ends):
            if a != b or a >= len(tokens) or tokens[best:a] != held[best:a]:
                break
            best = a
        return best

    # ---- llama.cpp memory and state (public llama_cpp functions on ``Llama.ctx``) ---------
    def _truncate(self, keep: int) -> None:
        """Make the working sequence hold its first ``keep`` tokens (freed cells are reused from
        ``keep`` on, so the layout stays cell i = position i)."""
        import llama_cpp

        if keep == 0:
            llama_cpp.llama_memory_clear(self._mem, False)
        elif keep < len(self._tokens) and not llama_cpp.llama_memory_seq_rm(self._mem, self.SEQ, keep, -1):
            raise FscoreError("llama.cpp could not truncate its KV cache")
        del self._tokens[keep:]
        self._ends = [e for e in self._ends if e <= keep]
        self._llm.n_tokens = keep

    def _forget(self) -> None:
        """After a failure: the context's content is unknown, so hold nothing."""
        import llama_cpp

        llama_cpp.llama_memory_clear(self._mem, False)
        self._tokens, self._ends = [], []
        self._llm.n_tokens = 0

    def _logits(self) -> np.ndarray:
        import llama_cpp

        ptr = llama_cpp.llama_get_logits_ith(self._llm.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()

    def _decode(self, tokens: list[int], ends: list[int]) -> np.ndarray:
        """Decode ``tokens`` after what the context holds (a prefix of them), one batch per
        segment end in ``ends``; return the last position's logits."""
        start = len(self._tokens)
        try:
            for e in ends:
                self._llm.n_tokens = start
                self._llm.eval(tokens[start:e])
                self._tokens.extend(tokens[start:e])
                self._ends.append(e)
                self.stats.tokens_evaluated += e - start
                start = e
                self._save_if_kept(e)
        except BaseException:
            self._forget()
            raise
        return self._logits()

    def _eval_to(self, tokens: list[int], reuse: bool | None = None, cuts=()) -> np.ndarray:
        """Make the context hold exactly ``tokens`` and return the last position's logits.

        The prompt is decoded on its own schedule (:meth:`segment_ends` with ``cuts``), reusing
        the longest prefix the context or a kept snapshot holds on that same schedule; the
        result is the same bits as a cold evaluation. ``reuse=False`` evaluates from scratch;
        ``reuse=True`` with ``tokens`` extending what the context holds decodes just the new
        tokens after it (one decoding step)."""
        n = len(tokens)
        if n == 0:
            raise FscoreError("cannot evaluate an empty prompt")
        if n >= self.n_ctx:
            raise FscoreError(
                f"prompt of {n} tokens does not fit the context of {self.n_ctx} tokens; raise --n-ctx"
            )
        held = len(self._tokens)
        if reuse is True and 0 < held < n and tokens[:held] == self._tokens:
            ends = [e for e in range(held + self.n_batch, n, self.n_batch)] + [n]
            self.stats.tokens_reused += held
            return self._decode(tokens, ends)
        ends = self.segment_ends(tokens, cuts)
        keep = 0
        if self.reuse_prefix if reuse is None else reuse:
            keep = self._common(tokens, ends, self._tokens, self._ends)
            snap = self._snapshot_for(tokens, ends, keep)
            if snap is not None:
                keep = len(snap.tokens) if self._restore(snap) else 0  # a failed restore leaves it empty
        self._truncate(keep)
        self.stats.tokens_reused += keep
        return self._decode(tokens, [e for e in ends if e > keep])

    def _step(self, token: int) -> np.ndarray:
        """One decoding step: append ``token`` as a segment of its own."""
        n = len(self._tokens) + 1
        if n >= self.n_ctx:
            raise FscoreError(f"generation reached the context of {self.n_ctx} tokens; raise --n-ctx")
        self.stats.tokens_reused += n - 1
        return self._decode(self._tokens + [token], [n])

    def evaluate(self, tokens: list[int]) -> np.ndarray:
        """The logits after ``tokens`` (a full prompt, BOS included), on the fixed schedule; the context
        then holds exactly ``tokens``. For benchmarks and diagnostics: no call cache."""
        return self._eval_to(list(tokens))

    def append(self, token: int) -> np.ndarray:
        """One decoding step after what :meth:`evaluate` (or the last call) left: the logits after ``token``."""
        if not self._tokens:
            raise FscoreError("append() needs a context: call evaluate() first")
        return self._step(token)

    @staticmethod
    def _log_softmax(logits: np.ndarray) -> np.ndarray:
        m = float(logits.max())
        return logits - (m + math.log(float(np.exp(logits - m).sum())))

    def next_token_logprobs(self, prompt: str, words: list[str]) -> dict[str, float]:
        """Log-probabilities of the first token of each word as the next token after ``prompt``."""
        payload = {"prompt": prompt, "words": words, "chat": self.chat_template, "layout": self._numerics}

        def compute():
            lp = self._log_softmax(self._eval_to(self._prompt_tokens(prompt)))
            return {w: float(lp[self.first_token(w)]) for w in words}

        return self._cached("next_token_logprobs", payload, compute)

    def suffix_logprobs(self, prefix_tokens: list[int], suffix: str, words: list[str]) -> dict[str, float]:
        """Like :meth:`next_token_logprobs` for ``prefix_tokens + tokens(suffix)``.

        Used by shared-context verification: the prefix is tokenised once and its end is a
        segment end, so every fact's suffix is appended to exactly the same cached prefix.
        """
        payload = {"prefix_sha": _tokens_key(prefix_tokens), "suffix": suffix, "words": words,
                   "chat": self.chat_template, "layout": self._numerics}

        def compute():
            toks = prefix_tokens + self._llm.tokenize(suffix.encode("utf-8"), add_bos=False, special=self.chat_template)
            lp = self._log_softmax(self._eval_to(toks, cuts=(len(prefix_tokens),)))
            return {w: float(lp[self.first_token(w)]) for w in words}

        return self._cached("suffix_logprobs", payload, compute)

    def generate(self, prompt: str, max_tokens: int = 128, stop: tuple[str, ...] = ("\n\n",)) -> str:
        """Greedy decoding until EOS, a stop string (not included) or ``max_tokens``."""
        payload = self._generate_payload(prompt, max_tokens, stop)

        def compute():
            logits = self._eval_to(self._prompt_tokens(prompt))
            out: list[int] = []
            text = ""
            for _ in range(max_tokens):
                nxt = int(np.argmax(logits))
                if self._is_eog(nxt):
                    break
                out.append(nxt)
                text = self.detokenize(out)
                if any(s in text for s in stop):
                    break
                logits = self._step(nxt)
            self.stats.tokens_generated += len(out)
            cut = min((text.index(s) for s in stop if s in text), default=len(text))
            return text[:cut]

        return self._cached("generate", payload, compute)

    def generate_lookup(self, prompt: str, max_tokens: int, stop, rule: str, draft: int | None = None) -> str:
        """Greedy decoding with ``draft`` tokens a step looked up in the prompt until ``stop(text)``
        gives a cut (:mod:`.llm_lookup`; not bit-identical to :meth:`generate`, cached apart)."""
        from .llm_lookup import DRAFT, cached_generate_lookup

        return cached_generate_lookup(self, prompt, max_tokens, stop, rule, DRAFT if draft is None else draft)

    def _generate_payload(self, prompt: str, max_tokens: int, stop) -> dict:
        return {"prompt": prompt, "max_tokens": max_tokens, "stop": list(stop), "chat": self.chat_template,
                "layout": self._numerics}

    def generate_many(self, prompts: list[str], max_tokens: int = 128, stop: tuple[str, ...] = ("\n\n",)) -> list[str]:
        """``[generate(p, max_tokens, stop) for p in prompts]``, the same strings bit for bit (and the
        same call-cache entries), with up to ``parallel`` sequences decoded together
        (:mod:`.llm_parallel`). Each result is cached as soon as its sequence ends."""
        if self.parallel == 1 or len(prompts) < 2 or max_tokens <= 0:
            return [self.generate(p, max_tokens, stop) for p in prompts]
        from .llm_parallel import generate_many

        return generate_many(self, prompts, max_tokens, stop)

    def _cached(self, kind: str, payload: dict, compute):
        self.stats.calls += 1
        before = self.cache.hits
        out = self.cache.cached(self.sha256, kind, payload, compute)
        if self.cache.hits > before:
            self.stats.cached_calls += 1
        return out


def _tokens_key(tokens: list[int]) -> str:
    import hashlib

    return hashlib.sha256(np.asarray(tokens, dtype=np.int64).tobytes()).hexdigest()


def load_llm(settings, bundle=None, cache: CallCache | None = None, chat_template: bool = False) -> LlamaRunner:
    """The LLM named by ``settings.llm`` (a bundle entry name, or a path to a .gguf file)."""
    from ..manifest import Bundle, sha256_file

    name = settings.llm
    if name.endswith(".gguf") and os.path.exists(name):
        return LlamaRunner(name, sha256_file(name), Path(name).stem, settings.threads, settings.n_ctx,
                           cache=cache, chat_template=chat_template, parallel=settings.parallel,
                           kernel=settings.llm_kernel)
    bundle = bundle or Bundle(settings.models_dir)
    entry = bundle.get(name)
    path = bundle.verified_path(entry)
    return LlamaRunner(path, entry.sha256, entry.name, settings.threads, settings.n_ctx, cache=cache,
                       chat_template=chat_template, parallel=settings.parallel, kernel=settings.llm_kernel)
