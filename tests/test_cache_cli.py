"""``fscore-lite cache info | prune``: the call cache's size and contents, pruned by age and model."""
from __future__ import annotations

import json
import sqlite3
import time

import pytest

from fscore_lite.cache import CallCache, cache_size
from fscore_lite.cli import main
from fscore_lite.commands.common import human_size
from fscore_lite.manifest import Bundle, ModelEntry, ModelFile

A, B = "a" * 64, "b" * 63 + "c"
DAY = 86400.0


def run(capsys, *argv) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    out, err = capsys.readouterr()
    return exc.value.code or 0, out, err


def _fill(path) -> None:
    """Model A: 3 new rows, 2 written 40 days ago; model B: 2 new, 1 old, 1 of unknown age."""
    c = CallCache(path)
    for i in range(5):
        c.put(A, "generate", {"prompt": f"a{i}"}, {"text": "x" * 100})
    for i in range(4):
        c.put(B, "retrieve", {"q": f"b{i}"}, [[1, 0.5]])
    c.close()
    db = sqlite3.connect(path)
    old = time.time() - 40 * DAY
    with db:
        db.execute("UPDATE calls SET created = ? WHERE model = ? AND input IN (?, ?)", (old, A, '{"prompt": "a3"}', '{"prompt": "a4"}'))
        db.execute("UPDATE calls SET created = ? WHERE model = ? AND input = ?", (old, B, '{"q": "b2"}'))
        db.execute("UPDATE calls SET created = NULL WHERE model = ? AND input = ?", (B, '{"q": "b3"}'))
    db.close()


def _rows(path) -> set[tuple[str, str]]:
    db = sqlite3.connect(path)
    try:
        return {(m[:1], i) for m, i in db.execute("SELECT model, input FROM calls")}
    finally:
        db.close()


@pytest.fixture()
def cache(tmp_path):
    path = tmp_path / "calls.sqlite"
    _fill(path)
    return path


@pytest.mark.parametrize("n,text", [(0, "0 B"), (999, "999 B"), (1000, "1.0 KB"), (45_678, "45.7 KB"),
                                    (6_700_000, "6.7 MB"), (8.9e9, "8.9 GB"), (1.2e13, "12000.0 GB")])
def test_human_size_uses_powers_of_1000(n, text):
    assert human_size(n) == text


def test_info_shows_size_and_rows_per_model(cache, capsys, tmp_path):
    code, out, err = run(capsys, "cache", "info", "--cache", str(cache), "--models-dir", str(tmp_path / "none"))
    assert code == 0, err
    info = json.loads(out)
    assert info["exists"] and info["rows"] == 9 and info["size_bytes"] == cache_size(cache) > 0
    assert info["size"] == human_size(info["size_bytes"])
    by = {m["model"]: m for m in info["models"]}
    assert by[A]["rows"] == 5 and by[A]["kinds"] == {"generate": 5} and by[A]["rows_of_unknown_age"] == 0
    assert by[B]["rows"] == 4 and by[B]["kinds"] == {"retrieve": 4} and by[B]["rows_of_unknown_age"] == 1
    assert by[A]["oldest"] < time.time() - 39 * DAY < by[A]["newest"]
    assert by[A]["stored_bytes"] > 5 * 100


def test_info_on_a_missing_cache_creates_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FSCORE_LITE_HOME", str(tmp_path / "home"))
    code, out, err = run(capsys, "cache", "info")
    assert code == 0 and json.loads(out)["exists"] is False and json.loads(out)["path"].endswith("home/calls.sqlite")
    assert not (tmp_path / "home").exists()


def test_prune_by_age(cache, capsys):
    code, out, err = run(capsys, "cache", "prune", "--older-than", "30", "--cache", str(cache))
    assert code == 0, err
    assert json.loads(out)["deleted"] == 4 and json.loads(out)["remaining"] == 5
    assert _rows(cache) == {("a", '{"prompt": "a0"}'), ("a", '{"prompt": "a1"}'), ("a", '{"prompt": "a2"}'),
                            ("b", '{"q": "b0"}'), ("b", '{"q": "b1"}')}


def test_prune_by_model_prefix_and_age(cache, capsys):
    code, out, err = run(capsys, "cache", "prune", "--model", "bbbbbb", "--older-than", "30", "--cache", str(cache))
    assert code == 0, err
    assert json.loads(out)["deleted"] == 2 and json.loads(out)["models"] == [B]
    assert {i for m, i in _rows(cache) if m == "b"} == {'{"q": "b0"}', '{"q": "b1"}'}
    assert len([1 for m, _ in _rows(cache) if m == "a"]) == 5  # the other model untouched
    code, out, err = run(capsys, "cache", "prune", "--model", A, "--cache", str(cache))
    assert code == 0 and json.loads(out)["deleted"] == 5 and {m for m, _ in _rows(cache)} == {"b"}


def test_prune_by_model_name(cache, capsys, tmp_path):
    bundle = Bundle(tmp_path / "models")
    bundle.add(ModelEntry(name="model-a", role="llm", architecture="test",
                          files=(ModelFile(path="a/a.gguf", sha256=A, size=1),)))
    bundle.save()
    code, out, err = run(capsys, "cache", "info", "--cache", str(cache), "--models-dir", str(bundle.root))
    assert {m["model"]: m["name"] for m in json.loads(out)["models"]} == {A: "model-a", B: None}
    code, out, err = run(capsys, "cache", "prune", "--model", "model-a", "--dry-run", "--cache", str(cache),
                         "--models-dir", str(bundle.root))
    assert code == 0 and json.loads(out)["deleted"] == 5 and len(_rows(cache)) == 9  # dry run: nothing gone
    code, out, err = run(capsys, "cache", "prune", "--model", "model-a", "--cache", str(cache),
                         "--models-dir", str(bundle.root))
    assert code == 0 and {m for m, _ in _rows(cache)} == {"b"}


def test_prune_shrinks_the_file(tmp_path, capsys):
    path = tmp_path / "calls.sqlite"
    c = CallCache(path)
    for i in range(300):
        c.put(A, "generate", {"prompt": f"{i} " + "long prompt " * 300}, {"text": "y"})
    c.close()
    code, out, err = run(capsys, "cache", "prune", "--model", "aaaaaaaa", "--cache", str(path))
    res = json.loads(out)
    assert code == 0 and res["deleted"] == 300 and res["size_after"] < res["size_before"] / 4
    assert res["size_after"] == cache_size(path)


@pytest.mark.parametrize("argv, message", [
    ((), "--older-than DAYS and/or --model"),
    (("--older-than", "-1"), "0 or more"),
    (("--model", "no-such-model"), "unknown model 'no-such-model'"),
    (("--model", "cccccc"), "no cached rows"),
])
def test_prune_errors(cache, capsys, tmp_path, argv, message):
    code, out, err = run(capsys, "cache", "prune", *argv, "--cache", str(cache), "--models-dir", str(tmp_path / "none"))
    assert code == 2 and err.startswith("error: ") and message in err
    assert len(_rows(cache)) == 9


def test_schema_1_cache_is_migrated(tmp_path, capsys):
    path = tmp_path / "calls.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    db.execute("CREATE TABLE calls (model TEXT, kind TEXT, key TEXT, input TEXT, output TEXT, PRIMARY KEY (model, kind, key))")
    db.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    c0 = CallCache(None)
    key, text = c0._key({"p": 1})
    db.execute("INSERT INTO calls VALUES (?,?,?,?,?)", (A, "generate", key, text, json.dumps("old")))
    db.commit()
    db.close()
    c = CallCache(path)
    assert c.get(A, "generate", {"p": 1}) == "old"  # old rows still serve
    c.put(A, "generate", {"p": 2}, "new")
    c.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "2"
    assert sorted(db.execute("SELECT output, created IS NULL FROM calls")) == [('"new"', 0), ('"old"', 1)]
    db.close()
    code, out, err = run(capsys, "cache", "prune", "--older-than", "1", "--cache", str(path))
    assert code == 0 and json.loads(out)["deleted"] == 1 and _rows(path) == {("a", '{"p": 2}')}


def test_not_a_database(tmp_path, capsys):
    bad = tmp_path / "calls.sqlite"
    bad.write_bytes(b"not sqlite at all" * 100)
    code, out, err = run(capsys, "cache", "info", "--cache", str(bad))
    assert code == 2 and err.startswith("error: ") and "not a readable SQLite database" in err
