"""T5-style sequence-to-sequence generation on onnxruntime, with beam search over cached keys.

Q²'s question generator is a T5 fine-tuned for answer-aware question generation, decoded
with beam search (5 beams, 5 returned, ``no_repeat_ngram_size`` 3, ``max_length`` 128,
early stopping). :func:`beam_search` re-implements, step for step, the beam search of the
``transformers`` version the tests pin (4.57): log-softmax, then the n-gram ban, top
``2 * num_beams`` continuations over all beams, finished hypotheses scored with the length
penalty and kept only from the top ``num_beams`` ranks, early stop once ``num_beams``
hypotheses are done. The tests check that it returns the same sequences as ``generate``.

The graphs are those of an optimum export: ``encoder_model`` (ids, mask → hidden states),
``decoder_model`` (first step; returns the self- and cross-attention keys/values) and
``decoder_with_past_model`` (one token per step, reusing the keys/values), or a merged
decoder with a ``use_cache_branch`` input. No torch at run time.
"""
from __future__ import annotations

import hashlib

import numpy as np

from ..errors import ModelIntegrityError
from .onnx_base import OnnxTextModel, pad_rows
from .onnx_session import make_session

NEG = np.float32(-1.0e9)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float32, copy=False)
    m = x.max(axis=-1, keepdims=True)
    shifted = x - m
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _topk(x: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest values, best first; ties keep the lower index first.

    The same indices as ``np.argsort(-x, kind="stable")[:k]``: a partition finds the k-th
    largest value, and only the values at or above it (every tie of it included, in index
    order) are sorted, not the whole beams × vocabulary row."""
    if k >= len(x) or len(x) <= 256 or np.isnan(x).any():
        return np.argsort(-x, kind="stable")[:k]
    kth = np.partition(x, len(x) - k)[len(x) - k]
    cand = np.flatnonzero(x >= kth)
    return cand[np.argsort(-x[cand], kind="stable")[:k]]


def banned_ngram_tokens(tokens: np.ndarray, n: int) -> list[int]:
    """Tokens that would repeat an n-gram already in ``tokens`` (the no_repeat_ngram rule)."""
    cur = len(tokens)
    if n <= 0 or cur + 1 < n:
        return []
    prefix = tuple(tokens[cur + 1 - n : cur].tolist()) if n > 1 else ()
    seq = tokens.tolist()
    return [seq[i + n - 1] for i in range(cur - n + 1) if tuple(seq[i : i + n - 1]) == prefix]


class BeamState:
    """One input's beam search, as ``transformers.GenerationMixin._beam_search`` does it,
    advanced one decoder step at a time (so several inputs can share each decoder call).

    :meth:`last_tokens` and :attr:`source` are what the next decoder step needs: the running
    hypotheses' last tokens and which previous row each one extends (``None`` before the first
    step), so the caller can reorder its cached keys/values; :meth:`advance` takes that step's
    next-token logits ``(num_beams, vocab)`` and says whether the search has finished."""

    def __init__(self, *, start_id: int, eos_id: int, num_beams: int = 5, max_length: int = 128,
                 no_repeat_ngram_size: int = 3, length_penalty: float = 1.0, early_stopping: bool = True):
        self.k, self.keep = num_beams, 2 * num_beams
        self.eos_id, self.max_length = eos_id, max_length
        self.no_repeat, self.length_penalty, self.early_stopping = no_repeat_ngram_size, length_penalty, early_stopping
        self.running = np.full((self.k, max_length), eos_id, dtype=np.int64)
        self.running[:, 0] = start_id
        self.run_scores = np.zeros(self.k, dtype=np.float32)
        self.run_scores[1:] = NEG
        self.done = self.running.copy()
        self.done_scores = np.full(self.k, NEG, dtype=np.float32)
        self.done_len = np.zeros(self.k, dtype=np.int64)
        self.done_flag = np.zeros(self.k, dtype=bool)
        self.improvable = True
        self.top_rank = np.arange(self.keep) < self.k
        self.cur, self.source, self.finished = 1, None, False

    def last_tokens(self) -> np.ndarray:
        return self.running[:, self.cur - 1]

    def advance(self, logits: np.ndarray) -> bool:
        k, keep, cur = self.k, self.keep, self.cur
        logp = _log_softmax(logits)
        vocab = logp.shape[-1]
        for b in range(k):
            banned = banned_ngram_tokens(self.running[b, :cur], self.no_repeat)
            if banned:
                logp[b, banned] = -np.inf
        acc = (logp + self.run_scores[:, None]).reshape(-1)
        idx = _topk(acc, keep)
        top_scores, src, tok = acc[idx], idx // vocab, idx % vocab
        top_seqs = self.running[src].copy()
        top_seqs[:, cur] = tok
        hits = (tok == self.eos_id) | (cur + 1 >= self.max_length)

        # the best num_beams continuations that have not finished keep running
        cont = top_scores + hits.astype(np.float32) * NEG
        nxt = _topk(cont, k)
        self.running, self.run_scores, self.source = top_seqs[nxt], cont[nxt], src[nxt]

        # finished ones (top num_beams ranks only) join the done pool if they beat it
        fin = top_scores / np.float32((cur + 1 - 1) ** self.length_penalty)
        if self.done_flag.all() and self.early_stopping is True:
            fin = fin + NEG
        if not self.improvable:
            fin = fin + NEG
        just_done = hits & self.top_rank
        fin = fin + (~just_done).astype(np.float32) * NEG
        pool_scores = np.concatenate([self.done_scores, fin])
        pool_seqs = np.concatenate([self.done, top_seqs])
        pool_len = np.concatenate([self.done_len, np.full(keep, cur, dtype=np.int64)])
        pool_flag = np.concatenate([self.done_flag, just_done])
        sel = _topk(pool_scores, k)
        self.done, self.done_scores, self.done_len, self.done_flag = (pool_seqs[sel], pool_scores[sel],
                                                                      pool_len[sel], pool_flag[sel])

        self.cur = cur = cur + 1
        best_possible = self.run_scores[0] / np.float32((cur - 1) ** self.length_penalty)
        worst_done = np.where(self.done_flag, self.done_scores.min(), NEG)
        self.improvable = self.improvable and bool(np.any(best_possible > worst_done))
        self.finished = (not self.improvable or (self.done_flag.all() and self.early_stopping is True)
                         or bool(hits.all()))
        return self.finished

    def results(self, num_return: int) -> list[tuple[list[int], float]]:
        """``num_return`` pairs (token ids after the start token, up to and including EOS;
        length-normalised score), best first."""
        return [(self.done[i, 1 : self.done_len[i] + 1].tolist(), float(self.done_scores[i])) for i in range(num_return)]


def beam_search(step, *, num_return: int = 5, **settings) -> list[tuple[list[int], float]]:
    """Beam search of one input (:class:`BeamState`; ``settings``: its keyword arguments).

    ``step(last_tokens, source_beams)`` returns next-token logits ``(num_beams, vocab)`` for
    the running hypotheses. Returns :meth:`BeamState.results`."""
    state = BeamState(**settings)
    while not state.advance(step(state.last_tokens(), state.source)):
        pass
    return state.results(num_return)


def beam_search_many(step_many, states: list[BeamState]) -> None:
    """Advance several inputs' searches in lockstep until all have finished: each decoder call
    carries the running hypotheses of every search still live. ``step_many(live, last_tokens,
    sources)`` gets the live searches' indices, last tokens and sources and returns their
    next-token logits, one ``(num_beams, vocab)`` array each."""
    live = list(range(len(states)))
    while live:
        logits = step_many(live, [states[i].last_tokens() for i in live], [states[i].source for i in live])
        live = [i for i, z in zip(live, logits) if not states[i].advance(z)]


def _blocks_uniform(x: np.ndarray, blocks: int, rows: int) -> bool:
    """Whether every block of ``rows`` consecutive rows of ``x`` repeats its first row exactly
    (then gathering rows within a block is the identity, and is skipped)."""
    b = x.reshape(blocks, rows, -1)
    return bool((b == b[:, :1]).all())


class Seq2SeqGenerator(OnnxTextModel):
    """Encoder + decoder graphs of a T5-style model, decoded with :func:`beam_search`."""

    role = "qg"

    def __init__(self, encoder_path, decoder_path, tokenizer_path, config=None, *, decoder_with_past_path=None,
                 name: str, sha256: str, threads: int = 1, cache=None):
        super().__init__(tokenizer_path, config, name=name, sha256=sha256, threads=threads, cache=cache)
        self.encoder = make_session(encoder_path, self.threads)
        self.decoder = make_session(decoder_path, self.threads)
        self.decoder_with_past = make_session(decoder_with_past_path, self.threads) if decoder_with_past_path else None
        dec_inputs = [i.name for i in self.decoder.get_inputs()]
        self.merged = "use_cache_branch" in dec_inputs
        if self.decoder_with_past is None and not self.merged:
            raise ModelIntegrityError(f"seq2seq model {name}: need decoder_with_past or a merged decoder")
        past_session = self.decoder if self.merged else self.decoder_with_past
        self.past_names = [i.name for i in past_session.get_inputs() if i.name.startswith("past_key_values.")]
        if not self.past_names:
            raise ModelIntegrityError(f"seq2seq model {name}: the decoder takes no past key/values")
        cfg = self.config
        self.start_id = int(cfg.get("decoder_start_token_id", cfg.get("pad_token_id", 0)) or 0)
        self.eos_id = int(cfg.get("eos_token_id", 1))
        self.pad_id = int(cfg.get("pad_token_id", 0) or 0)

    @classmethod
    def from_bundle(cls, bundle, entry, *, threads=1, cache=None, precision="int8") -> "Seq2SeqGenerator":
        """Load the graphs of a ``qg`` entry (kinds ``encoder``/``decoder``/``decoder_with_past``,
        with ``_fp32`` twins for the unquantized graphs)."""
        kinds = {f.kind: f for f in entry.files}
        suffix = "_fp32" if precision == "fp32" else ""

        def pick(kind: str, required: bool = True):
            f = kinds.get(kind + suffix) or kinds.get(kind)
            if f is None:
                if required:
                    raise ModelIntegrityError(f"model '{entry.name}' has no {kind} file in {bundle.manifest_path}")
                return None, ""
            return bundle.verify_file(f), f.sha256

        enc, enc_sha = pick("encoder")
        dec, dec_sha = pick("decoder")
        past, past_sha = pick("decoder_with_past", required=False)
        tok, _ = pick("tokenizer")
        cfg, _ = pick("config", required=False)
        # identity of the graphs actually run (int8 and fp32 never share cache entries)
        sha = hashlib.sha256("|".join([enc_sha, dec_sha, past_sha]).encode()).hexdigest()
        return cls(enc, dec, tok, cfg, decoder_with_past_path=past, name=entry.name, sha256=sha,
                   threads=threads, cache=cache)

    # -- graphs ---------------------------------------------------------------------------
    def encode(self, ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
        input_ids = np.asarray([ids], dtype=np.int64)
        mask = np.ones_like(input_ids)
        (hidden,) = self.encoder.run(["last_hidden_state"], {"input_ids": input_ids, "attention_mask": mask})
        return hidden, mask

    def decoder_runner(self, hidden: np.ndarray, mask: np.ndarray, rows: int):
        """A ``step`` function for :func:`beam_search` of one input that keeps the keys/values
        between calls (:meth:`decoder_runner_many` with that input alone: the same feeds)."""
        step_many = self.decoder_runner_many(hidden, mask, rows)
        return lambda last_tokens, source: step_many([0], [last_tokens], [source])[0]

    def encode_many(self, ids_list: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Several inputs in one encoder call, right-padded with the pad id (mask 0 there)."""
        input_ids, mask = pad_rows(ids_list, self.pad_id)
        (hidden,) = self.encoder.run(["last_hidden_state"], {"input_ids": input_ids, "attention_mask": mask})
        return hidden, mask

    def decoder_runner_many(self, hidden: np.ndarray, mask: np.ndarray, rows: int, shortcuts: bool = True):
        """A ``step_many`` function for :func:`beam_search_many` over the inputs of
        :meth:`encode_many`: one decoder call for all live searches (``rows`` hypotheses each),
        their keys/values gathered row by row from the previous call's, finished searches dropped.

        ``shortcuts`` (tested to change no bit): the first step, where a search's beams are all
        the start token, decodes one row per search and repeats it; cross-attention keys/values,
        then equal across a search's beams, are not regathered at every step."""
        hidden = np.repeat(hidden, rows, axis=0)
        mask = np.repeat(mask, rows, axis=0)
        state: dict[str, np.ndarray] = {}
        layout: list[int] = []  # the searches whose rows the state holds, in order
        uniform: set[str] = set()  # past names whose rows are identical within each search's block
        dec_out = [o.name for o in self.decoder.get_outputs()]

        def step_many(live: list[int], last_tokens: list[np.ndarray], sources: list) -> list[np.ndarray]:
            ids = np.concatenate([np.asarray(t, dtype=np.int64) for t in last_tokens]).reshape(-1, 1)
            enc_rows = np.concatenate([np.arange(j * rows, (j + 1) * rows) for j in live])
            h, m = hidden[enc_rows], mask[enc_rows]
            first = sources[0] is None
            if first:
                # Before the first step every beam of a search is the same hypothesis (the start
                # token): decode one row per search and repeat its outputs over the beams.
                one = ids.reshape(len(live), rows)
                dedupe = shortcuts and bool((one == one[:, :1]).all())
                if dedupe:
                    ids, h, m = one[:, :1], h[::rows], m[::rows]
                feeds = {"input_ids": ids, "encoder_attention_mask": m, "encoder_hidden_states": h}
                if self.merged:
                    feeds.update(self._empty_past(len(ids), h.shape[1]))
                    feeds["use_cache_branch"] = np.array([False])
                outs = dict(zip(dec_out, self.decoder.run(dec_out, feeds)))
                if dedupe:
                    outs = {k: np.repeat(v, rows, axis=0) for k, v in outs.items()}
            else:
                block = {j: pos for pos, j in enumerate(layout)}
                gather = np.concatenate([block[j] * rows + np.asarray(src) for j, src in zip(live, sources)])
                # rows of the searches still live (all of them while none has finished)
                kept = None if live == layout else np.concatenate(
                    [np.arange(block[j] * rows, (block[j] + 1) * rows) for j in live])
                feeds = {"input_ids": ids, "encoder_attention_mask": m}
                for name in self.past_names:
                    if name in uniform:  # every row of a block holds the same keys/values: no gather
                        feeds[name] = state[name] if kept is None else state[name][kept]
                    else:
                        feeds[name] = state[name][gather]
                session = self.decoder if self.merged else self.decoder_with_past
                if self.merged:
                    feeds["encoder_hidden_states"] = h
                    feeds["use_cache_branch"] = np.array([True])
                names = [o.name for o in session.get_outputs()]
                outs = dict(zip(names, session.run(names, feeds)))
            for name in self.past_names:
                present = outs.get(name.replace("past_key_values.", "present."))
                if present is not None and (first or ".encoder." not in name):
                    state[name] = present
                else:  # the cross-attention keys/values of the first step, regathered
                    state[name] = feeds[name]
            if first:  # cross-attention keys/values equal across a search's beams are never regathered
                uniform.update(name for name in self.past_names if ".encoder." in name
                               and shortcuts and _blocks_uniform(state[name], len(live), rows))
            layout[:] = live
            logits = outs["logits"][:, -1, :]
            return [logits[p * rows : (p + 1) * rows] for p in range(len(live))]

        return step_many

    def _empty_past(self, rows: int, enc_len: int) -> dict:
        out = {}
        for i in self.decoder.get_inputs():
            if i.name.startswith("past_key_values."):
                heads, dim = i.shape[1], i.shape[3]
                length = enc_len if ".encoder." in i.name else 0
                out[i.name] = np.zeros((rows, heads, length, dim), dtype=np.float32)
        return out

    # -- generation -----------------------------------------------------------------------
    def beam_generate(self, text: str, *, num_beams=5, num_return=5, max_length=128, no_repeat_ngram_size=3,
                      early_stopping=True) -> list[dict]:
        """Beam-search outputs for ``text`` (tokenised as is, special tokens added by the
        tokenizer): ``[{"ids": [...], "score": s, "text": decoded}]``, best first. Cached."""
        payload = {"input": text, "num_beams": num_beams, "num_return": num_return, "max_length": max_length,
                   "no_repeat_ngram_size": no_repeat_ngram_size, "early_stopping": early_stopping}

        def compute():
            ids = self.tokenizer.encode(text).ids
            hidden, mask = self.encode(ids)
            hyps = beam_search(self.decoder_runner(hidden, mask, num_beams), start_id=self.start_id,
                               eos_id=self.eos_id, num_beams=num_beams, num_return=num_return,
                               max_length=max_length, no_repeat_ngram_size=no_repeat_ngram_size,
                               early_stopping=early_stopping)
            return [{"ids": seq, "score": score, "text": self.decode(seq)} for seq, score in hyps]

        return self.cached("seq2seq_beam", payload, compute)

    def beam_generate_many(self, texts: list[str], *, num_beams=5, num_return=5, max_length=128,
                           no_repeat_ngram_size=3, early_stopping=True) -> list[list[dict]]:
        """:meth:`beam_generate` for several inputs, encoded in one padded call and decoded in
        lockstep (:func:`beam_search_many`). Cached as one call: a batch's results are the
        batch's (padding and batch shape change the low bits, so they are never mixed with
        single-input results). One input is :meth:`beam_generate` itself."""
        if len(texts) <= 1:
            return [self.beam_generate(t, num_beams=num_beams, num_return=num_return, max_length=max_length,
                                       no_repeat_ngram_size=no_repeat_ngram_size, early_stopping=early_stopping)
                    for t in texts]
        payload = {"inputs": list(texts), "num_beams": num_beams, "num_return": num_return, "max_length": max_length,
                   "no_repeat_ngram_size": no_repeat_ngram_size, "early_stopping": early_stopping}

        def compute():
            hidden, mask = self.encode_many([self.tokenizer.encode(t).ids for t in texts])
            states = [BeamState(start_id=self.start_id, eos_id=self.eos_id, num_beams=num_beams, max_length=max_length,
                                no_repeat_ngram_size=no_repeat_ngram_size, early_stopping=early_stopping)
                      for _ in texts]
            beam_search_many(self.decoder_runner_many(hidden, mask, num_beams), states)
            return [[{"ids": seq, "score": score, "text": self.decode(seq)} for seq, score in st.results(num_return)]
                    for st in states]

        return self.cached("seq2seq_beam_many", payload, compute)

    def decode(self, ids: list[int]) -> str:
        """``tokenizer.decode(ids, skip_special_tokens=True)`` with the classic clean-up of spaces."""
        return clean_up_tokenization(self.tokenizer.decode(list(ids), skip_special_tokens=True))


def clean_up_tokenization(text: str) -> str:
    """The space clean-up ``transformers`` applied when decoding by default (before 4.45)."""
    for a, b in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                 (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(a, b)
    return text
