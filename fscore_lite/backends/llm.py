"""Local causal LM through llama.cpp: greedy generation and next-token log-probabilities.

The KV cache is managed explicitly: before each evaluation the runner keeps the longest
common token prefix of what is already in the context and evaluates only the rest. Calls
that share a prefix (the fixed demos of the atomic-fact prompt, a shared verification
context) therefore pay for it once. Every call goes through the SQLite call cache, keyed by
the model's sha256 and the exact input.
"""
from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..cache import CallCache
from ..errors import FscoreError


@dataclass
class LLMStats:
    calls: int = 0
    cached_calls: int = 0
    tokens_evaluated: int = 0
    tokens_reused: int = 0
    tokens_generated: int = 0
    extra: dict = field(default_factory=dict)


class LlamaRunner:
    """One llama.cpp context; greedy, deterministic, prefix-reusing."""

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
    ):
        try:
            from llama_cpp import Llama
        except ImportError as e:  # pragma: no cover - install problem
            raise FscoreError("llama-cpp-python is not installed: pip install llama-cpp-python") from e
        self.name = name or Path(model_path).stem
        self.sha256 = sha256
        self.threads = threads
        self.cache = cache if cache is not None else CallCache(None)
        self.chat_template = chat_template
        self.reuse_prefix = reuse_prefix  # False: evaluate every prompt from scratch (for tests/benchmarks)
        self.stats = LLMStats()
        # llama.cpp prints its load log on stderr; keep it quiet.
        self._llm = Llama(
            model_path=str(model_path),
            n_ctx=n_ctx,
            n_batch=n_batch,
            n_threads=threads,
            n_threads_batch=threads,
            logits_all=False,
            verbose=False,
            seed=0,
        )
        self.n_ctx = n_ctx
        self.n_vocab = self._llm.n_vocab()
        self.eos = self._llm.token_eos()
        self._tokens: list[int] = []  # tokens currently in the KV cache

    # ---- tokens -----------------------------------------------------------------------
    def _is_eog(self, token: int) -> bool:
        import llama_cpp

        return token == self.eos or bool(llama_cpp.llama_vocab_is_eog(self._llm._model.vocab, token))

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
            vocab = self._llm._model
            eos = vocab.token_get_text(self.eos) if self.eos >= 0 else ""
            bos_id = self._llm.token_bos()
            bos = vocab.token_get_text(bos_id) if bos_id >= 0 else ""
            self._chat = Jinja2ChatFormatter(tmpl, eos_token=eos, bos_token=bos, add_generation_prompt=True)
        return self._chat(messages=[{"role": "user", "content": prompt}]).prompt

    def _prompt_tokens(self, prompt: str) -> list[int]:
        text = self.format_prompt(prompt)
        return self._llm.tokenize(text.encode("utf-8"), add_bos=True, special=self.chat_template)

    # ---- evaluation -------------------------------------------------------------------
    def _eval_to(self, tokens: list[int], reuse: bool | None = None) -> np.ndarray:
        """Make the context hold exactly ``tokens`` and return the last position's logits.

        Keeps the longest common prefix with what the context already holds (unless prefix
        reuse is off for this runner and ``reuse`` is not forced)."""
        if len(tokens) >= self.n_ctx:
            raise FscoreError(
                f"prompt of {len(tokens)} tokens does not fit the context of {self.n_ctx} tokens; raise --n-ctx"
            )
        keep = 0
        for a, b in zip(self._tokens if (self.reuse_prefix if reuse is None else reuse) else (), tokens):
            if a != b:
                break
            keep += 1
        if keep == len(tokens):
            keep -= 1  # re-evaluate the last token to get fresh logits
        llm = self._llm
        llm._ctx.kv_cache_seq_rm(-1, keep, -1)
        llm.n_tokens = keep
        self._tokens = self._tokens[:keep]
        rest = tokens[keep:]
        llm.eval(rest)
        self._tokens = list(tokens)
        self.stats.tokens_evaluated += len(rest)
        self.stats.tokens_reused += keep
        ptr = llm._ctx.get_logits_ith(-1)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()

    @staticmethod
    def _log_softmax(logits: np.ndarray) -> np.ndarray:
        m = float(logits.max())
        return logits - (m + math.log(float(np.exp(logits - m).sum())))

    def next_token_logprobs(self, prompt: str, words: list[str]) -> dict[str, float]:
        """Log-probabilities of the first token of each word as the next token after ``prompt``."""
        payload = {"prompt": prompt, "words": words, "chat": self.chat_template}

        def compute():
            lp = self._log_softmax(self._eval_to(self._prompt_tokens(prompt)))
            return {w: float(lp[self.first_token(w)]) for w in words}

        return self._cached("next_token_logprobs", payload, compute)

    def suffix_logprobs(self, prefix_tokens: list[int], suffix: str, words: list[str]) -> dict[str, float]:
        """Like :meth:`next_token_logprobs` for ``prefix_tokens + tokens(suffix)``.

        Used by shared-context verification: the prefix is tokenised once, so every fact's
        suffix is appended to exactly the same tokens and the KV cache always hits.
        """
        payload = {"prefix_sha": _tokens_key(prefix_tokens), "suffix": suffix, "words": words, "chat": self.chat_template}

        def compute():
            toks = prefix_tokens + self._llm.tokenize(suffix.encode("utf-8"), add_bos=False, special=self.chat_template)
            lp = self._log_softmax(self._eval_to(toks))
            return {w: float(lp[self.first_token(w)]) for w in words}

        return self._cached("suffix_logprobs", payload, compute)

    def generate(self, prompt: str, max_tokens: int = 128, stop: tuple[str, ...] = ("\n\n",)) -> str:
        """Greedy decoding until EOS, a stop string (not included) or ``max_tokens``."""
        payload = {"prompt": prompt, "max_tokens": max_tokens, "stop": list(stop), "chat": self.chat_template}

        def compute():
            toks = self._prompt_tokens(prompt)
            logits = self._eval_to(toks)
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
                logits = self._eval_to(toks + out, reuse=True)  # one new token per step
            self.stats.tokens_generated += len(out)
            cut = min((text.index(s) for s in stop if s in text), default=len(text))
            return text[:cut]

        return self._cached("generate", payload, compute)

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
                           cache=cache, chat_template=chat_template)
    bundle = bundle or Bundle(settings.models_dir)
    entry = bundle.get(name)
    path = bundle.verified_path(entry)
    return LlamaRunner(path, entry.sha256, entry.name, settings.threads, settings.n_ctx, cache=cache,
                       chat_template=chat_template)
