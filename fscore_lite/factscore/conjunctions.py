"""Splitting a fact at "and": the ``conjunctions`` filter of the default decomposer.

People split "She earned a degree in drama and speech" into one fact per conjunct; the local LLM
often leaves it whole (docs/E2E.md, the proxy). This rule reads the fact's dependency parse
(spaCy, the pipeline the reference's date clean-up already loads) and splits one coordination
joined by "and":

* **clauses** ("He won the race and retired."): the root's conjunct verb becomes its own fact,
  with the root's subject (and auxiliaries, when the conjunct has none) copied in front;
* **phrases** ("… a degree in drama and speech", "… education, health, and the arts for
  children"): one fact per conjunct, the rest of the fact around it kept; modifiers after the
  last conjunct that no earlier conjunct has (", for children") are shared by all.

It leaves whole what splitting would break: coordinations in the subject, inside a named entity
or quotation ("the Rock and Roll Hall of Fame", "“Tasks and Masks”"), parts of a name ("NumPy and
SciPy developers" as compounds), "between … and …", and any list joined by another word ("or",
"but"). A fact is split at most twice (four facts at most). Pure: a fact's split depends on its
text and the spaCy model only.
"""
from __future__ import annotations

SUBJECTS = {"nsubj", "nsubjpass", "csubj", "csubjpass", "expl"}
MAX_PARTS = 4
_QUOTES = "\"“”«»"
_CLASSES = ({"NOUN", "PROPN", "PRON", "NUM"}, {"ADJ"}, {"VERB", "AUX"}, {"ADV"})  # conjuncts of one class only
_SHARED_LEFT = ("det", "poss", "predet", "aux", "auxpass")  # the first conjunct's, lent to the others
_FINITE = ("VBD", "VBZ", "VBP", "MD")  # a conjunct with a finite auxiliary of its own needs none copied


def _conjuncts(head) -> list:
    """``head`` and its conjuncts, in text order (lists are chains or fans of ``conj``)."""
    out, todo = [], [head]
    while todo:
        t = todo.pop()
        out.append(t)
        todo += [c for c in t.children if c.dep_ == "conj"]
    return sorted(out, key=lambda t: t.i)


def _joiners(group) -> list:
    return [c for t in group for c in t.children if c.dep_ in ("cc", "preconj")]


def _in_subject(tok) -> bool:
    t = tok
    while t.head.i != t.i:
        if t.dep_ in SUBJECTS:
            return True
        t = t.head
    return t.dep_ in SUBJECTS


def _quoted(doc, i: int) -> bool:
    return sum(ch in _QUOTES for ch in doc[:i].text) % 2 == 1


def _blocked(doc, group, joiners) -> bool:
    if not joiners or any(j.lower_ not in ("and", "both") for j in joiners):
        return True
    first = group[0]
    if not _same_class(group) or _in_subject(first) or _quoted(doc, first.i):
        return True
    if any(e.start <= j.i < e.end for e in doc.ents for j in joiners if j.dep_ == "cc"):
        return True
    if first.dep_ in ("compound", "nmod"):  # "a journalist and media executive", "track and field athlete"
        return True
    if first.pos_ == "PROPN" and first.dep_ == "pobj" and first.head.head.pos_ == "PROPN":
        return True  # a title: "Minister for Environment and Forests", "Director of News and Current Affairs"
    if first.pos_ in ("VERB", "AUX") and first.dep_ != "ROOT" and len({t.tag_ for t in group}) > 1:
        return True  # "by contesting … and won": not one verb form
    if any(a.lower_ == "between" for a in first.ancestors):
        return True
    return _modifier_ambiguous(group)


def _modifier_ambiguous(group) -> bool:
    """"the NumPy and SciPy core teams", "a television, radio and online platform": bare earlier
    conjuncts before a common noun with modifiers of its own read as modifiers of that noun, which
    the small parser often gets wrong; left whole."""
    last = group[-1]
    if last.pos_ != "NOUN" or not any(c.i < last.i and c.dep_ in ("compound", "amod") for c in last.children):
        return False
    return all(all(c.dep_ in ("det", "punct", "cc", "conj") for c in t.children) for t in group[:-1])


def _text(tokens, swap: dict | None = None) -> str:
    """Tokens (in text order, possibly with gaps) as text: the original spacing where adjacent, a
    space across a gap unless the next token is punctuation that leans left."""
    out, prev = "", None
    for t in tokens:
        if prev is not None:
            if prev.i + 1 == t.i:
                out += prev.whitespace_
            elif not (t.is_punct and t.text in ".,;:!?)”'"):
                out += " "
        out += (swap or {}).get(t.i, t.text)
        prev = t
    return out.strip()


def finish_fact(text: str, end: str) -> str:
    text = text.strip().rstrip(",;:")
    return text[:1].upper() + text[1:] + ("" if text.endswith(end) else end) if text else ""


def _same_class(group) -> bool:
    return any(all(t.pos_ in c for t in group) for c in _CLASSES)


def _right_bare(group) -> bool:
    """No conjunct but the last has words of its own to its right (before the last conjunct)."""
    last = group[-1]
    return not any(c.i > t.i and c.i < last.i and c.dep_ not in ("conj", "cc", "preconj", "punct")
                   for t in group[:-1] for c in t.children)


def _tail(group) -> list:
    """Words right of the last conjunct that every conjunct shares (when the others are bare)."""
    last = group[-1]
    return [x for t in group for c in t.children if c.i > last.i and c.dep_ not in ("conj", "cc", "punct")
            for x in c.subtree]


def _split_clauses(doc, root, conj) -> list[list] | None:
    """"S V1 … and V2 …" → [S V1 …, S [aux] V2 …]; None when the conjunct cannot stand alone."""
    glue = {c.i for c in root.children if c.dep_ in ("cc", "punct") and root.i < c.i < conj.i}
    if any(c.dep_ in SUBJECTS for c in conj.children):  # "…, and she lost …": the joining words go
        return [[t for t in doc if t.i not in {x.i for x in conj.subtree} and t.i not in glue], list(conj.subtree)]
    subj = [x for c in root.children if c.dep_ in SUBJECTS for x in c.subtree]
    if not subj:
        return None
    shared = _tail([root, conj]) if _right_bare([root, conj]) else []
    own = {x.i for x in conj.subtree} - {x.i for x in shared}
    first = [t for t in doc if t.i not in own and t.i not in glue]
    aux = [c for c in root.children if c.dep_ in ("aux", "auxpass", "neg") and c.i < root.i]
    if conj.pos_ != "VERB" or any(c.dep_ in ("aux", "auxpass") and c.tag_ in _FINITE for c in conj.children):
        aux = []
    second = subj + aux + [doc[i] for i in sorted(own)] + shared
    return [first, second]


def _split_phrase(doc, group, joiners) -> list[list]:
    """One fact per conjunct, the words around the coordination kept."""
    glue = {j.i for j in joiners} | {c.i for t in group for c in t.children if c.dep_ == "punct"}
    start = min([t.left_edge.i for t in group] + [j.i for j in joiners])
    stop = max(t.right_edge.i for t in group) + 1
    tail = _tail(group) if _right_bare(group) else []
    tail_i = {x.i for x in tail}
    # "his knowledge and insights": the first conjunct's article or possessive, for those without one
    left = [x for c in group[0].children if c.dep_ in _SHARED_LEFT and c.i < group[0].i
            and (c.dep_ != "poss" or c.pos_ == "PRON") for x in c.subtree]
    parts = []
    for k, t in enumerate(group):
        later = {x.i for g in group[k + 1:] for x in g.subtree}
        core = [x for x in t.subtree if x.i not in later and x.i not in glue and x.i not in tail_i]
        if k and t.pos_ != "PROPN" and not any(c.dep_ in _SHARED_LEFT for c in t.children):
            core = left + core
        parts.append(list(doc[:start]) + core + tail + [x for x in doc[stop:]])
    return parts


def _an(word: str) -> bool:
    w = word.lower()
    if w.startswith(("uni", "use", "usu", "eu", "one", "once")):
        return False
    return w[:1] in "aeiou" or w.startswith(("hour", "honest", "honor", "honour"))


def words_text(words: list) -> str:
    """A part's words as text; an article whose next word changed agrees with its new one."""
    words = sorted({w.i: w for w in words}.values(), key=lambda w: w.i)
    swap = {}
    for w, nxt in zip(words, words[1:]):
        if w.lower_ in ("a", "an") and w.dep_ == "det" and nxt.i != w.i + 1:
            new = "an" if _an(nxt.text) else "a"
            swap[w.i] = new.capitalize() if w.text[0].isupper() else new
    return _text(words, swap)


def split_once(fact: str, nlp) -> list[str]:
    """``fact`` split at its first splittable "and" coordination, or ``[fact]``."""
    doc = nlp(fact)
    for tok in doc:
        if tok.dep_ == "conj" or not any(c.dep_ == "conj" for c in tok.children):
            continue
        group = _conjuncts(tok)
        joiners = _joiners(group)
        if _blocked(doc, group, joiners):
            continue
        if tok.dep_ == "ROOT" and tok.pos_ in ("VERB", "AUX") and group[-1].pos_ in ("VERB", "AUX"):
            if len(group) != 2:
                continue
            parts = _split_clauses(doc, tok, group[1])
        else:
            parts = _split_phrase(doc, group, joiners)
        end = fact.rstrip()[-1:] if fact.rstrip()[-1:] in ".!?" else ""
        parts = [finish_fact(words_text(p), end) for p in (parts or [])]
        if len(parts) >= 2 and all(len(p.split()) >= 2 for p in parts) and fact not in parts:
            return parts
    return [fact]


def split_conjunctions(facts: list[str], nlp) -> list[str]:
    """Each fact with "and" split (at most twice, :data:`MAX_PARTS` facts), in order."""
    out = []
    for fact in facts:
        if " and " not in fact:
            out.append(fact)
            continue
        parts = split_once(fact, nlp)
        if len(parts) > 1:
            again = [q for p in parts for q in (split_once(p, nlp) if " and " in p else [p])]
            parts = again if len(again) <= MAX_PARTS else parts
        out += parts
    return out
