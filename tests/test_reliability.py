"""Issue 22, one test per defect (through the production functions, no models needed): nothing
lost, nothing silently wrong. The command-line probes are in test_reliability_probes.py."""
from __future__ import annotations

import json
import os
import threading
import unicodedata
from pathlib import Path

import pytest

from fscore_lite.errors import FscoreError, InputError, ModelIntegrityError, OutputError
from fscore_lite.factscore.pipeline import ScoreOptions, load_items, score_file
from fscore_lite.io import ResumableJsonlWriter, atomic_write_json
from tests.test_paths import FakeScorer

ITEMS = [{"topic": "Ann Lee", "facts": ["Ann Lee is a painter."]},
         {"topic": "Bo Kim", "facts": ["Bo Kim is a poet."]},
         {"topic": "Cy Wu", "facts": ["Cy Wu is a chef."]}]
OPTS = dict(progress=False)


def _src(tmp_path, items=ITEMS, name="in.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items), encoding="utf-8")
    return p


class StopAt(FakeScorer):
    """Interrupted (as by Ctrl-C) when it reaches input line ``stop``."""

    def __init__(self, stop):
        super().__init__()
        self.stop = stop

    def score_item(self, item, progress=None):
        if item.line == self.stop:
            raise KeyboardInterrupt
        return super().score_item(item)


def _partial_after_one_item(tmp_path) -> tuple[Path, Path, Path]:
    src, out = _src(tmp_path), tmp_path / "out.jsonl"
    with pytest.raises(KeyboardInterrupt):
        score_file(src, out, options=ScoreOptions(**OPTS), scorer=StopAt(2))
    partial = out.with_name("out.jsonl.partial")
    assert len(partial.read_text().splitlines()) == 2  # the run key and item 1
    return src, out, partial


# 1. one writer per output ---------------------------------------------------------------------
def test_a_second_run_on_the_same_output_is_refused_naming_the_first(tmp_path):
    src = _src(tmp_path)
    out = tmp_path / "out.jsonl"
    first = ResumableJsonlWriter(out, run_key="other run")  # a run in progress holds the output
    try:
        with pytest.raises(OutputError) as e:
            score_file(src, out, options=ScoreOptions(**OPTS), scorer=FakeScorer())
        assert f"another run (process {os.getpid()}) is writing this output" in str(e.value)
        assert not out.exists()
        assert json.loads(first.partial.read_text().splitlines()[0]) == {"_run": "other run"}  # untouched
    finally:
        first.close()
    score_file(src, out, options=ScoreOptions(**OPTS), scorer=FakeScorer())  # released: runs
    assert len(out.read_text().splitlines()) == 3 and not list(tmp_path.glob("*.lock"))


def test_the_summary_is_locked_with_the_output(tmp_path):
    src = _src(tmp_path)
    held = ResumableJsonlWriter(tmp_path / "a.jsonl", also_locked=[tmp_path / "shared.summary.json"])
    try:
        with pytest.raises(OutputError, match="is writing this output"):
            score_file(src, tmp_path / "b.jsonl", options=ScoreOptions(**OPTS), scorer=FakeScorer(),
                       summary_path=tmp_path / "shared.summary.json")
    finally:
        held.close()


# 3. --resume trusts nothing -------------------------------------------------------------------
@pytest.mark.parametrize("line,why", [
    ('{"_line": 99, "item": {"topic": "x"}}', "item for input line 99, which holds no item of the input"),
    ('{"foo": 1}', 'expected {"_line": N, "item": {...}}'),
    ("[1, 2]", 'expected {"_line": N, "item": {...}}'),
    ('{"_line": 1, "item": {"topic": "again"}}', "a second item for input line 1"),
    ('{"_line": "2", "item": {}}', '"_line" must be a whole number'),
    ('{"_line": 2, "item": [1]}', '"_line" must be a whole number and "item" an object'),
])
def test_resume_refuses_a_partial_line_that_is_not_an_item_of_this_input(tmp_path, line, why):
    src, out, partial = _partial_after_one_item(tmp_path)
    with open(partial, "a") as f:
        f.write(line + "\n" + '{"_line": 3, "item": {"topic": "Cy Wu"}}\n')  # not last: not a torn line
    with pytest.raises(FscoreError) as e:
        score_file(src, out, options=ScoreOptions(**OPTS), scorer=FakeScorer(), resume=True)
    assert str(e.value).startswith(f"{partial}:3: {why}") and "without --resume" in str(e.value)
    assert not out.exists()


def test_resume_scores_a_hand_edited_partial_item_again(tmp_path, capsys):
    """Each partial line carries the sha256 of the run key and its item: an item edited after it
    was written (or a line without the hash) is not taken over by --resume but scored again, with
    a warning naming its line; the untouched items are kept."""
    out = tmp_path / "out.jsonl"
    w = ResumableJsonlWriter(out, run_key="k", lines=[1, 2, 3])
    w.add(1, {"topic": "A", "score": 0.25})
    w.add(2, {"topic": "B", "score": 0.5})
    w.close()
    partial = out.with_name("out.jsonl.partial")
    lines = partial.read_text().splitlines()
    lines[1] = lines[1].replace('"score": 0.25', '"score": 0.99')  # item of line 1, edited by hand
    lines.append(json.dumps({"_line": 3, "item": {"topic": "C"}}))  # no hash
    partial.write_text("\n".join(lines) + "\n")
    w = ResumableJsonlWriter(out, resume=True, run_key="k", lines=[1, 2, 3])
    try:
        assert [w.done(n) for n in (1, 2, 3)] == [False, True, False]
        assert w.items[2] == {"topic": "B", "score": 0.5}
    finally:
        w.close()
    assert f"warning: {partial}: line(s) 2, 4 do not match the hash" in capsys.readouterr().err


def test_resume_drops_a_torn_last_line(tmp_path):
    src, out, partial = _partial_after_one_item(tmp_path)
    with open(partial, "a") as f:
        f.write('{"_line": 2, "item": {"top')  # killed in the middle of an append
    again = FakeScorer()
    summary = score_file(src, out, options=ScoreOptions(**OPTS), scorer=again, resume=True)
    assert again.scored == [2, 3] and summary["num_items"] == 3


def test_resume_refuses_a_torn_line_with_lines_after_it(tmp_path):
    src, out, partial = _partial_after_one_item(tmp_path)
    key, item1 = partial.read_text().splitlines()
    partial.write_text("\n".join([key, '{"_line": 2, "item": {"top', item1]) + "\n")
    with pytest.raises(FscoreError, match=r"out.jsonl.partial:2: not a complete JSON line"):
        score_file(src, out, options=ScoreOptions(**OPTS), scorer=FakeScorer(), resume=True)


def test_resume_refuses_a_partial_without_the_run_key(tmp_path):
    src, out, partial = _partial_after_one_item(tmp_path)
    lines = partial.read_text().splitlines()
    partial.write_text("\n".join(lines[1:]) + "\n")
    with pytest.raises(FscoreError, match=r"partial:1: the first line is not the run key"):
        score_file(src, out, options=ScoreOptions(**OPTS), scorer=FakeScorer(), resume=True)


# 6. strict JSON in, strict JSON out ----------------------------------------------------------
@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_non_finite_number_in_input_is_an_error_naming_the_line(tmp_path, value):
    p = tmp_path / "in.jsonl"
    p.write_text(json.dumps(ITEMS[0]) + "\n" + '{"topic": "B", "facts": [], "weight": %s}\n' % value)
    with pytest.raises(InputError) as e:
        load_items(p)
    assert str(e.value).startswith(f"{p}:2: the number {value} is not finite")


def test_outputs_are_strict_json(tmp_path):
    with pytest.raises(OutputError, match="not finite"):
        atomic_write_json(tmp_path / "s.json", {"score": float("nan")})
    assert not (tmp_path / "s.json").exists()
    w = ResumableJsonlWriter(tmp_path / "o.jsonl")
    with pytest.raises(OutputError, match="input line 1 holds a number that is not finite"):
        w.add(1, {"score": float("inf")})
    w.close()
    assert "Infinity" not in w.partial.read_text()


# 8. one spelling of a text --------------------------------------------------------------------
def test_composed_and_decomposed_topics_are_the_same_item(tmp_path):
    composed = "Kō Itō"
    decomposed = unicodedata.normalize("NFD", composed)
    assert composed != decomposed
    a = load_items(_src(tmp_path, [{"topic": composed, "facts": [f"{composed} is a poet."]}], "a.jsonl"))
    b = load_items(_src(tmp_path, [{"topic": decomposed, "facts": [f"{decomposed} is a poet."]}], "b.jsonl"))
    assert (a[0].topic, a[0].facts, a[0].data) == (b[0].topic, b[0].facts, b[0].data)
    assert a[0].topic == composed


# 9. unencodable text is refused up front -------------------------------------------------------
@pytest.mark.parametrize("field", ["topic", "facts", "note"])
def test_a_lone_surrogate_is_refused_before_anything_is_written(tmp_path, field):
    item = dict(ITEMS[0])
    item[field] = ["\ud800 x"] if field == "facts" else "\ud800 x"
    p = tmp_path / "in.jsonl"
    p.write_text(json.dumps(ITEMS[1]) + "\n" + json.dumps(item) + "\n")  # json.dumps escapes it: \ud800
    out = tmp_path / "out.jsonl"
    with pytest.raises(InputError) as e:
        score_file(p, out, options=ScoreOptions(**OPTS), scorer=FakeScorer())
    assert str(e.value).startswith(f"{p}:2: field '{field}' contains a lone surrogate")
    assert list(tmp_path.iterdir()) == [p]


# 10. a full disk ------------------------------------------------------------------------------
def test_a_full_disk_while_items_are_written_is_a_clear_error_and_resumes(tmp_path, monkeypatch):
    import fscore_lite.driver as driver

    class OnFullDisk(ResumableJsonlWriter):
        """Appends go to /dev/full after the first item: the buffered line cannot be flushed."""

        def add(self, line, item):
            if self.items and not getattr(self, "_full", False):
                self._full, good = True, self._fh
                good.close()
                self._fh = open("/dev/full", "a", encoding="utf-8")
            super().add(line, item)

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    src, out = _src(tmp_path), tmp_path / "out.jsonl"
    monkeypatch.setattr(driver, "ResumableJsonlWriter", OnFullDisk)
    with pytest.raises(OutputError) as e:
        score_file(src, out, options=ScoreOptions(**OPTS), scorer=FakeScorer())
    assert "No space left on device" in str(e.value) and "--resume" in str(e.value)
    monkeypatch.setattr(driver, "ResumableJsonlWriter", ResumableJsonlWriter)
    again = FakeScorer()
    summary = score_file(src, out, options=ScoreOptions(**OPTS), scorer=again, resume=True)
    assert again.scored == [2, 3] and summary["num_items"] == 3


# 11. a damaged call cache ------------------------------------------------------------------
@pytest.mark.parametrize("damage", ["garbage", "truncated", "folder"])
def test_a_damaged_call_cache_says_what_is_wrong_and_how_to_recover(tmp_path, damage):
    from fscore_lite.cache import CallCache, check_cache

    path = tmp_path / "calls.sqlite"
    if damage == "folder":
        path.mkdir()
    elif damage == "garbage":
        path.write_bytes(b"not a database at all " * 100)
    else:
        c = CallCache(path)
        for i in range(500):
            c.put("m", "k", {"i": i}, "x" * 200)
        c.close()
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])
    assert check_cache(path)
    with pytest.raises(FscoreError) as e:
        c = CallCache(path)
        c.get("m", "k", {"i": 499})
    msg = str(e.value)
    assert msg.startswith(f"the call cache {path} cannot be used: ") and "--no-cache" in msg and "aside" in msg


def test_doctor_checks_the_cache(tmp_path):
    from fscore_lite.commands.doctor import collect
    from fscore_lite.settings import Settings

    settings = Settings(home=tmp_path, threads=1)
    assert collect(settings)["cache"]["ok"]
    settings.cache_path.write_bytes(b"garbage" * 100)
    d = collect(settings)
    assert not d["cache"]["ok"] and any("the call cache" in m and "--no-cache" in m for m in d["missing"])


# 13. a pipe or FIFO is read once ---------------------------------------------------------------
def test_a_fifo_input_is_read_once(tmp_path):
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    body = "".join(json.dumps(i) + "\n" for i in ITEMS).encode()

    def feed():
        with open(fifo, "wb") as f:
            f.write(body)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    result = {}
    worker = threading.Thread(target=lambda: result.update(
        s=score_file(fifo, tmp_path / "out.jsonl", options=ScoreOptions(**OPTS), scorer=FakeScorer())), daemon=True)
    worker.start()
    worker.join(60)
    if worker.is_alive():  # unblock a second open of the FIFO so the thread can end, then fail
        with open(fifo, "wb"):
            pass
        pytest.fail("the FIFO was opened a second time after it was read")
    assert result["s"]["num_items"] == 3


# 14-16. settings that said something else than what ran ---------------------------------------
def test_naming_the_demo_store_is_naming_a_store(tmp_path, monkeypatch):
    from fscore_lite.settings import Settings

    monkeypatch.delenv("FSCORE_LITE_STORE", raising=False)
    s = Settings(home=tmp_path, threads=1)
    assert s.store_default and s.with_(llm="x").store_default
    assert not s.with_(store=s.demo_store).store_default
    assert not Settings(home=tmp_path, threads=1, store=s.demo_store).store_default
    monkeypatch.setenv("FSCORE_LITE_STORE", str(s.demo_store))
    assert not Settings(home=tmp_path, threads=1).store_default


def test_threads_variable_is_read_only_when_no_count_is_given(monkeypatch):
    from fscore_lite.settings import Settings

    monkeypatch.setenv("FSCORE_LITE_THREADS", "abc")
    assert Settings(threads=2).threads == 2 and Settings().with_(threads=3).threads == 3
    with pytest.raises(FscoreError, match="FSCORE_LITE_THREADS must be a whole number"):
        Settings().threads


@pytest.mark.parametrize("bad", [0, 4, -1])
def test_parallel_is_checked_where_it_is_set(bad):
    from fscore_lite.settings import Settings

    with pytest.raises(FscoreError, match=f"--parallel must be 1 to 3, not {bad}"):
        Settings(threads=1, parallel=bad)


@pytest.mark.parametrize("kw,msg", [({"k": 0}, "--k must be"), ({"k": -1}, "--k must be"),
                                    ({"gamma": float("nan")}, "--gamma must be a finite number"),
                                    ({"gamma": float("inf")}, "--gamma must be"), ({"gamma": -5}, "--gamma must be")])
def test_numeric_options_are_checked_where_they_are_made(kw, msg):
    with pytest.raises(FscoreError, match=msg):
        ScoreOptions(**kw)


# 4. decision settings under a hash ------------------------------------------------------------
def _bundle_with_verifier(root: Path) -> Path:
    from fscore_lite.manifest import Bundle, ModelEntry, ModelFile, describe_file, stamp_decisions

    (root / "v").mkdir(parents=True)
    (root / "v" / "model.onnx").write_bytes(b"weights")
    f = describe_file(root, "v/model.onnx", "weights")
    combiner = {"features": ["ce_max"], "weights": [1.5], "intercept": -2.0, "threshold": 0.5}
    b = Bundle(root)
    b.add(ModelEntry("v1", "verifier", "ce", (ModelFile(**f.__dict__),),
                     extra=stamp_decisions({"combiner": combiner, "training": {"cv": 1}})))
    b.save()
    return root / "manifest.json"



def _refused_by_every_lookup(manifest, match: str) -> str:
    """Both bundle lookups refuse the manifest's verifier with ``match``; `models verify` exits 1: its output."""
    from typer.testing import CliRunner

    from fscore_lite.commands.models import app
    from fscore_lite.manifest import Bundle

    bundle = Bundle(manifest.parent)
    for use in (lambda: bundle.get("v1"), lambda: bundle.first_for_role("verifier")):
        with pytest.raises(ModelIntegrityError, match=match):
            use()
    bad = CliRunner().invoke(app, ["verify", "--models-dir", str(manifest.parent)])
    assert bad.exit_code == 1
    return bad.output


def test_a_hand_edited_intercept_fails_the_run_and_models_verify(tmp_path):
    from typer.testing import CliRunner

    from fscore_lite.commands.models import app
    from fscore_lite.manifest import Bundle

    manifest = _bundle_with_verifier(tmp_path / "models")
    entry = Bundle(manifest.parent).get("v1")
    assert entry.decisions_sha256 == entry.recorded_decisions_sha256
    ok = CliRunner().invoke(app, ["verify", "--models-dir", str(manifest.parent)])
    assert ok.exit_code == 0 and "ok     v1" in ok.output

    data = json.loads(manifest.read_text())
    data["models"][0]["extra"]["training"]["cv"] = 2  # a build report: changes no decision
    manifest.write_text(json.dumps(data))
    assert Bundle(manifest.parent).get("v1")
    data["models"][0]["extra"]["combiner"]["intercept"] = -1.9
    manifest.write_text(json.dumps(data))
    bad = _refused_by_every_lookup(manifest, "decision settings of model 'v1'.*changed after the build")
    assert "FAILED v1" in bad


# a damaged model manifest ----------------------------------------------------------------------
@pytest.mark.parametrize("text", ["garbage", "[1]", '{"models": [{"name": 1}]}'])
def test_a_damaged_manifest_is_a_clear_error(tmp_path, text):
    from fscore_lite.manifest import Bundle

    (tmp_path / "manifest.json").write_text(text)
    with pytest.raises(ModelIntegrityError, match="the model manifest .* is damaged"):
        Bundle(tmp_path)


# 7. CSV with an unterminated quote -------------------------------------------------------------
def test_csv_with_an_unterminated_quote_names_the_line(tmp_path):
    from fscore_lite.q2.pipeline import read_q2_rows

    p = tmp_path / "in.csv"
    # a lenient reader makes one row of lines 3-4: knowledge 'Dogs exist.\nA cow.,Cows exist.\n'
    p.write_text('response,knowledge\nA cat.,Cats exist.\nA dog.,"Dogs exist.\nA cow.,Cows exist.\n')
    with pytest.raises(InputError) as e:
        read_q2_rows(p)
    assert str(e.value).startswith(f"{p}:3: malformed CSV: a quoted field starts on this line and is never closed")


def test_a_deleted_decisions_hash_fails_the_run_and_models_verify(tmp_path):
    """The intercept edited and the decisions_sha256 key deleted: the lookup a run makes
    (Bundle.get, first_for_role) and `models verify` refuse the entry; an LLM entry (no
    decision settings) needs no hash."""
    from fscore_lite.manifest import Bundle, ModelEntry, ModelFile, describe_file

    manifest = _bundle_with_verifier(tmp_path / "models")
    data = json.loads(manifest.read_text())
    data["models"][0]["extra"]["combiner"]["intercept"] = -1.9
    del data["models"][0]["extra"]["decisions_sha256"]
    manifest.write_text(json.dumps(data))
    bad = _refused_by_every_lookup(manifest, "holds decision settings .* but no 'decisions_sha256'")
    assert "FAILED v1" in bad and "before its decision settings" not in bad
    bundle = Bundle(manifest.parent)
    f = describe_file(manifest.parent, "v/model.onnx", "weights")
    bundle.add(ModelEntry("l1", "llm", "gguf", (ModelFile(**f.__dict__),)))
    assert bundle.get("l1").name == "l1"
