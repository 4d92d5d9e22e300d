"""A synthetic Wikipedia for ``kb build`` at scale, made only from the development pages' own text.

The sentences and section headings of wiki-factscore-dev's pages are recombined under new
titles into pages shaped like enwiki articles: a bold title, an infobox, a lead paragraph with a
reference, sections and subsections of paragraphs, links and categories; about one page in ten
is a redirect and one in a hundred a disambiguation page (both as a dump has them). The same
``n`` and ``seed`` give the same corpus. It is written as a ``pages-articles`` XML dump (bz2) and
as a FActScore knowledge DB (its passages packed by word count into the DB's ``<s>…</s>`` layout).

    python -m bench.wiki_corpus --pages 200000 --out DIR
"""
from __future__ import annotations

import argparse
import bz2
import json
import random
import sqlite3
from pathlib import Path
from typing import Iterator
from xml.sax.saxutils import escape, quoteattr

SEPARATOR = "####SPECIAL####SEPARATOR####"
PASSAGE_WORDS = 170  # about 256 MiniLM tokens of English prose


def sentence_pool(data: Path) -> tuple[list[str], list[str]]:
    """(sentences, section headings) of the development pages, in file order."""
    from fscore_lite_index.chunking import parse_sections, split_sentences

    sentences, headings = [], []
    for line in (data / "wiki-factscore-dev" / "pages.jsonl").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        for sec in parse_sections(json.loads(line)["text"]):
            if sec.path and sec.path[-1] not in headings:
                headings.append(sec.path[-1])
            for para in sec.paragraphs:
                sentences.extend(s for s in split_sentences(para) if 3 <= len(s.split()) <= 80)
    return sentences, headings


def synthetic_pages(data: Path, n: int, seed: int = 24) -> Iterator[dict]:
    """``n`` records ``{title, redirect}`` or ``{title, sections: [(heading path, [paragraphs])]}``."""
    sentences, headings = sentence_pool(data)
    rng = random.Random(seed)
    made: list[str] = []
    for i in range(n):
        if made and rng.random() < 0.1:
            yield {"title": f"Redirect {i:07d}", "redirect": rng.choice(made)}
            continue
        title = f"Synthetic page {i:07d}"
        if rng.random() < 0.01:
            yield {"title": f"{title} (disambiguation)", "disambiguation": True, "sections": [((), [title])]}
            continue

        def paragraph(k: int) -> str:
            return " ".join(rng.choice(sentences) for _ in range(k))

        sections = [((), [paragraph(rng.randint(1, 5))])]
        for _ in range(rng.choice((0, 0, 1, 2, 3, 4, 5, 6, 8))):
            head = (rng.choice(headings),)
            sections.append((head, [paragraph(rng.randint(2, 6)) for _ in range(rng.randint(1, 3))]))
            if rng.random() < 0.2:
                sections.append((head + (rng.choice(headings),), [paragraph(rng.randint(2, 5))]))
        made.append(title)
        if len(made) > 10_000:
            made.pop(0)
        yield {"title": title, "sections": sections}


def wikitext(page: dict) -> str:
    if page.get("disambiguation"):
        return f"'''{page['title']}''' may refer to:\n* [[{page['sections'][0][1][0]}]]\n{{{{disambiguation}}}}"
    title, out = page["title"], []
    for path, paragraphs in page["sections"]:
        if not path:
            lead = paragraphs[0]
            first, _, rest = lead.partition(". ")
            out.append(f"{{{{Infobox person\n| name = {title}\n}}}}\n'''{title}''' {first}."
                       f"<ref>{{{{cite web|url=https://example.org/{len(lead)}|title=Source}}}}</ref> {rest}")
            continue
        marks = "=" * (len(path) + 1)
        out.append(f"{marks} {path[-1]} {marks}")
        for p in paragraphs:
            words = p.split(" ")
            if len(words) > 6:  # one link per paragraph, as [[target|label]]
                words[3] = f"[[{words[3].strip('.,;:')}|{words[3]}]]"
            out.append(" ".join(words))
    out.append("[[Category:Synthetic pages]]")
    return "\n\n".join(out)


def passages(page: dict) -> list[str]:
    """The page in the knowledge DB's layout: title and section prefixes, packed by words."""
    units = []
    for path, paragraphs in page["sections"]:
        label = ".:".join(path) + "." if path else page["title"]
        units.append(f"{label} {' '.join(paragraphs)}")
    out, cur, used = [], [], 0
    for unit in units:
        words = unit.split()
        while words:
            take = words[: PASSAGE_WORDS - used]
            words = words[len(take):]
            cur.append("<s>" + " ".join(take) + "</s>")
            used += len(take)
            if used >= PASSAGE_WORDS:
                out.append("".join(cur))
                cur, used = [], 0
    if cur:
        out.append("".join(cur))
    return out


def write_corpus(data: Path, n: int, out: Path, seed: int = 24) -> dict:
    """Write ``out/synthetic-<n>-pages-articles.xml.bz2`` and ``out/synthetic-<n>.db``; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    dump, db_path = out / f"synthetic-{n}-pages-articles.xml.bz2", out / f"synthetic-{n}.db"
    if dump.exists() and db_path.exists():
        return {"dump": dump, "db": db_path}
    tmp_db = db_path.with_suffix(".tmp")
    tmp_db.unlink(missing_ok=True)
    db = sqlite3.connect(tmp_db)
    db.execute("CREATE TABLE documents (title PRIMARY KEY, text)")
    tmp_dump = dump.with_suffix(".tmp")
    with bz2.open(tmp_dump, "wt", encoding="utf-8") as f:
        f.write('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" xml:lang="en">\n'
                "<siteinfo><sitename>Wikipedia</sitename><dbname>enwiki</dbname><case>first-letter</case>"
                '<namespaces><namespace key="0" case="first-letter" /></namespaces></siteinfo>\n')
        for i, page in enumerate(synthetic_pages(data, n, seed), start=1):
            redirect = page.get("redirect")
            text = f"#REDIRECT [[{redirect}]]" if redirect else wikitext(page)
            f.write(f"<page><title>{escape(page['title'])}</title><ns>0</ns><id>{i}</id>"
                    + (f"<redirect title={quoteattr(redirect)} />" if redirect else "")
                    + f"<revision><id>{i}</id><timestamp>2023-04-01T00:00:00Z</timestamp><model>wikitext</model>"
                    f'<format>text/x-wiki</format><text bytes="{len(text)}" xml:space="preserve">{escape(text)}'
                    "</text></revision></page>\n")
            if not redirect and not page.get("disambiguation"):
                db.execute("INSERT INTO documents VALUES (?, ?)", (page["title"], SEPARATOR.join(passages(page))))
        f.write("</mediawiki>\n")
    db.commit()
    db.close()
    tmp_db.rename(db_path)
    tmp_dump.rename(dump)
    return {"dump": dump, "db": db_path}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.wiki_corpus", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=Path("../shared/data"))
    p.add_argument("--pages", type=int, default=200_000)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seed", type=int, default=24)
    args = p.parse_args(argv)
    print(json.dumps({k: str(v) for k, v in write_corpus(args.data.resolve(), args.pages, args.out, args.seed).items()}))


if __name__ == "__main__":
    main()
