"""Sentence splitting with the reference's repair rules (SPEC FActScore §2).

The reference splits each paragraph with NLTK's pretrained English Punkt model. That model is
a download, unavailable offline, so we run NLTK's Punkt algorithm with a fixed list of common
English abbreviations instead (named deviation; ``SPLITTER`` records it). The repair rules —
re-merging splits inside initials, merging one-word and lower-case-initial sentences into the
previous one — are the reference's, unchanged.
"""
from __future__ import annotations

import re
from functools import lru_cache

SPLITTER = "nltk-punkt-untrained+abbreviations+sentence-starters+ascii-quotes"

ABBREVIATIONS = (
    "mr mrs ms dr prof sr jr st mt ft gen col lt sgt capt cmdr adm gov sen rep rev hon pres "
    "vs etc al e.g i.e u.s u.k u.n a.m p.m nos vol pp ed eds inc ltd co corp bros dept univ pvt "
    "jan feb mar apr jun jul aug sep sept oct nov dec approx est ca"
).split() + list("abcdefghijklmnopqrstuvwy")
# Single letters are abbreviations (initials, "c. 1961", "Ramesses V. He") as in the pretrained
# model, except x and z ("Static-X. Andreas", "Jay-Z. Dom" end sentences there). "no" is not
# one: the reference ends a sentence at "No." before a number.

# Words the pretrained model has seen lower-case inside sentences and capitalised only at their
# start: after an abbreviation (or "...") a capitalised one of them begins a new sentence
# (Punkt's orthographic heuristic), as in "Frank Jr. He is ..." or "Co. Ltd. The company ...".
SENTENCE_STARTERS = (
    "a an the he she it they we i you his her its their our my this that these those there here "
    "in on at after before during since when while as by for from with without under over of to "
    "however although though but and or so yet also then today later now born some many most all "
    "both each one two three several other another such his him them who which what where why how "
    "if despite following throughout between among according besides like unlike"
).split()


@lru_cache(maxsize=1)
def _punkt():
    from nltk.tokenize.punkt import _ORTHO_BEG_UC, _ORTHO_MID_LC, PunktLanguageVars, PunktParameters
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    class ReferenceLanguageVars(PunktLanguageVars):
        """NLTK as the reference ran it: only ASCII quotes and brackets may follow a
        sentence-final period (NLTK 3.9 added curly quotes, so ``“Title.” Next`` would split
        where the reference does not)."""

        @property
        def _re_non_word_chars(self):
            return r"(?:[)\";}\]\*:@\'\({\[!?])"

    params = PunktParameters()
    params.abbrev_types = set(ABBREVIATIONS)
    for word in SENTENCE_STARTERS:
        params.add_ortho_context(word, _ORTHO_BEG_UC | _ORTHO_MID_LC)
    return PunktSentenceTokenizer(params, lang_vars=ReferenceLanguageVars())


def sent_tokenize(paragraph: str) -> list[str]:
    return _punkt().tokenize(paragraph)


def detect_initials(text: str) -> list[str]:
    """SPEC §2: initials are matches of ``[A-Z]\\. ?[A-Z]\\.``."""
    return re.findall(r"[A-Z]\. ?[A-Z]\.", text)


def fix_sentence_splitter(sentences: list[str], initials: list[str]) -> list[str]:
    """SPEC §2 repairs: re-merge splits inside initials; merge one-word sentences and
    sentences starting lower-case into the one before (a one-word first sentence is merged
    with the one after)."""
    for initial in initials:
        if not any(initial in s for s in sentences):
            alpha1, alpha2 = [t.strip() for t in initial.split(".") if len(t.strip()) > 0]
            for i, (s1, s2) in enumerate(zip(sentences, sentences[1:])):
                if s1.endswith(alpha1 + ".") and s2.startswith(alpha2 + "."):
                    sentences = sentences[:i] + [sentences[i] + " " + sentences[i + 1]] + sentences[i + 2 :]
                    break
    out: list[str] = []
    combine_with_previous = False
    for idx, sent in enumerate(sentences):
        if len(sent.split()) <= 1 and idx == 0:
            combine_with_previous = True
            out.append(sent)
        elif len(sent.split()) <= 1:
            out[-1] += " " + sent
        elif sent[0].isalpha() and not sent[0].isupper() and idx > 0:
            out[-1] += " " + sent
            combine_with_previous = False
        elif combine_with_previous:
            out[-1] += " " + sent
            combine_with_previous = False
        else:
            out.append(sent)
    return out


def split_paragraphs(generation: str) -> list[str]:
    return [p.strip() for p in generation.split("\n") if len(p.strip()) > 0]


def split_sentences(generation: str) -> tuple[list[str], list[int]]:
    """Sentences of a generation, and the indices where a new paragraph starts (after the first)."""
    sentences: list[str] = []
    para_breaks: list[int] = []
    for idx, paragraph in enumerate(split_paragraphs(generation)):
        if idx > 0:
            para_breaks.append(len(sentences))
        sentences += fix_sentence_splitter(sent_tokenize(paragraph), detect_initials(paragraph))
    return sentences, para_breaks


def gets_no_facts(sentence: str, index: int) -> bool:
    """SPEC §2 (bio mode): "Sure…", "Please…", a first "Here are…", and the reference's
    "This sentence does not contain any facts" get no atomic facts."""
    return (
        sentence.startswith("Sure")
        or sentence.startswith("Please")
        or (index == 0 and sentence.startswith("Here are"))
        or sentence.startswith("This sentence does not contain any facts")
    )
