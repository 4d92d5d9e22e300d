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
from .onnx_qa import OnnxTextModel, make_session

NEG = np.float32(-1.0e9)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float32, copy=False)
    m = x.max(axis=-1, keepdims=True)
    shifted = x - m
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _topk(x: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest values, best first; ties keep the lower index first."""
    return np.argsort(-x, kind="stable")[:k]


def banned_ngram_tokens(tokens: np.ndarray, n: int) -> list[int]:
    """Tokens that would repeat an n-gram already in ``tokens`` (the no_repeat_ngram rule)."""
    cur = len(tokens)
    if n <= 0 or cur + 1 < n:
        return []
    prefix = tuple(tokens[cur + 1 - n : cur].tolist()) if n > 1 else ()
    seq = tokens.tolist()
    return [seq[i + n - 1] for i in range(cur - n + 1) if tuple(seq[i : i + n - 1]) == prefix]


def beam_search(step, *, start_id: int, eos_id: int, num_beams: int = 5, num_return: int = 5,
                max_length: int = 128, no_repeat_ngram_size: int = 3, length_penalty: float = 1.0,
                early_stopping: bool = True) -> list[tuple[list[int], float]]:
    """Beam search as ``transformers.GenerationMixin._beam_search`` does it (batch of one input).

    ``step(last_tokens, source_beams)`` returns next-token logits ``(num_beams, vocab)`` for
    the running hypotheses; ``source_beams`` says which previous row each hypothesis extends
    (``None`` on the first call), so the caller can reorder its cached keys/values.
    Returns ``num_return`` pairs (token ids after the start token, up to and including EOS;
    length-normalised score), best first.
    """
    k, keep = num_beams, 2 * num_beams
    running = np.full((k, max_length), eos_id, dtype=np.int64)
    running[:, 0] = start_id
    run_scores = np.zeros(k, dtype=np.float32)
    run_scores[1:] = NEG
    done = running.copy()
    done_scores = np.full(k, NEG, dtype=np.float32)
    done_len = np.zeros(k, dtype=np.int64)
    done_flag = np.zeros(k, dtype=bool)
    improvable = True
    top_rank = np.arange(keep) < k
    cur, source = 1, None
    while True:
        logp = _log_softmax(step(running[:, cur - 1], source))
        vocab = logp.shape[-1]
        for b in range(k):
            banned = banned_ngram_tokens(running[b, :cur], no_repeat_ngram_size)
            if banned:
                logp[b, banned] = -np.inf
        acc = (logp + run_scores[:, None]).reshape(-1)
        idx = _topk(acc, keep)
        top_scores, src, tok = acc[idx], idx // vocab, idx % vocab
        top_seqs = running[src].copy()
        top_seqs[:, cur] = tok
        hits = (tok == eos_id) | (cur + 1 >= max_length)

        # the best num_beams continuations that have not finished keep running
        cont = top_scores + hits.astype(np.float32) * NEG
        nxt = _topk(cont, k)
        running, run_scores, source = top_seqs[nxt], cont[nxt], src[nxt]

        # finished ones (top num_beams ranks only) join the done pool if they beat it
        fin = top_scores / np.float32((cur + 1 - 1) ** length_penalty)
        if done_flag.all() and early_stopping is True:
            fin = fin + NEG
        if not improvable:
            fin = fin + NEG
        just_done = hits & top_rank
        fin = fin + (~just_done).astype(np.float32) * NEG
        pool_scores = np.concatenate([done_scores, fin])
        pool_seqs = np.concatenate([done, top_seqs])
        pool_len = np.concatenate([done_len, np.full(keep, cur, dtype=np.int64)])
        pool_flag = np.concatenate([done_flag, just_done])
        sel = _topk(pool_scores, k)
        done, done_scores, done_len, done_flag = pool_seqs[sel], pool_scores[sel], pool_len[sel], pool_flag[sel]

        cur += 1
        best_possible = run_scores[0] / np.float32((cur - 1) ** length_penalty)
        worst_done = np.where(done_flag, done_scores.min(), NEG)
        improvable = improvable and bool(np.any(best_possible > worst_done))
        if not improvable or (done_flag.all() and early_stopping is True) or hits.all():
            break
    return [(done[i, 1 : done_len[i] + 1].tolist(), float(done_scores[i])) for i in range(num_return)]


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
        """A ``step`` function for :func:`beam_search` that keeps the keys/values between calls."""
        hidden = np.repeat(hidden, rows, axis=0)
        mask = np.repeat(mask, rows, axis=0)
        state: dict[str, np.ndarray] = {}
        dec_out = [o.name for o in self.decoder.get_outputs()]

        def step(last_tokens: np.ndarray, source) -> np.ndarray:
            ids = np.asarray(last_tokens, dtype=np.int64).reshape(rows, 1)
            if source is None:
                feeds = {"input_ids": ids, "encoder_attention_mask": mask, "encoder_hidden_states": hidden}
                if self.merged:
                    feeds.update(self._empty_past(rows, hidden.shape[1]))
                    feeds["use_cache_branch"] = np.array([False])
                outs = dict(zip(dec_out, self.decoder.run(dec_out, feeds)))
            else:
                feeds = {"input_ids": ids, "encoder_attention_mask": mask}
                for name in self.past_names:
                    present = state[name]
                    feeds[name] = present if ".encoder." in name else present[source]
                session = self.decoder if self.merged else self.decoder_with_past
                if self.merged:
                    feeds["encoder_hidden_states"] = hidden
                    feeds["use_cache_branch"] = np.array([True])
                names = [o.name for o in session.get_outputs()]
                outs = dict(zip(names, session.run(names, feeds)))
            for name in self.past_names:
                present = outs.get(name.replace("past_key_values.", "present."))
                if present is not None and (source is None or ".encoder." not in name):
                    state[name] = present
            return outs["logits"][:, -1, :]

        return step

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

    def decode(self, ids: list[int]) -> str:
        """``tokenizer.decode(ids, skip_special_tokens=True)`` with the classic clean-up of spaces."""
        return clean_up_tokenization(self.tokenizer.decode(list(ids), skip_special_tokens=True))


def clean_up_tokenization(text: str) -> str:
    """The space clean-up ``transformers`` applied when decoding by default (before 4.45)."""
    for a, b in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                 (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(a, b)
    return text
