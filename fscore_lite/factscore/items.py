"""Input items of ``score``: reading and validating a JSONL file before any model runs."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..io import InputFile, read_input, read_jsonl, require_text

MAX_OUTPUT_CHARS = 100_000
MAX_FACT_CHARS = 10_000  # one given fact: a sentence-sized claim, not a document


@dataclass
class Item:
    line: int
    data: dict
    topic: str = ""
    output: str = ""
    facts: list[str] | None = None
    problem: tuple[str, str] | None = None  # (status, message) for items that cannot be scored


def load_items(path: str | Path | InputFile, max_output_chars: int = MAX_OUTPUT_CHARS) -> list[Item]:
    """Read and validate every line first: a broken file fails before any output is written.

    ``path`` may be an :class:`InputFile` already read (a pipe can be read once only). Every
    string is NFC-normalised, so composed and decomposed spellings score the same.

    Malformed JSON, non-UTF-8 bytes, a missing or non-string ``topic``/``output`` and a bad
    ``facts`` value are errors naming file and line. An empty output, or one longer than
    ``max_output_chars`` (or given facts longer than that in all, or one longer than
    :data:`MAX_FACT_CHARS`), becomes a per-item status instead.
    """
    data = read_input(path)
    path = data.path
    items = []
    for rec in read_jsonl(data, nfc=True):
        item = Item(rec.line, rec.data)
        item.topic = require_text(path, rec, "topic")
        facts = rec.data.get("facts")
        if facts is not None:
            if not isinstance(facts, list) or not all(isinstance(f, str) for f in facts):
                raise InputError(path, rec.line, "field 'facts' must be a list of strings")
            item.facts = facts
            longest = max(facts, key=len, default="")
            if len(longest) > MAX_FACT_CHARS:
                item.problem = ("output_too_long", f"{path}:{rec.line}: fact {facts.index(longest) + 1} has "
                                f"{len(longest):,} characters, over the limit of {MAX_FACT_CHARS:,} for one fact")
            elif sum(map(len, facts)) > max_output_chars:
                item.problem = ("output_too_long", f"{path}:{rec.line}: the facts have {sum(map(len, facts)):,} "
                                f"characters in all, over the limit of {max_output_chars:,} (--max-output-chars)")
            item.output = rec.data.get("output", "") if isinstance(rec.data.get("output", ""), str) else ""
        else:
            item.output = require_text(path, rec, "output", allow_empty=True)
            if not item.output.strip():
                item.problem = ("empty_output", f"{path}:{rec.line}: field 'output' is empty")
            elif len(item.output) > max_output_chars:
                item.problem = ("output_too_long", f"{path}:{rec.line}: output has {len(item.output):,} characters, "
                                f"over the limit of {max_output_chars:,} (--max-output-chars)")
        items.append(item)
    if not items:
        raise InputError(path, None, "no input items (the file is empty)")
    return items
