"""Page-level evidence features of an atomic fact (the trained verifier's lexical signal).

A fact about a person that would be on the person's page if it were true, and is not, is
probably not supported (the FActScore paper's "page-level contradiction"). Retrieved passages
alone miss that signal, so the trained verifier combines the cross-encoder's passage scores
with these features of the fact against the whole topic page:

==================  ==========================================================================
``cov_page``        share of the fact's content words that occur anywhere on the page
``cov_stem``        the same with words cut to their first 5 letters (born ~ birth, actor ~ acting)
``cov_best_sent``   best share of content words found in one sentence of the page
``cov_passages``    share found in the retrieved passages
``num_found``       share of the fact's numbers found on the page (1 when it has none)
``has_num``         1 when the fact contains a number
``cap_found``       share of capitalised words (names) found on the page (1 when none)
``n_missing``       content words not on the page (capped at 6)
``n_content``       content words in the fact (capped at 12)
==================  ==========================================================================

Words are Unicode word runs, lower-cased; the topic's own name words are not content words
(every fact names its subject). Everything here is deterministic pure Python.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..store import strip_markers
from ..stopwords import STOPWORDS

FEATURES = ("cov_page", "cov_stem", "cov_best_sent", "cov_passages", "num_found", "has_num", "cap_found",
            "n_missing", "n_content")

_WORD = re.compile(r"\w+", re.UNICODE)
_SENT = re.compile(r"(?<=[.!?])\s+|\n+")


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _stem(w: str) -> str:
    return w[:5]


@dataclass
class PageIndex:
    """What the features need of one page: its vocabulary, stems and sentence word sets."""

    vocab: frozenset
    stems: frozenset
    sentences: tuple[frozenset, ...]
    topic_words: frozenset

    @classmethod
    def build(cls, topic: str, page_text: str) -> "PageIndex":
        text = strip_markers(page_text)
        sents = tuple(frozenset(words(s)) for s in _SENT.split(text) if s.strip())
        vocab = frozenset(w for s in sents for w in s)
        return cls(vocab, frozenset(_stem(w) for w in vocab), sents, frozenset(words(topic)))


def _share(found: int, total: int) -> float:
    return found / total if total else 1.0


def fact_features(fact: str, page: PageIndex, passage_texts: list[str]) -> dict[str, float]:
    """The :data:`FEATURES` of one fact, as a dict in that order."""
    raw = _WORD.findall(fact)
    content = [w.lower() for w in raw if w.lower() not in STOPWORDS and w.lower() not in page.topic_words]
    uniq = list(dict.fromkeys(content))
    n = len(uniq)
    on_page = [w in page.vocab for w in uniq]
    best = max((sum(w in s for w in uniq) for s in page.sentences), default=0)
    pvocab = {w for t in passage_texts for w in words(strip_markers(t))}
    nums = [w.lower() for w in raw if any(c.isdigit() for c in w)]
    caps = [w.lower() for i, w in enumerate(raw) if w[:1].isupper() and w.lower() not in page.topic_words
            and w.lower() not in STOPWORDS]
    missing = n - sum(on_page)
    return {
        "cov_page": _share(sum(on_page), n),
        "cov_stem": _share(sum(_stem(w) in page.stems for w in uniq), n),
        "cov_best_sent": _share(best, n),
        "cov_passages": _share(sum(w in pvocab for w in uniq), n),
        "num_found": _share(sum(w in page.vocab for w in nums), len(nums)),
        "has_num": 1.0 if nums else 0.0,
        "cap_found": _share(sum(w in page.vocab for w in caps), len(caps)),
        "n_missing": float(min(missing, 6)),
        "n_content": float(min(n, 12)),
    }
