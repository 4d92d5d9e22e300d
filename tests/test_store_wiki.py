"""Wikipedia-scale `kb build`: a MediaWiki dump as a source, lazy page vectors, resume after a kill,
chunking in worker processes (issue 24)."""
from __future__ import annotations

import bz2
import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import numpy as np
import pytest

from fscore_lite.errors import FscoreError
from fscore_lite.factscore.retrieve import Retriever
from fscore_lite.store import open_store
from fscore_lite_index.build import build_store
from fscore_lite_index.sources import detect_format

from .conftest import EXAMPLES, skip_or_fail

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module", autouse=True)
def _dump_libraries():
    import importlib

    for module in ("mwxml", "mwparserfromhell"):
        try:
            importlib.import_module(module)
        except ImportError as e:
            skip_or_fail(f"{module} is not installed ({e}); `make test` installs the dump readers")


JANE = """{{Infobox person|name=Jane Doe|birth_date=1970}}
'''Jane Doe''' (born 1970) is an [[United States|American]] writer.<ref>{{cite web|url=http://x}}</ref> \
She wrote ''[[The Book]]'' in 1999.

== Early life ==
She was born in [[Salt Lake City|Salt Lake]], [[Utah]].<!-- a comment -->
[[File:Jane.jpg|thumb|Jane in 1990]]

=== Schooling ===
She went to East High School.

{| class="wikitable"
| cell one || cell two
|}

== Career ==
{{Main|Jane Doe bibliography}}
Her first novel sold &amp; sold.

[[Category:American writers]]
[[fr:Jane Doe]]
"""

PAGES = [
    # (title, namespace, wikitext, redirect target)
    ("J. Doe", 0, "#REDIRECT [[Jane Doe]]", "Jane Doe"),  # before its target
    ("Jane Doe", 0, JANE, None),
    ("Talk:Jane Doe", 1, "Is she American? ~~~~", None),
    ("Doe", 0, "'''Doe''' may refer to:\n* [[Jane Doe]]\n* [[John Doe]]\n{{disambiguation}}", None),
    ("John Doe (disambiguation)", 0, "'''John Doe''' may mean:\n* [[John Doe]]", None),
    ("John Doe", 0, "'''John Doe''' is a placeholder name.\n\n== Usage ==\nUsed in [[law]].", None),
    ("Johnny Doe", 0, "#REDIRECT [[john Doe#Usage]]", "john Doe#Usage"),
    ("Ghost", 0, "#REDIRECT [[No Such Page]]", "No Such Page"),
    ("Jane Doe", 0, "A second page with the same title.", None),  # first wins
] + [(f"Page {i}", 0, f"'''Page {i}''' is page number {i}. It has one sentence more.\n\n== Part ==\nText {i}.",
      None) for i in range(8)]


def write_dump(path: Path, pages=PAGES) -> Path:
    """A tiny ``pages-articles`` dump in the export-0.10 schema, bz2-compressed like enwiki's."""
    out = ['<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" xml:lang="en">',
           "<siteinfo><sitename>Wikipedia</sitename><dbname>enwiki</dbname><case>first-letter</case>"
           '<namespaces><namespace key="0" case="first-letter" /><namespace key="1" case="first-letter">Talk'
           "</namespace></namespaces></siteinfo>"]
    for n, (title, ns, text, redirect) in enumerate(pages, start=1):
        out.append(f"<page><title>{escape(title)}</title><ns>{ns}</ns><id>{n}</id>"
                   + (f"<redirect title={quoteattr(redirect)} />" if redirect else "")
                   + f"<revision><id>{1000 + n}</id><timestamp>2023-04-01T00:00:00Z</timestamp>"
                   "<model>wikitext</model><format>text/x-wiki</format>"
                   f'<text bytes="{len(text)}" xml:space="preserve">{escape(text)}</text></revision></page>')
    out.append("</mediawiki>\n")
    path.write_bytes(bz2.compress("\n".join(out).encode("utf-8")))
    return path


def _bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def dump_store(tmp_path_factory, minilm_embedder):
    tmp = tmp_path_factory.mktemp("dump")
    dump = write_dump(tmp / "enwiki-20230401-pages-articles1.xml.bz2")
    stats = build_store(dump, tmp / "store", embedder=minilm_embedder, progress=False, embed=False, workers=0,
                        snapshot="20230401")
    with open_store(tmp / "store") as store:
        yield tmp, dump, stats, store


def test_dump_articles_redirects_and_skips(dump_store):
    tmp, dump, stats, store = dump_store
    assert detect_format(dump) == "mediawiki"
    assert sorted(store.titles()) == sorted(["Jane Doe", "John Doe"] + [f"Page {i}" for i in range(8)])
    assert stats.duplicate_titles == 1 and store.meta["duplicate_titles_skipped"] == "1"
    # redirects are aliases (also one met before its target, and one with a fragment and lower case)
    assert store.resolve_title("J. Doe") == "Jane Doe" and store.resolve_title("Johnny Doe") == "John Doe"
    assert not store.has_page("Ghost") and stats.aliases == 2 and store.meta["alias_count"] == "2"
    assert store.meta["input_format"] == "mediawiki" and store.meta["vectors"] == "lazy"


def test_dump_wikitext_becomes_passages(dump_store):
    _, _, _, store = dump_store
    text = " ".join(p.text for p in store.page_passages("Jane Doe"))
    assert text.startswith("<s>Jane Doe Jane Doe (born 1970) is an American writer. She wrote The Book in 1999.")
    assert "Early life. She was born in Salt Lake, Utah." in text
    assert "Early life.:Schooling. She went to East High School." in text
    assert "Career. Her first novel sold & sold." in text
    for junk in ("Infobox", "cite", "thumb", "Jane in 1990", "Category", "fr:", "cell one", "comment", "{{", "[["):
        assert junk not in text
    assert store.search_bm25("placeholder", k=1)[0][0].title == "John Doe"


def test_lazy_vectors_are_the_eager_bytes(tmp_path, minilm_embedder):
    """A store without vectors retrieves exactly what an --embed store retrieves; each page is embedded once."""
    eager = build_store(EXAMPLES / "pages.jsonl", tmp_path / "eager", embedder=minilm_embedder, progress=False)
    lazy = build_store(EXAMPLES / "pages.jsonl", tmp_path / "lazy", embedder=minilm_embedder, progress=False,
                       embed=False)
    assert eager.store_sha256 != lazy.store_sha256 and eager.passages == lazy.passages
    with open_store(tmp_path / "eager") as e, open_store(tmp_path / "lazy") as s:
        assert not e.lazy and s.lazy and s.info()["schema_version"] == 2
        assert s._q("SELECT count(*) FROM page_vectors")[0][0] == 0
        for title in e.titles():
            assert s.page_vectors(title, minilm_embedder).tobytes() == e.page_vectors(title).tobytes()
        assert s.vector_file().count() == len(e.titles())
        facts = [("Kō Itakura", "He plays for Borussia Mönchengladbach."), ("Travis Oliphant", "He created NumPy.")]
        for topic, fact in facts:
            got = Retriever(s, minilm_embedder).retrieve(topic, fact)
            want = Retriever(e, minilm_embedder).retrieve(topic, fact)
            assert [(x.passage, x.score) for x in got] == [(x.passage, x.score) for x in want]
    # a second run reads the kept vectors: no embedder needed
    with open_store(tmp_path / "lazy") as s:
        assert s.page_vectors("Kō Itakura").shape[1] == minilm_embedder.dim
        with pytest.raises(FscoreError, match="built without vectors"):
            _fresh_side(s).page_vectors("Kō Itakura")


def _fresh_side(store):
    """The store with an empty side file (as on a read-only copy elsewhere)."""
    from fscore_lite.page_vectors import VectorFile

    store._vector_file = VectorFile(store.path / "other-vectors.sqlite")
    return store


def _embed_all(store_path: str, models_dir: str) -> int:
    from fscore_lite.backends.embed import SentenceEmbedder
    from fscore_lite.manifest import Bundle
    from fscore_lite.settings import DEFAULT_EMBED

    emb = SentenceEmbedder.from_bundle(Bundle(models_dir), DEFAULT_EMBED, threads=1)
    with open_store(store_path) as s:
        return sum(len(s.page_vectors(t, emb)) for t in s.titles())


def test_concurrent_runs_share_the_side_file(tmp_path, minilm_embedder, minilm_bundle_dir):
    build_store(EXAMPLES / "pages.jsonl", tmp_path / "lazy", embedder=minilm_embedder, progress=False, embed=False)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        counts = pool.starmap(_embed_all, [(str(tmp_path / "lazy"), str(minilm_bundle_dir))] * 2)
    with open_store(tmp_path / "lazy") as s:
        assert counts[0] == counts[1] == s.info()["passages"]
        assert s.vector_file().count() == len(s.titles())  # one row per page, whoever wrote it
        import sqlite3

        con = sqlite3.connect(s.path / "vectors.sqlite")
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        con.close()


KILL_AFTER = """
import os, sys
import fscore_lite_index.build as b
real = b.StoreWriter.add_page
added = []
def dying(self, *a, **k):
    added.append(1)
    if len(added) == int(sys.argv[3]):
        os._exit(9)  # as a kill -9: no cleanup, no last commit
    return real(self, *a, **k)
b.StoreWriter.add_page = dying
b.build_store(sys.argv[1], sys.argv[2], models_dir=sys.argv[4], progress=False, workers=int(sys.argv[5]),
              commit_pages=3, threads=1, embed=sys.argv[6] == "embed")
"""


@pytest.mark.parametrize("embed, workers", [(False, 0), (True, 2)])
def test_resume_after_kill_gives_the_same_bytes(tmp_path, minilm_embedder, minilm_bundle_dir, embed, workers):
    dump = write_dump(tmp_path / "dump.xml.bz2")
    whole = build_store(dump, tmp_path / "whole", embedder=minilm_embedder, progress=False, embed=embed,
                        workers=0, commit_pages=3)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", KILL_AFTER, str(dump), str(tmp_path / "cut"), "6",
                           str(minilm_bundle_dir), str(workers), "embed" if embed else "lazy"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 9, proc.stderr
    assert not (tmp_path / "cut").exists() and (tmp_path / ".cut.building").is_dir()
    with open_store_db(tmp_path / ".cut.building") as db:  # killed after committing some pages
        assert 0 < db.execute("SELECT count(*) FROM pages").fetchone()[0] < whole.pages
    with pytest.raises(FscoreError, match="another input"):
        build_store(EXAMPLES / "pages.jsonl", tmp_path / "cut", embedder=minilm_embedder, progress=False,
                    embed=embed, resume=True)
    resumed = build_store(dump, tmp_path / "cut", embedder=minilm_embedder, progress=False, embed=embed,
                          resume=True, workers=workers, commit_pages=3)
    assert resumed.store_sha256 == whole.store_sha256
    assert _bytes(tmp_path / "cut") == _bytes(tmp_path / "whole")
    assert not (tmp_path / ".cut.building").exists()


def open_store_db(folder: Path):
    import contextlib
    import sqlite3

    return contextlib.closing(sqlite3.connect(folder / "store.sqlite"))


def test_workers_give_the_same_store(tmp_path, minilm_embedder):
    src = tmp_path / "pages.jsonl"
    rows = [json.loads(x) for x in (EXAMPLES / "pages.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
    src.write_text("".join(json.dumps({**r, "title": f"{r['title']} {i}"}, ensure_ascii=False) + "\n"
                           for i in range(30) for r in rows), encoding="utf-8")  # > 2 batches of pages
    one = build_store(src, tmp_path / "one", embedder=minilm_embedder, progress=False, embed=False, workers=0)
    two = build_store(src, tmp_path / "two", embedder=minilm_embedder, progress=False, embed=False, workers=2)
    assert one.pages == two.pages == 150 and one.store_sha256 == two.store_sha256


def test_hnsw_needs_vectors(tmp_path, minilm_embedder):
    with pytest.raises(FscoreError, match="--embed"):
        build_store(EXAMPLES / "pages.jsonl", tmp_path / "s", embedder=minilm_embedder, progress=False,
                    embed=False, hnsw=True)
    assert not (tmp_path / "s").exists() and not (tmp_path / ".s.building").exists()


def test_one_builder_per_target(tmp_path):
    from fscore_lite_index.writer import StoreWriter

    first = StoreWriter(tmp_path / "s", 4, hnsw=False, vectors=False)
    for resume in (False, True):
        with pytest.raises(FscoreError, match="another `kb build`"):
            StoreWriter(tmp_path / "s", 4, hnsw=False, vectors=False, resume=resume)
    first.add_page("A", ["<s>A.</s>"])
    first.finish({"embed_model": "m", "embed_sha256": "0" * 64, "dim": 4, "passage_count": 1, "embed_batch_size": 32})
    with open_store(tmp_path / "s") as s:
        assert s.lazy and s.titles() == ["A"]


@pytest.mark.parametrize("kind", ["xml.bz2", "xml"])
def test_a_cut_dump_commits_what_it_read_and_resumes_once_complete(tmp_path, minilm_embedder, kind):
    """A dump cut short (a .xml.bz2 of three bz2 streams, as multistream dumps are, cut inside
    the last one; a .xml cut at 60%, its elements left open): a clear error naming the file and
    byte offset, the pages before the cut committed; once the file is complete, --resume gives
    the bytes of an uninterrupted build."""
    many = PAGES + [(f"Filler {i}", 0, f"Filler {i} is filler page {i}. " + "It holds a sentence. " * 40, None)
                    for i in range(300)]  # enough XML that the parser reads it in several pieces
    xml = bz2.decompress(write_dump(tmp_path / "src.xml.bz2", many).read_bytes())
    if kind == "xml.bz2":
        lines = xml.split(b"\n")
        third = len(lines) // 3
        parts = [b"\n".join(lines[:third]) + b"\n", b"\n".join(lines[third:2 * third]) + b"\n",
                 b"\n".join(lines[2 * third:])]
        full = b"".join(bz2.compress(p) for p in parts)
        cut = full[:len(full) - len(bz2.compress(parts[2])) // 2]
    else:
        full, cut = xml, xml[:int(len(xml) * 0.6)]
    path = tmp_path / f"enwiki-20230401-pages-articles1.{kind}"
    path.write_bytes(full)
    whole = build_store(path, tmp_path / "whole", embedder=minilm_embedder, progress=False, embed=False, workers=0,
                        commit_pages=3)
    path.write_bytes(cut)
    with pytest.raises(FscoreError) as e:
        build_store(path, tmp_path / "cut", embedder=minilm_embedder, progress=False, embed=False, workers=0,
                    commit_pages=3)
    msg = str(e.value)
    assert msg.startswith(f"{path}: the file ends at byte {len(cut):,} before the dump does"), msg
    assert "--resume" in msg and "articles before the cut are committed" in msg
    assert not (tmp_path / "cut").exists()
    with open_store_db(tmp_path / ".cut.building") as db:
        committed = db.execute("SELECT count(*) FROM pages").fetchone()[0]
    assert 0 < committed < whole.pages
    assert f"the {committed:,} articles before the cut" in msg
    with pytest.raises(FscoreError, match="ends at byte"):  # still cut: the same error, nothing lost
        build_store(path, tmp_path / "cut", embedder=minilm_embedder, progress=False, embed=False, workers=0,
                    commit_pages=3, resume=True)
    path.write_bytes(full)  # the download finished
    resumed = build_store(path, tmp_path / "cut", embedder=minilm_embedder, progress=False, embed=False, workers=0,
                          commit_pages=3, resume=True)
    assert resumed.store_sha256 == whole.store_sha256
    assert _bytes(tmp_path / "cut") == _bytes(tmp_path / "whole")
