"""Topic lookup: exact title or alias, then Unicode NFC and trimmed whitespace; a topic that is
still not found gets a message naming the store's close titles."""
from __future__ import annotations

import unicodedata

from fscore_lite.factscore.retrieve import Retriever
from fscore_lite.store import title_variants


def test_title_variants_order_and_uniqueness():
    nfd = unicodedata.normalize("NFD", " Roselyn Sánchez ")
    assert title_variants(nfd) == [nfd, unicodedata.normalize("NFC", nfd), nfd.strip(), "Roselyn Sánchez"]
    assert title_variants("Ann Lee") == ["Ann Lee"]
    assert title_variants("   ") == ["   "]  # the trimmed, empty title is not tried


def test_nfc_and_whitespace_variants_find_the_page(example_store):
    nfd = unicodedata.normalize("NFD", "Roselyn Sánchez")
    assert nfd != "Roselyn Sánchez" and example_store.has_page(nfd)
    assert example_store.resolve_title(nfd) == "Roselyn Sánchez"
    assert example_store.resolve_title("  Travis Oliphant\n") == "Travis Oliphant"
    assert example_store.resolve_title(unicodedata.normalize("NFD", " Kō Itakura ")) == "Kō Itakura"
    assert example_store.resolve_title(" Ko Itakura") == "Kō Itakura"  # an alias, trimmed
    passages = example_store.page_passages("Travis Oliphant ")
    assert passages and passages == example_store.page_passages("Travis Oliphant")
    assert not example_store.has_page("Travis")  # no prefix or fuzzy matching


def test_topic_not_found_names_close_titles(example_store):
    assert example_store.close_titles("Travis Olifant") == ["Travis Oliphant"]
    assert example_store.close_titles("roselyn sanchez") == ["Roselyn Sánchez"]
    assert example_store.close_titles("Marianne McAndrew") == []
    r = Retriever(example_store, embedder=None)
    assert r.missing_topic_message("Travis Olifant") == (
        "topic 'Travis Olifant' is not a page of the store (use --search-all to search the whole store); "
        "close titles: 'Travis Oliphant'")
    assert r.missing_topic_message("Marianne McAndrew").endswith("(use --search-all to search the whole store)")
