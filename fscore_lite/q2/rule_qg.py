"""Question generation conditioned on the answer span, by rule (Q²'s QG role, backend ``rules``).

The reference's T5 reads ``answer: SPAN  context: TEXT`` and writes a question whose answer is
that span. No such model installs here; this backend writes the question a reader can answer with
exactly that span by turning its sentence into a *wh-question in place*: the span is replaced by
the question word its kind calls for, the rest of the sentence is kept word for word.

    "She was born in Warsaw in 1867."   span "Warsaw"  ->  "She was born where in 1867?"
    "Marie Curie won the Nobel Prize."  span "Marie Curie"  ->  "Who won the Nobel Prize?"

The question word comes from the span's entity label (PERSON: who; DATE, TIME: when; GPE, LOC,
FAC after a place preposition: where, the preposition dropped; numbers: how many / how much;
ORDINAL: which; else what), and for a noun chunk from its head (a personal pronoun or a PERSON
token: who). A span at the start of its sentence makes a question that starts with the question
word. Deterministic: a function of the span, the text and the spaCy model.

The question is written from the span's own clause, not its whole sentence: the nearest clause above
the span (a main, conjoined, complement or adverbial clause with a subject of its own; a relative clause
or one opened by a wh-word is passed over) without the clauses conjoined to it and without a leading
"that", conjunction or punctuation. "I'm not sure, but I do know that it originated in Michigan." with
span "Michigan" gives "it originated where?", a question whose subject is no longer I or you (the
personal-question filter drops those) and that is answered from the same words the reader sees.

The extractive reader that ``models train qa`` trains learns from questions made by this same
rule on Wikipedia text (``fscore_lite_models/qa``), as the paper's QG and QA both came from SQuAD.
"""
from __future__ import annotations

from dataclasses import dataclass

PLACE = frozenset({"GPE", "LOC", "FAC"})
TIME = frozenset({"DATE", "TIME"})
AMOUNT = frozenset({"MONEY", "QUANTITY", "PERCENT"})
PLACE_PREPOSITIONS = frozenset({"in", "at", "on", "near", "from"})
TIME_PREPOSITIONS = frozenset({"in", "on", "at", "during", "since"})
PERSONAL_PRONOUNS = frozenset({"i", "you", "he", "she", "we", "they", "me", "him", "her", "us", "them"})
SUBJECTS = frozenset({"nsubj", "nsubjpass", "csubj", "csubjpass", "expl"})
CLAUSE_DEPS = frozenset({"ROOT", "conj", "ccomp", "advcl", "parataxis"})
SPLIT_DEPS = frozenset({"conj", "parataxis"})  # clauses beside the span's clause, left out of it
WH_WORDS = frozenset({"who", "whom", "whose", "which", "what", "when", "where", "why", "how", "whether", "if"})
LEADING = frozenset({"cc", "mark", "punct"})
RULE = ("wh-question in place within the span's clause: the span replaced by who/what/when/where/how many/how "
        "much/which (by its entity label or head), a place or time preposition before it dropped; the clause is "
        "the nearest one above the span with its own subject and no wh-word or relative pronoun, its conjoined "
        "clauses and a leading that/conjunction/punctuation left out")


def find_span(doc, answer: str):
    """The first token span of ``doc`` whose text is ``answer`` (None when it is not one)."""
    text = doc.text
    start = 0
    while True:
        i = text.find(answer, start)
        if i < 0:
            return None
        span = doc.char_span(i, i + len(answer))
        if span is not None and len(span):
            return span
        start = i + 1


def _label(span) -> str:
    """The entity label of ``span``: of an entity exactly it, else of the entity at its head."""
    for ent in span.doc.ents:
        if ent.start == span.start and ent.end == span.end:
            return ent.label_
    return span.root.ent_type_ or ""


def question_word(span) -> tuple[str, bool]:
    """(wh-word, drop the preposition before the span) for an answer ``span``."""
    label = _label(span)
    prev = span.doc[span.start - 1].lower_ if span.start > 0 else ""
    if label == "PERSON" or span.root.lower_ in PERSONAL_PRONOUNS:
        return "who", False
    if label in TIME:
        return "when", prev in TIME_PREPOSITIONS
    if label in PLACE and prev in PLACE_PREPOSITIONS:
        return "where", True
    if label == "CARDINAL":
        return ("how many", False) if span.end < len(span.doc) and span.doc[span.end].pos_ == "NOUN" else ("what", False)
    if label in AMOUNT:
        return "how much", False
    if label == "ORDINAL":
        return "which", False
    return "what", False


def _own_clause_head(tok) -> bool:
    """Does ``tok`` head a clause a question can be written from (a verb with its own subject, not
    opened by a wh-word or relative pronoun, not a relative clause)?"""
    if tok.pos_ not in ("VERB", "AUX") or tok.dep_ not in CLAUSE_DEPS:
        return False
    kids = list(tok.children)
    subjects = [k for k in kids if k.dep_ in SUBJECTS]
    if not subjects or any(k.lower_ in WH_WORDS or k.tag_ in ("WDT", "WP", "WP$") for k in subjects):
        return False
    return not any(k.i < tok.i and (k.lower_ in WH_WORDS or k.tag_ in ("WRB", "WDT", "WP"))
                   and k.dep_ in ("mark", "advmod") for k in kids)


def clause_bounds(span) -> tuple[int, int]:
    """[start, end) token bounds of the clause ``span`` is asked about (see the module's docstring);
    the span's sentence when no clause above it qualifies."""
    sent = span.sent
    head = span.root
    while not _own_clause_head(head) and head.head.i != head.i and sent.start <= head.head.i < sent.end:
        head = head.head
    if not _own_clause_head(head):
        return sent.start, sent.end
    inside = {t.i for t in head.subtree}
    for kid in head.children:  # the span is in none of them: ``head`` is the nearest clause head above it
        if kid.dep_ in SPLIT_DEPS and _own_clause_head(kid):
            inside -= {t.i for t in kid.subtree}
    start, end = span.start, span.end  # the contiguous run of kept tokens around the span
    while start - 1 in inside:
        start -= 1
    while end in inside:
        end += 1
    while start < span.start and span.doc[start].dep_ in LEADING:
        start += 1
    while end > span.end and span.doc[end - 1].dep_ in ("cc", "punct"):
        end -= 1
    return max(start, sent.start), min(end, sent.end)


def rule_question(doc, answer: str) -> str | None:
    """The question whose answer is ``answer`` in ``doc`` (a spaCy Doc of the context); None when
    the answer is not a span of the text."""
    span = find_span(doc, answer)
    if span is None:
        return None
    first, last = clause_bounds(span)
    word, drop_prep = question_word(span)
    start = span.start - 1 if drop_prep else span.start
    before = doc[first:start].text_with_ws if start > first else ""
    after = doc[span.end:last].text
    # the clause's final punctuation becomes the question mark
    after = after.rstrip().rstrip(".!?;:").rstrip()
    if not before:
        word = word[0].upper() + word[1:]
    elif not before.endswith(" "):
        before += " "
    gap = " " if after and after[0] not in ",;:)'" else ""
    return f"{before}{word}{gap}{after}".strip() + "?"


@dataclass
class RuleQuestionGenerator:
    """QG backend ``rules``: one question per answer candidate (:func:`rule_question`)."""

    backend = "rules"

    def __post_init__(self):
        from ..factscore.decomposers import spacy_fingerprint
        from .spans import load_nlp

        self.nlp = load_nlp()
        self.name, self.sha256 = spacy_fingerprint()

    def questions(self, answer: str, context: str) -> list[str]:
        q = rule_question(self.nlp(context), answer)
        return [q] if q else []

    def questions_many(self, answers: list[str], context: str) -> list[list[str]]:
        doc = self.nlp(context)
        return [[q] if (q := rule_question(doc, a)) else [] for a in answers]

    def describe(self) -> dict:
        return {"backend": self.backend, "name": self.name, "sha256": self.sha256, "decoding": RULE}
