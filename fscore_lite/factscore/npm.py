"""NP, the nonparametric probability of a fact (SPEC FActScore §7).

Only facts the LM called supported are checked. The topic page's BM25 top-3 passages (BM25
Okapi over the page, query ``topic + " " + fact``) are encoded by a masked LM; the input
``"Fact: " + fact`` has each non-stopword token masked in turn. Per masked token, with q the
hidden state at the mask and h_j the passage token states, the probability is
Σ_{j: token_j = token} exp(q·h_j/√d) / Σ_j exp(q·h_j/√d) (0 if the token never occurs in the
passages); the fact's NP is the average over masked tokens and it stays supported iff
NP > 0.3. The reference model is ``facebook/npm-single``; no such weights exist offline, so
this runs with whatever ``mlm`` model the bundle holds (off by default).

Named deviation (``PASSAGE_TEXT``, recorded in the summary settings as ``npm_passages``): the
reference encodes each passage with the store's ``<s>``/``</s>`` sentence markers still in the
text, where RoBERTa's tokenizer reads them as its special tokens (their positions are then left
out of the sums); here the markers are removed before encoding, because an arbitrary exported
``mlm`` model has no such tokens. Passage selection (BM25 over marker-free text) is the same.
"""
from __future__ import annotations

import string

import numpy as np

from ..bm25 import BM25Okapi
from ..cache import CallCache
from ..errors import ModelNotInstalled

BM25_K = 3
PASSAGE_TEXT = ("<s>/</s> markers removed before encoding (deviation: the reference encodes them as "
                "RoBERTa special tokens and skips their positions)")
PREFIX = "Fact:"
# English function words (stands in for the reference's RoBERTa stop-token id list)
STOPWORDS = set("""a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had has have having
he her here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not
now of off on once only or other our ours ourselves out over own same she should so some such than that the their
theirs them themselves then there these they this those through to too under until up very was we were what when
where which while who whom why will with would you your yours yourself yourselves also s t""".split())


def _is_stop(token_text: str) -> bool:
    w = token_text.strip().lower()
    return not w or w in STOPWORDS or all(ch in string.punctuation for ch in w)


def np_probability(fact_ids: list[int], prefix_len: int, encoder, passages_ids: list[list[int]],
                   bos: list[int], eos: list[int]) -> float:
    """The SPEC §7 average over masked non-stopword tokens of the fact."""
    passage_states = encoder.hidden_states(passages_ids)
    tokens = np.concatenate([np.asarray(p, dtype=np.int64) for p in passages_ids]) if passages_ids else np.zeros(0, np.int64)
    vectors = np.concatenate(passage_states, 0) if passage_states else np.zeros((0, 1), np.float32)
    positions = [i for i in range(prefix_len, len(fact_ids)) if not _is_stop(encoder.token_text(fact_ids[i]))]
    if not positions or len(tokens) == 0:
        return 0.0
    masked = []
    for i in positions:
        ids = list(fact_ids)
        ids[i] = encoder.mask_id
        masked.append(bos + ids + eos)
    states = encoder.hidden_states(masked)
    d = vectors.shape[1]
    probs = []
    for i, st in zip(positions, states):
        q = st[len(bos) + i]
        logits = vectors @ q / np.sqrt(d)
        w = np.exp(logits - logits.max())
        same = tokens == fact_ids[i]
        probs.append(float(w[same].sum() / w.sum()) if same.any() else 0.0)
    return float(np.mean(probs))


class NPM:
    def __init__(self, encoder, store, cache: CallCache | None = None):
        self.encoder = encoder
        self.store = store
        self.cache = cache if cache is not None else CallCache(None)
        self.name, self.sha256 = encoder.name, encoder.sha256
        full = encoder.ids("x", special=True)
        bare = encoder.ids("x", special=False)
        start = full.index(bare[0]) if bare and bare[0] in full else 1
        self.bos, self.eos = full[:start], full[start + len(bare):]
        self._bm25: dict[str, tuple[BM25Okapi, list]] = {}

    def passages(self, topic: str, fact: str) -> list[str]:
        if topic not in self._bm25:
            ps = self.store.page_passages(topic)
            clean = [p.text.replace("<s>", "").replace("</s>", "") for p in ps]
            self._bm25[topic] = (BM25Okapi([c.split() for c in clean]), clean)
        bm, clean = self._bm25[topic]
        if not clean:
            return []
        scores = bm.get_scores((topic + " " + fact.strip()).split())
        return [clean[i].strip() for i in np.argsort(-scores, kind="stable")[:BM25_K]]

    def probability(self, topic: str, fact: str) -> float:
        passages = self.passages(topic, fact)
        payload = {"fact": fact, "passages": passages}

        def compute():
            prefix_len = len(self.encoder.ids(PREFIX, special=False))
            fact_ids = self.encoder.ids(PREFIX + " " + fact.strip(), special=False)
            pids = [self.encoder.ids(p, special=False)[:510] for p in passages]
            return np_probability(fact_ids, prefix_len, self.encoder, pids, self.bos, self.eos)

        return self.cache.cached(self.sha256, "npm", payload, compute)


def load_npm(settings, bundle, store, name: str | None = None, cache: CallCache | None = None) -> NPM:
    from ..backends.onnx_mlm import MaskedLMEncoder

    entry = bundle.get(name) if name else bundle.first_for_role("mlm")
    if entry is None:
        raise ModelNotInstalled(
            "--npm needs a masked-LM (role mlm) in the bundle; export one with "
            "`fscore-lite models export mlm CHECKPOINT_DIR -o BUNDLE` (the reference uses facebook/npm-single)"
        )
    path = bundle.verified_path(entry)
    encoder = MaskedLMEncoder(path, bundle.path(entry, "tokenizer"), entry.name, entry.sha256, settings.threads)
    return NPM(encoder, store, cache)
