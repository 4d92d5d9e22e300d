"""Page text → passages in FActScore's knowledge-DB layout.

FActScore built its DB by tokenising each text unit with RoBERTa (which adds ``<s>`` and
``</s>``) and filling passages of at most 256 tokens; decoding gave texts like
``<s>Title First paragraph…</s><s>Section. Next…</s>``. We measure with the embedding model's
own tokenizer instead (uncased WordPiece; ``[CLS]``/``[SEP]`` per unit stand in for
``<s>``/``</s>``), and cut long units by character offsets into the original text, never by
decoding tokens, so case and accents survive.

Two rules:

``sentences`` (default)
    Units are sentences. The page's first paragraph starts with ``"{title} "``, a section's
    first paragraph with ``"{Section}. "`` (``"{Section}.:{Sub}. "`` for subsections, as in
    the enwiki DB). Units are packed greedily; a unit that does not fit starts a new passage,
    and a unit longer than the budget is cut at token offsets.
``reference``
    Units are sections (their paragraphs joined by spaces, empty sections kept as their
    heading), filled like FActScore's ``build_db``: a unit that overflows the passage is cut
    at the remaining budget and continues in the next one.

Cuts fall on a token that starts a word whenever one fits, so each piece tokenises alone
exactly as it did inside the unit and the 256-token limit holds when recounted.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol, Sequence

MAX_TOKENS = 256
RULES = ("sentences", "reference")

RULE_DESCRIPTIONS = {
    "sentences": (
        "sentences (regex splitter) wrapped in <s>...</s>, packed greedily into passages of "
        "<=256 tokens of the all-MiniLM-L6-v2 tokenizer, [CLS]/[SEP] per sentence counted like "
        "the reference's <s>/</s>; a sentence that does not fit starts a new passage, one longer "
        "than 256 tokens is cut at token offsets (word starts preferred); the page's first "
        "paragraph is prefixed with the title, a section's first paragraph with 'Section.' "
        "('Section.:Sub.' for subsections)"
    ),
    "reference": (
        "sections (paragraphs joined by spaces, title/'Section.' prefixes) wrapped in <s>...</s>, "
        "filled into passages of <=256 tokens of the all-MiniLM-L6-v2 tokenizer, [CLS]/[SEP] per "
        "section counted like the reference's <s>/</s>; as in FActScore's build_db a section that "
        "overflows is cut at the remaining budget and continues in the next passage (cuts at "
        "token offsets, word starts preferred)"
    ),
}


class Tokenizing(Protocol):
    """What chunking needs from a tokenizer (see fscore_lite.backends.embed.SentenceEmbedder)."""

    def count_tokens(self, text: str) -> int: ...

    def token_spans(self, text: str) -> list: ...  # objects with .start, .end, .starts_word


# --- sentences ---------------------------------------------------------------------------

# Words after which a period rarely ends a sentence (lower-cased, without the period).
ABBREVIATIONS = frozenset(
    """
    mr mrs ms mx dr prof st sr jr gen lt col capt cpt sgt maj adm cmdr gov sen rep rev hon fr
    mt ft no nos vs v e.g i.e cf al approx ca c fl b d op vol vols pp p fig figs ed eds
    jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k u.n
    """.split()
)
_END = re.compile(r"[.!?…]+[\"'”’)\]]*\s+")
_OPENERS = "\"'“‘([¿¡"


def split_sentences(paragraph: str) -> list[str]:
    """Split one paragraph into sentences with a small regex rule set.

    A boundary is ``.``/``!``/``?`` (with closing quotes or brackets) followed by space and a
    sentence start (an upper-case letter, a digit or an opening quote/bracket). A period does
    not end a sentence after a single letter (an initial: "J. R. R. Tolkien") or after a
    common abbreviation ("Dr.", "St.", "No.", "Jan.", "U.S.").
    """
    text = paragraph.strip()
    if not text:
        return []
    out: list[str] = []
    start = 0
    for m in _END.finditer(text):
        nxt = text[m.end() : m.end() + 2]
        if not nxt:
            break
        c = nxt[0]
        if c in _OPENERS and len(nxt) > 1:
            c = nxt[1]
        if not (c.isupper() or c.isdigit() or c in _OPENERS):
            continue
        punct = m.group(0).lstrip()
        if punct.startswith(".") and not punct.startswith(".."):
            before = text[start : m.start()].rsplit(None, 1)
            word = before[-1].lstrip(_OPENERS) if before else ""
            w = word.lower()
            if len(word) == 1 and word.isalpha():
                continue
            if w in ABBREVIATIONS or (w.count(".") and len(w.replace(".", "")) <= 3 and w.replace(".", "").isalpha()):
                # "U.S", "e.g", "Ph.D" and the like
                continue
        sentence = text[start : m.end()].strip()
        if sentence:
            out.append(sentence)
        start = m.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


# --- MediaWiki plain text ----------------------------------------------------------------

_HEADING = re.compile(r"^(={2,6})\s*(.*?)\s*\1\s*$")


@dataclass
class Section:
    """A run of paragraphs under one heading path (``()`` for the lead)."""

    path: tuple[str, ...]
    paragraphs: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        """The enwiki DB's section prefix: ``Section.`` or ``Section.:Sub.``."""
        return ".:".join(self.path) + "." if self.path else ""


def parse_sections(text: str) -> list[Section]:
    """Sections of MediaWiki plain text: ``== Heading ==`` lines, paragraphs one per line."""
    sections = [Section(())]
    for line in text.splitlines():
        m = _HEADING.match(line.strip())
        if m:
            level = len(m.group(1)) - 1  # "==" is level 1
            parent = sections[-1].path[: level - 1]
            sections.append(Section(parent + (m.group(2),)))
            continue
        para = line.strip()
        if para:
            sections[-1].paragraphs.append(para)
    return [s for s in sections if s.paragraphs or s.path]


def text_units(title: str, text: str, rule: str = "sentences") -> list[str]:
    """The units a page is packed from, with the title and section prefixes applied."""
    if rule not in RULES:
        raise ValueError(f"unknown chunking rule {rule!r}; choose from {', '.join(RULES)}")
    units: list[str] = []
    first = True
    for sec in parse_sections(text):
        if rule == "reference":
            body = " ".join(sec.paragraphs)
            unit = " ".join(p for p in (title if first else "", sec.label, body) if p)
            units.append(unit)
            first = False
            continue
        for i, para in enumerate(sec.paragraphs):
            sentences = split_sentences(para)
            if not sentences:
                continue
            prefix = [title] if first else []
            if i == 0 and sec.label:
                prefix.append(sec.label)
            if prefix:
                sentences[0] = " ".join(prefix + [sentences[0]])
            units.extend(sentences)
            first = False
    return units


# --- packing -----------------------------------------------------------------------------


def pack_units(
    units: Sequence[str],
    tok: Tokenizing,
    max_tokens: int = MAX_TOKENS,
    overflow: str = "new",
) -> list[str]:
    """Pack units into passage texts of at most ``max_tokens`` tokens.

    Each unit costs its tokens plus 2 (``<s>``/``</s>``, counted as ``[CLS]``/``[SEP]``).
    ``overflow="new"``: a unit that does not fit starts a new passage (and is cut only when
    longer than a whole passage). ``overflow="cut"``: the unit is cut at the remaining
    budget, as FActScore's ``build_db`` does.
    """
    if overflow not in ("new", "cut"):
        raise ValueError("overflow must be 'new' or 'cut'")
    passages: list[str] = []
    parts: list[str] = []
    used = 0

    def close() -> None:
        nonlocal parts, used
        if parts:
            passages.append("".join(parts))
        parts, used = [], 0

    for unit in units:
        unit = unit.strip()
        if not unit:
            continue
        n = tok.count_tokens(unit)
        if used + n <= max_tokens:
            parts.append(f"<s>{unit}</s>")
            used += n
            continue
        if overflow == "new":
            close()
            if n <= max_tokens:
                parts.append(f"<s>{unit}</s>")
                used = n
                continue
        # cut the unit into pieces at token offsets
        spans = tok.token_spans(unit)
        m = len(spans)
        i = 0
        while True:
            j = _cut_end(spans, i, max_tokens - used)
            if j is None:  # not even one token fits here: continue in a fresh passage
                if not parts:
                    raise ValueError(f"max_tokens={max_tokens} is too small to hold any token")
                close()
                continue
            lo = 0 if i == 0 else spans[i].start
            hi = len(unit) if j == m else spans[j].start
            piece = unit[lo:hi].strip()
            parts.append(("<s>" if i == 0 else "") + piece + ("</s>" if j == m else ""))
            used += (j - i) + (i == 0) + (j == m)
            if j == m:
                break
            close()
            i = j
    close()
    return passages


def _cut_end(spans: list, i: int, cap: int) -> int | None:
    """Largest end token j > i for a piece spans[i:j] costing at most ``cap`` tokens.

    Prefers ends at a word start (or the unit's end); falls back to any token.
    """
    m = len(spans)
    head = 1 if i == 0 else 0

    def cost(j: int) -> int:
        return (j - i) + head + (1 if j == m else 0)

    if m == i:  # a unit without content tokens
        return m if cost(m) <= cap else None
    j_max = min(m, i + cap - head)
    if j_max == m and cost(m) > cap:
        j_max = m - 1
    if j_max <= i:
        return None
    for j in range(j_max, i, -1):
        if j == m or spans[j].starts_word:
            return j
    return j_max


def chunk_page(title: str, text: str, tok: Tokenizing, rule: str = "sentences", max_tokens: int = MAX_TOKENS) -> list[str]:
    """Passages of one page, in the knowledge-DB layout, by the named rule."""
    units = text_units(title, text, rule)
    return pack_units(units, tok, max_tokens, overflow="new" if rule == "sentences" else "cut")


_SEGMENTS = re.compile(r"</?s>")


def passage_token_count(passage: str, tok: Tokenizing) -> int:
    """Tokens of a stored passage: each text segment's tokens, plus one per ``<s>``/``</s>``."""
    markers = len(_SEGMENTS.findall(passage))
    content = sum(tok.count_tokens(seg) - 2 for seg in _SEGMENTS.split(passage) if seg.strip())
    return content + markers


def units_text(passages: Sequence[str]) -> str:
    """All passages' text with markers removed, whitespace-joined (for round-trip checks)."""
    words: list[str] = []
    for p in passages:
        words.extend(" ".join(_SEGMENTS.split(p)).split())
    return " ".join(words)

