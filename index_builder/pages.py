"""One page as a source gives it, before chunking (every reader yields these)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SourcePage:
    """One page from a source: either pre-chunked ``passages`` or raw ``text`` to chunk."""

    title: str
    where: str  # "file:line" or "file: documents row N", for messages
    text: str | None = None
    passages: tuple[str, ...] | None = None
    aliases: tuple[str, ...] = ()
    markup: str = "plain"  # "wikitext": ``text`` is converted to plain text before chunking
    redirect: str | None = None  # not a page: ``title`` is an alias of the page ``redirect``
