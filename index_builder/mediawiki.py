"""A MediaWiki XML dump (``enwiki-*-pages-articles*.xml.bz2``) as a knowledge source.

Why these libraries: ``mwxml`` (Wikimedia's own dump reader) streams ``<page>`` elements from
the XML with constant memory and gives each page's namespace, redirect target and latest
revision text as typed fields; ``mwparserfromhell`` (the parser behind Wikipedia's bots) turns
wikitext into nodes, so templates, references, tables, files and categories are dropped by
type rather than by regular expressions. wikiextractor was the other candidate: it is a
command-line program that writes its own files, with no streaming API to call page by page,
and it drops section headings that chunking uses.

Only main-namespace articles are kept; a redirect becomes an alias of its target page;
disambiguation pages (a disambiguation template, or a "(disambiguation)" title) are skipped.
The wikitext is converted to plain text in the chunking workers (:func:`wikitext_to_text`),
with ``== Heading ==`` lines kept for the section prefixes of the knowledge-DB layout.
"""
from __future__ import annotations

import bz2
import re
from pathlib import Path

from fscore_lite.errors import FscoreError, InputError

from .pages import SourcePage

DISAMBIGUATION = re.compile(
    r"\{\{\s*(disambiguation|disambig|dab|disamb|hndis|geodis|numberdis|mathdab|schooldis|"
    r"letter-numbercombdisambig|hospitaldis|roaddis|callsigndis)\s*[|}]",
    re.IGNORECASE,
)
# link targets that are not article text: media, categories, interwiki and interlanguage links
_NON_TEXT_LINK = re.compile(r"^\s*:?\s*(file|image|media|category|[a-z]{2,3}(-[a-z]+)?|wikt|wiktionary)\s*:",
                            re.IGNORECASE)
_DROP_TAGS = {"table", "ref", "references", "gallery", "math", "timeline", "imagemap", "score", "syntaxhighlight",
              "source", "pre", "nowiki", "templatedata", "graph", "div"}


class TruncatedDump(InputError):
    """The dump ends before its XML does (a download cut short): what came before it is good."""


def _read_failure(path: Path, raw: "_Counting", size: int, pages: int, e: Exception) -> InputError:
    """The error for a failure while reading the dump: :class:`TruncatedDump` when the file
    ended before the XML did (bz2's end-of-stream marker missing, or the XML parser at the end of
    the file with elements still open), else a malformed-dump error; both name the byte offset."""
    msg = str(e)
    at_end = raw.read_bytes >= size
    if isinstance(e, EOFError) or (at_end and ("no element found" in msg or "unclosed token" in msg)):
        return TruncatedDump(path, None, f"the file ends at byte {size:,} before the dump does ({msg}), after "
                             f"{pages:,} complete <page> elements: it was cut short (an unfinished download?)")
    return InputError(path, None, f"malformed dump near byte {raw.read_bytes:,} of {size:,}, after {pages:,} "
                      f"pages: {msg}")


class _Counting:
    """A binary file that counts the compressed bytes read (for the build's ETA)."""

    def __init__(self, f):
        self.f, self.read_bytes = f, 0

    def read(self, n=-1):
        b = self.f.read(n)
        self.read_bytes += len(b)
        return b

    def readinto(self, b):
        n = self.f.readinto(b)
        self.read_bytes += n or 0
        return n

    def readable(self):
        return True

    def close(self):
        self.f.close()


def _require(module: str):
    """The dump libraries are an extra: say how to install them rather than fail on an import."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise FscoreError(f"reading MediaWiki dumps needs {module}: pip install 'fscore-lite[wiki]'") from None


def is_mediawiki_dump(path: Path, head: bytes) -> bool:
    """A ``.xml`` or ``.xml.bz2`` file whose XML starts with ``<mediawiki``."""
    if head.startswith(b"BZh"):
        try:
            with bz2.open(path, "rb") as f:
                head = f.read(4096)
        except (OSError, EOFError):  # cut inside the first block: nothing to look at, the name says it
            return path.name.lower().endswith(".xml.bz2")
    return b"<mediawiki" in head[:4096]


def normalize_title(title: str) -> str:
    """A link or redirect target as a page title: underscores as spaces, no fragment, first letter upper."""
    title = title.split("#", 1)[0].replace("_", " ").strip()
    title = " ".join(title.split())
    return title[:1].upper() + title[1:]


def read_mediawiki(path: str | Path, position: list[int] | None = None):
    """``SourcePage``s of a dump in file order: articles (raw wikitext) and redirects.

    ``position``, when given, is kept at ``[compressed bytes read, file size]``.
    """

    mwxml = _require("mwxml")
    path = Path(path)
    if not path.exists():
        raise InputError(path, None, "file not found")
    raw = _Counting(open(path, "rb"))
    size = path.stat().st_size
    try:
        stream = bz2.open(raw, "rb") if path.name.endswith(".bz2") else raw
        try:
            dump = mwxml.Dump.from_file(stream)
        except Exception as e:  # noqa: BLE001 - mwxml raises several XML and schema errors
            failure = _read_failure(path, raw, size, 0, e)
            if isinstance(failure, TruncatedDump):
                raise failure from None
            raise InputError(path, None, f"not a MediaWiki XML dump: {e}") from None
        pages = iter(dump)
        n = 0
        while True:
            try:  # the XML is parsed lazily: a page's revisions are read while iterating them
                page = next(pages)
                text = None
                if page.namespace == 0:
                    for revision in page:  # pages-articles dumps hold the latest revision only: keep the last
                        text = revision.text
            except StopIteration:
                break
            except Exception as e:  # noqa: BLE001 - bz2 EOFError/OSError, XML ParseError, mwxml schema errors
                raise _read_failure(path, raw, size, n, e) from None
            n += 1
            if position is not None:
                position[:] = [raw.read_bytes, size]
            if page.namespace != 0:
                continue
            where = f"{path}: page {page.id}"
            if page.redirect:
                target = normalize_title(page.redirect)
                if target and target != page.title:
                    yield SourcePage(title=page.title, where=where, redirect=target)
                continue
            if not text or not text.strip():
                continue
            if page.title.endswith("(disambiguation)") or DISAMBIGUATION.search(text):
                continue
            yield SourcePage(title=page.title, where=where, text=text, markup="wikitext")
    finally:
        raw.close()


def wikitext_to_text(wikitext: str) -> str:
    """Plain text of an article: paragraphs separated by blank lines, ``== Heading ==`` lines kept.

    Templates, references, tables, comments, files, categories and interlanguage links are
    dropped; links keep their label; bold and italic keep their text; list items their text.
    """
    mwparserfromhell = _require("mwparserfromhell")
    from mwparserfromhell.nodes import Comment, Heading, Tag, Template, Wikilink

    out: list[str] = []
    for node in mwparserfromhell.parse(wikitext).nodes:
        if isinstance(node, (Template, Comment)):
            continue
        if isinstance(node, Heading):
            title = " ".join(node.title.strip_code().split())
            marks = "=" * node.level
            out.append(f"\n\n{marks} {title} {marks}\n\n" if title else "\n\n")
            continue
        if isinstance(node, Wikilink) and _NON_TEXT_LINK.match(str(node.title)):
            continue
        if isinstance(node, Tag) and str(node.tag).lower() in _DROP_TAGS:
            continue
        stripped = node.__strip__(normalize=True, collapse=True, keep_template_params=False)
        if stripped:
            out.append(str(stripped))
    # one paragraph (or heading, or list item) a line, as parse_sections reads them
    lines = (" ".join(line.split()) for line in "".join(out).split("\n"))
    return "\n".join(line for line in lines if line)
