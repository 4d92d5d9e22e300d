"""Extractive QA training examples made from Wikipedia text, the way Q² asks its questions.

For every window of one or two consecutive sentences of a page, Q²'s answer candidates (spaCy
entities, then noun chunks: :func:`fscore_lite.q2.spans.answer_candidates`) are taken as answers
and each gets the question Q²'s ``rules`` question generator writes for it
(:func:`fscore_lite.q2.rule_qg.rule_question`): a positive example (question, window, the span's
character offset). A question is also paired with another window of the same page that does not
contain its answer: a negative example, answered by the CLS token (SQuAD 2's "no answer"). A share
of questions lose a few words at random, so that the reader does not learn to need the context's
every word (the knowledge Q² answers on says things in its own words).

Deterministic: a function of the pages, the spaCy model and the seed. Pages are split by topic
into the training and the held-out set by the sha256 of the topic, never by position.
"""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

MAX_SENTENCES = 120  # per page: long pages would otherwise dominate
CANDIDATES_PER_WINDOW = 3
NEGATIVE_SHARE = 0.35  # questions also paired with a window without their answer
DROPOUT_SHARE = 0.5  # questions that lose words
WORD_DROPOUT = 0.12  # of those questions' words (never the question word)
HELD_OUT_EVERY = 10  # topics whose sha256 falls in 1 of 10 buckets are held out


@dataclass(frozen=True)
class QAExample:
    question: str
    context: str
    answer: str  # "" for no answer
    start: int  # character offset of the answer in the context; -1 for no answer
    topic: str


def held_out_topic(topic: str) -> bool:
    return int(hashlib.sha256(topic.encode("utf-8")).hexdigest(), 16) % HELD_OUT_EVERY == 0


def _windows(nlp, text: str) -> list:
    """Docs of one or two consecutive sentences (alternately) of ``text``, in order, at most MAX_SENTENCES."""
    sents = []
    for para in (p.strip() for p in text.split("\n")):
        if para and not para.startswith("="):  # a section heading
            sents.extend(s for s in nlp(para).sents if len(s) >= 4)
        if len(sents) >= MAX_SENTENCES:
            break
    sents = sents[:MAX_SENTENCES]
    out, i = [], 0
    while i < len(sents):
        two = i % 3 == 2 and i + 1 < len(sents) and sents[i].doc is sents[i + 1].doc
        span = sents[i].doc[sents[i].start:sents[i + 1].end] if two else sents[i]
        out.append(span.as_doc())
        i += 2 if two else 1
    return out


def _drop_words(question: str, rng: random.Random) -> str:
    words = question.rstrip("?").split()
    kept = [w for w in words if w.lower().strip(",") in ("who", "what", "when", "where", "how", "many", "much", "which")
            or rng.random() >= WORD_DROPOUT]
    return " ".join(kept) + "?" if kept else question


def page_examples(nlp, topic: str, text: str, seed: int) -> list[QAExample]:
    """Every example of one page (see the module docstring)."""
    from fscore_lite.q2.rule_qg import find_span, rule_question
    from fscore_lite.q2.spans import answer_candidates

    rng = random.Random(f"{seed}:{topic}")
    windows = _windows(nlp, text)
    out: list[QAExample] = []
    for w, doc in enumerate(windows):
        cands = answer_candidates(doc)
        rng.shuffle(cands)
        for cand in cands[:CANDIDATES_PER_WINDOW]:
            span = find_span(doc, cand)
            question = rule_question(doc, cand)
            if span is None or question is None:
                continue
            if rng.random() < DROPOUT_SHARE:
                question = _drop_words(question, rng)
            out.append(QAExample(question, doc.text, cand, span.start_char, topic))
            if len(windows) > 1 and rng.random() < NEGATIVE_SHARE:
                other = windows[rng.randrange(len(windows))]
                if other is not doc and cand.lower() not in other.text.lower():
                    out.append(QAExample(question, other.text, "", -1, topic))
    return out


def make_examples(pages: dict[str, str], nlp, seed: int = 0, log=print) -> tuple[list[QAExample], list[QAExample]]:
    """(training examples, held-out examples) of ``pages`` ({topic: text}), topics in sorted order."""
    train: list[QAExample] = []
    held: list[QAExample] = []
    for n, topic in enumerate(sorted(pages), 1):
        (held if held_out_topic(topic) else train).extend(page_examples(nlp, topic, pages[topic], seed))
        if n % 20 == 0:
            log(f"qa examples: {n}/{len(pages)} pages, {len(train)} training, {len(held)} held out")
    return train, held
