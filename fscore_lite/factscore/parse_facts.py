"""The ``parse`` decomposer's rules: atomic facts read off spaCy's dependency parse, no LLM.

A sentence becomes one fact per clause, and each clause is split further where people split it:

* **clauses**: the main clause, each coordinated verb ("… won the race and retired"), each
  relative clause ("… an actor who starred in Heat" → "<subject> starred in Heat") and each
  participle after a noun ("… the film directed by Mann" → "The film was directed by Mann"),
  with its subject filled in: the clause's own, else the one it shares (a coordinated verb takes
  its head's; a relative pronoun or a participle takes the noun it modifies, or, when that noun
  is the complement of a copula or an apposition, the subject it describes);
* **adverbial clauses** ("… when she was cast as X", "After appearing in …, she …") are taken
  out of their main clause, and are a fact of their own when they have a subject of their own;
* **appositions and birth parentheticals**: "Ann Lee, a British chemist, …" → "Ann Lee is a
  British chemist"; "Ann Lee (born 4 May 1950) …" → "Ann Lee was born 4 May 1950";
* **adjuncts**: a clause with two or more prepositional or temporal adjuncts on its verb ("He was
  born in Leeds in 1950") gives one fact per adjunct, each with the clause's core;
* **coordinations**: the ``conjunctions`` rule of the default decomposer's filters
  (:mod:`.conjunctions`) on every fact.

Words are never invented except the copula of an apposition ("is") or a participle ("was"), and
a determiner that agrees with its new noun. A clause that yields nothing usable leaves the whole
sentence as its one fact. Pure: a sentence's facts depend on its text and the spaCy model only.
"""
from __future__ import annotations

import re

from .conjunctions import SUBJECTS, finish_fact, split_conjunctions, words_text

RULES = "parse-v1: clauses, relative clauses, participles, appositions, birth parentheticals, adjuncts, conjunctions"
ADJUNCTS = {"prep", "npadvmod", "agent"}
_RELATIVE = {"WDT", "WP", "WP$"}
_CLAUSE_CONJ_POS = {"VERB", "AUX"}
_MIN_WORDS = 3
_SPACES = re.compile(r"\s+")


def _paren_span(doc) -> set[int]:
    """Indices of the tokens inside parentheses (the brackets included)."""
    inside, depth = set(), 0
    for t in doc:
        if t.text == "(":
            depth += 1
        if depth:
            inside.add(t.i)
        if t.text == ")" and depth:
            depth -= 1
    return inside


def _is_clause(tok) -> bool:
    """A token that heads a clause of its own fact."""
    if tok.dep_ == "ROOT":
        return True
    if tok.dep_ == "relcl":
        return True
    if tok.dep_ == "advcl" and tok.pos_ in _CLAUSE_CONJ_POS:  # its own fact when it has a subject of its own
        return True
    if tok.dep_ == "acl" and tok.tag_ == "VBN":
        return True
    if tok.dep_ == "conj" and _is_clause(tok.head) and tok.head.pos_ in _CLAUSE_CONJ_POS and (
            tok.pos_ in _CLAUSE_CONJ_POS or tok.left_edge.pos_ == "VERB"):  # "… and studied law" parsed as a noun
        return True
    return False


class _Sentence:
    def __init__(self, doc):
        self.doc = doc
        self.parens = _paren_span(doc)

    def phrase(self, head) -> list:
        """A noun phrase without its appositions, clauses, parentheticals and edge punctuation."""
        drop: set[int] = set()
        for t in head.subtree:
            if t.i != head.i and (_separate_appos(t) or t.dep_ in ("relcl", "acl") or _is_clause(t)):
                drop |= {x.i for x in t.subtree}
        if head.i not in self.parens:
            drop |= self.parens
        return _trim([t for t in head.subtree if t.i not in drop])

    def described(self, noun):
        """The noun a modifier of ``noun`` is really about: the subject when ``noun`` is a copula's
        complement ("X is an actor who …") or the head of an apposition ("X, an actor who …")."""
        seen = 0
        while seen < 4:
            seen += 1
            if noun.dep_ in ("attr", "oprd") and noun.head.pos_ in ("AUX", "VERB"):
                subj = self.subject_token(noun.head)
                if subj is None:
                    return noun
                noun = subj
                continue
            if noun.dep_ == "appos":
                noun = noun.head
                continue
            return noun
        return noun

    def subject_token(self, clause):
        """The token heading the subject of ``clause``, or None."""
        own = [c for c in clause.children if c.dep_ in SUBJECTS]
        if own:
            subj = own[0]
            if subj.tag_ in _RELATIVE and clause.dep_ == "relcl":
                return self.described(clause.head)
            return subj
        if clause.dep_ == "conj" and clause.head.i != clause.i:
            return self.subject_token(clause.head)
        if clause.dep_ in ("relcl", "acl"):
            return self.described(clause.head)
        return None

    def clause_words(self, clause) -> tuple[list, list, list]:
        """(subject words, the clause's own words before adjuncts, its adjunct groups)."""
        subj_tok = self.subject_token(clause)
        own_subj = [c for c in clause.children if c.dep_ in SUBJECTS]
        drop: set[int] = set()
        for c in clause.children:
            if c.dep_ in SUBJECTS:
                drop |= {x.i for x in c.subtree}
            elif c.i != clause.i and (_is_clause(c) or _separate_appos(c)):
                drop |= {x.i for x in c.subtree}
            elif c.dep_ == "cc" and any(_is_clause(x) for x in clause.children if x.dep_ == "conj"):
                drop.add(c.i)
        for t in clause.subtree:  # clauses and appositions deeper in: their own facts
            if t.i != clause.i and t.i not in drop and (_is_clause(t) or _separate_appos(t)):
                drop |= {x.i for x in t.subtree}
        # the relative pronoun of a relative clause that is not its subject ("the film which he made")
        for t in clause.subtree:
            if t.tag_ in _RELATIVE and t.i not in drop:
                drop.add(t.i)
        if clause.i not in self.parens:  # parentheticals are left out of the clause
            drop |= self.parens
        body = [t for t in clause.subtree if t.i not in drop]
        adjunct_heads = [c for c in clause.children if c.dep_ in ADJUNCTS and c.i > clause.i and c.i not in drop]
        groups = [[t for t in a.subtree if t.i not in drop] for a in adjunct_heads] if len(adjunct_heads) >= 2 else []
        grouped = {t.i for g in groups for t in g}
        core = [t for t in body if t.i not in grouped]
        if own_subj and own_subj[0].tag_ not in _RELATIVE:  # the clause's own subject, in its place
            return [], sorted(core + self.phrase(own_subj[0]), key=lambda t: t.i), groups
        return (self.phrase(subj_tok) if subj_tok is not None else []), core, groups

    def clause_facts(self, clause) -> list[str]:
        subject, core, groups = self.clause_words(clause)
        if not subject and not any(t.dep_ in SUBJECTS for t in core) and clause.dep_ != "ROOT":
            return []
        glue = []
        if clause.dep_ == "acl":  # "the film directed by X" → "the film was directed by X"
            glue = ["was"]
        facts = []
        for adjunct in (groups or [[]]):
            words = _trim(sorted({t.i: t for t in core + adjunct}.values(), key=lambda t: t.i))
            while words and (words[-1].dep_ == "cc"):
                words = _trim(words[:-1])
            while words and (words[0].dep_ in ("cc", "mark") or words[0].tag_ in _RELATIVE):
                words = _trim(words[1:])
            text = _join(words_text(subject), " ".join(glue), words_text(words))
            facts.append(text)
        return facts

    def apposition_facts(self) -> list[str]:
        out = []
        for t in self.doc:
            if _separate_appos(t) and t.head.pos_ in ("PROPN", "NOUN", "PRON"):
                out.append(_join(words_text(self.phrase(t.head)), "is", words_text(self.phrase(t))))
        # "(born 4 May 1950)" after a name
        for t in self.doc:
            if t.lower_ == "born" and t.i in self.parens:
                close = next((x.i for x in self.doc[t.i:] if x.text == ")"), len(self.doc))
                head = self._paren_owner(t)
                if head is None:
                    continue
                tail = [x for x in self.doc[t.i + 1:close] if not (x.is_punct and x.text in ";")]
                out.append(_join(words_text(self.phrase(head)), "was born", words_text(tail)))
        return out

    def _paren_owner(self, tok):
        """The noun a parenthetical containing ``tok`` follows."""
        i = tok.i
        while i >= 0 and self.doc[i].text != "(":
            i -= 1
        j = i - 1
        while j >= 0 and self.doc[j].is_punct:
            j -= 1
        if j < 0:
            return None
        t = self.doc[j]
        while t.dep_ in ("compound", "flat") and t.head.i != t.i:
            t = t.head
        return t if t.pos_ in ("PROPN", "NOUN", "PRON") else None


_CLOSERS = {")": "(", "”": "“", '"': '"', "'": "'", "’": "‘"}


def _trim(words: list) -> list:
    """Punctuation off both ends, except a closing quote or bracket whose opening one is kept."""
    words = list(words)
    while words and words[0].is_punct and words[0].text not in ("“", '"', "(", "‘"):
        words.pop(0)
    while words and words[-1].is_punct:
        last = words[-1].text
        opener = _CLOSERS.get(last)
        if opener is not None and sum(w.text == opener for w in words[:-1]) % 2 == 1 if opener == last else \
                opener is not None and any(w.text == opener for w in words[:-1]):
            break
        words.pop()
    return words


def _separate_appos(tok) -> bool:
    """An apposition set off by a comma, dash or bracket ("Ann Lee, a chemist,"): a fact of its own.
    One right after its noun ("the film The Matrix") is part of the name."""
    if tok.dep_ != "appos" or tok.pos_ == "NUM" or tok.ent_type_ in ("DATE", "CARDINAL"):
        return False
    if tok.head.tag_ in ("NNS", "NNPS"):  # "two albums, A and B": a list, not a description
        return False
    before = tok.doc[tok.left_edge.i - 1] if tok.left_edge.i > 0 else None
    return before is not None and before.text in (",", "-", "–", "—", ";", ":")


def _join(*parts: str) -> str:
    return _SPACES.sub(" ", " ".join(p for p in parts if p)).strip()


def _usable(fact: str) -> bool:
    return len(fact.split()) >= _MIN_WORDS


def sentence_facts(sentence: str, nlp) -> list[str]:
    """The atomic facts of one sentence (see the module docstring)."""
    doc = nlp(sentence)
    s = _Sentence(doc)
    raw: list[str] = []
    for tok in doc:
        if _is_clause(tok) and tok.i not in s.parens:
            raw += s.clause_facts(tok)
    raw += s.apposition_facts()
    facts = [finish_fact(f, ".") for f in raw if _usable(f)]
    if not facts:
        whole = _join(sentence)
        return [finish_fact(whole, "" if whole[-1:] in ".!?" else ".")] if whole else []
    out: list[str] = []
    for f in split_conjunctions(facts, nlp):
        if f not in out:
            out.append(f)
    return out
