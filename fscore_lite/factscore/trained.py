"""The trained verifier (``--verifier trained``): cross-encoder passage scores + page features.

Per fact: the k retrieved passages (the same retrieval as the LLM judge) are each cut to the
window of sentences that best matches the fact, and the (window, fact) pairs are scored by the
cross-encoder in one batch; its entailment log-odds per passage, summarised, the fact's
page-level features (:mod:`.page_features`) and its relative position in the response go through
the combiner recorded in the model manifest (:mod:`.combiner`), whose logit the calibration of the
kind of facts verified (:mod:`.calibration`) maps to a probability. Output per fact: logit,
probability, per-passage scores, features.

The build step (``fscore-lite models train verifier``, :mod:`models.verifier`) computes its
training features with these same functions, on the same store and retrieval.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..errors import FscoreError
from ..store import strip_markers
from .calibration import Calibration
from .combiner import Combiner
from .page_features import STOPWORDS, PageIndex, fact_features, words
from .retrieve import Evidence

CE_FEATURES = ("ce_max", "ce_top", "ce_mean", "ce_contra")
# the fact's place in its response, 0 (first) … 1 (last): later facts are more often wrong (the
# FActScore paper's Figure 2)
POSITION_FEATURES = ("position",)
WINDOW_TOKENS = 64  # pair length fed to the cross-encoder (fact + evidence window + 3 specials)
CE_PASSAGES = 2  # retrieved passages (best first) the cross-encoder scores per fact

_SENT_MARKED = re.compile(r"<s>(.*?)</s>", re.S)
_SENT_PLAIN = re.compile(r"(?<=[.!?])\s+")


def passage_sentences(text: str) -> list[str]:
    """A stored passage's sentences: its ``<s>…</s>`` spans, else a punctuation split."""
    marked = [s.strip() for s in _SENT_MARKED.findall(text) if s.strip()]
    if marked:
        return marked
    return [s.strip() for s in _SENT_PLAIN.split(strip_markers(text)) if s.strip()]


def evidence_window(title: str, text: str, fact: str, count_tokens, budget: int) -> str:
    """``title. window``: the passage sentence sharing most content words with the fact (the
    earliest on ties), widened by the next, then the previous sentence, alternately, while
    the whole stays within ``budget`` tokens (the model cuts whatever still exceeds it)."""
    sents = passage_sentences(text)
    if not sents:
        return title
    want = {w for w in words(fact) if w not in STOPWORDS}
    overlap = [len(want & set(words(s))) for s in sents]
    best = max(range(len(sents)), key=lambda i: (overlap[i], -i))
    head = title + ". "
    used = count_tokens(head) + count_tokens(sents[best])
    lo, hi = best, best + 1
    grow_next = True
    while True:
        options = [hi] if hi < len(sents) else []
        options += [lo - 1] if lo > 0 else []
        if not options:
            break
        j = options[0] if grow_next or len(options) == 1 else options[-1]
        cost = count_tokens(sents[j])
        if used + cost > budget:
            break
        used += cost
        if j == hi:
            hi += 1
        else:
            lo -= 1
        grow_next = not grow_next
    return head + " ".join(sents[lo:hi])


def relative_positions(n: int) -> list[float]:
    """The ``position`` feature of each of a response's ``n`` facts: i / (n − 1), 0 for one fact."""
    return [i / (n - 1) if n > 1 else 0.0 for i in range(n)]


def page_text(store, topic: str) -> str:
    """The whole page as one text (for the page-level features)."""
    return "\n".join(strip_markers(p.text) for p in store.page_passages(topic))


def ce_features(logits: np.ndarray, labels: list[str]) -> tuple[dict[str, float], list[float]]:
    """Summaries of the passages' NLI logits (rows in rank order) and the per-passage
    entailment log-odds ``l_E − log(e^l_N + e^l_C)``."""
    e, n, c = (labels.index(x) for x in ("entailment", "neutral", "contradiction"))
    z = logits.astype(np.float64)
    entail = z[:, e] - np.logaddexp(z[:, n], z[:, c])
    contra = z[:, c] - np.logaddexp(z[:, n], z[:, e])
    feats = {"ce_max": float(entail.max()), "ce_top": float(entail[0]), "ce_mean": float(entail.mean()),
             "ce_contra": float(contra.max())}
    return feats, [float(x) for x in entail]


@dataclass(frozen=True)
class TrainedVerdict:
    is_supported: bool  # probability > 0.5: the decision under the calibration's prior
    probability: float  # calibrated, under the calibration's prior (the run share moves it: .calibration)
    passage_scores: list[float]  # entailment log-odds per retrieved passage, in rank order
    features: dict[str, float]


class PairBuilder:
    """The (evidence window, fact) pairs the cross-encoder scores for one fact: the best
    ``passages`` retrieved passages in rank order, each cut to a window (:func:`evidence_window`)
    so that window + fact + 3 special tokens fit ``window_tokens``."""

    def __init__(self, count_tokens, window_tokens: int = WINDOW_TOKENS, passages: int = CE_PASSAGES):
        self._count_fn = count_tokens
        self.window_tokens = int(window_tokens)
        self.passages = int(passages)
        self._tokens: dict[str, int] = {}

    def count(self, text: str) -> int:
        n = self._tokens.get(text)
        if n is None:
            n = self._count_fn(text)
            if len(self._tokens) > 50_000:
                self._tokens.clear()
            self._tokens[text] = n
        return n

    def pairs(self, fact: str, evidence: list[Evidence]) -> list[tuple[str, str]]:
        budget = self.window_tokens - 3 - self.count(fact)
        best = sorted(evidence, key=lambda e: e.rank)[: self.passages]
        return [(evidence_window(e.passage.title, e.passage.text, fact, self.count, budget), fact) for e in best]


class TrainedVerifier:
    """Applies a trained verifier bundle entry (cross-encoder + combiner) to facts."""

    def __init__(self, model, combiner: Combiner | None, store, window_tokens: int = WINDOW_TOKENS,
                 passages: int = CE_PASSAGES, name: str = "", sha256: str = "",
                 calibrations: dict[str, Calibration] | None = None):
        from ..backends.onnx_nli import label_names

        self.model = model
        self.combiner = combiner
        self.store = store
        self.builder = PairBuilder(model.count_tokens, window_tokens, passages)
        self.labels = label_names(model.config, model.n_labels or 3)
        self.name = name or model.name
        self.sha256 = sha256 or model.sha256
        self.calibrations = dict(calibrations or {})  # kind of facts → its calibration
        self._pages: dict[str, PageIndex] = {}

    @classmethod
    def from_bundle(cls, bundle, store, *, name: str | None = None, threads: int = 1, cache=None,
                    precision: str = "int8") -> "TrainedVerifier":
        from ..backends.onnx_base import bundle_files
        from ..backends.cross_encoder import CrossEncoder

        entry = bundle.get(name) if name else bundle.first_for_role("verifier")
        if entry is None:
            raise FscoreError(
                f"no trained verifier in {bundle.manifest_path}: build one with `fscore-lite models train verifier` "
                "or use --verifier llm")
        if "combiner" not in entry.extra:
            raise FscoreError(f"model '{entry.name}' in {bundle.manifest_path} has no combiner: rebuild it with "
                              "`fscore-lite models train verifier`")
        from ..migrations import upgrade_verifier

        extra = upgrade_verifier(entry, bundle.manifest_path)
        files = bundle_files(bundle, entry, precision)
        window = int(extra["window_tokens"])
        model = CrossEncoder(files["weights"], files["tokenizer"], files.get("config"), name=entry.name,
                             sha256=files["sha256"], threads=threads, cache=cache, max_length=window)
        calibrations = {c["facts"]: Calibration.from_json(c) for c in extra["calibrations"]}
        return cls(model, Combiner.from_json(extra["combiner"]), store, window, int(extra["ce_passages"]),
                   entry.name, files["sha256"], calibrations)

    def page(self, topic: str) -> PageIndex:
        if topic not in self._pages:
            if len(self._pages) > 64:
                self._pages.clear()
            self._pages[topic] = PageIndex.build(topic, page_text(self.store, topic) if self.store.has_page(topic) else "")
        return self._pages[topic]

    def features(self, topic: str, fact: str, evidence: list[Evidence],
                 position: float = 0.0) -> tuple[dict[str, float], list[float]]:
        """All combiner inputs of one fact and its passage scores (the best `passages` in rank order);
        ``position``: the fact's :func:`relative_positions` value in its response.

        A topic without a page (``--search-all``) has no page-level evidence: its page features are 0."""
        feats = fact_features(fact, self.page(topic), [e.passage.text for e in evidence])
        feats["position"] = float(position)
        if not evidence:
            ce = {"ce_max": -10.0, "ce_top": -10.0, "ce_mean": -10.0, "ce_contra": 0.0}
            return {**ce, **feats}, []
        pairs = self.builder.pairs(fact, evidence)
        logits = self.model.cached("verifier_pairs", {"pairs": pairs, "max_length": self.builder.window_tokens},
                                   lambda: self.model.logits_batch(pairs).tolist())
        ce, scores = ce_features(np.asarray(logits, dtype=np.float32), self.labels)
        return {**ce, **feats}, scores

    def verify(self, topic: str, facts: list[str], evidence: list[list[Evidence]],
               calibration: Calibration) -> list[TrainedVerdict]:
        """Verdicts of the recorded combiner, its logits mapped by ``calibration``."""
        assert self.combiner is not None
        out = []
        for fact, ev, pos in zip(facts, evidence, relative_positions(len(facts))):
            feats, scores = self.features(topic, fact, ev, pos)
            p = float(calibration.probability(self.combiner.logit(self.combiner.matrix([feats])))[0])
            out.append(TrainedVerdict(p > 0.5, p, scores, {k: round(v, 5) for k, v in feats.items()}))
        return out
