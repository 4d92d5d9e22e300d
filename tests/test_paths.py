"""Bad paths and bad settings: a clear `error:` line, exit status 2, and nothing destroyed.

The command-line cases run with an empty FSCORE_LITE_HOME (no models installed): a check that
came after model loading would fail with "not installed" instead of the message asserted here,
so these tests also prove that paths are checked before any model work.
"""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fscore_lite.errors import FscoreError, InputError, OutputError
from fscore_lite.factscore.pipeline import FactScorer
from fscore_lite.io import check_writable_outputs, read_csv_rows, read_jsonl, summary_path_for

ITEM = json.dumps({"topic": "Ann Lee", "output": "Ann Lee is a painter."}) + "\n"
ROW = b"response,knowledge\nThe tower is in Paris.,The Eiffel Tower is in Paris.\n"


def _cli(args, tmp_path, cwd=None, env_extra=None):
    env = dict(os.environ, FSCORE_LITE_HOME=str(tmp_path / "home"), FSCORE_LITE_THREADS="1")
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "fscore_lite", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=120, cwd=cwd)


def _assert_clean_error(proc, *expected):
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    for text in expected:
        assert text in proc.stderr, proc.stderr


# ---- outputs that resolve to an input --------------------------------------------------------
@pytest.mark.parametrize("how", ["same", "dotdot", "summary", "hardlink", "symlink", "partial"])
def test_score_refuses_to_overwrite_its_input(tmp_path, how):
    x = tmp_path / "x"
    x.mkdir()
    src = x / "same.jsonl"
    src.write_text(ITEM)
    before = src.read_bytes()
    cwd = x
    if how == "same":
        args = ["score", "same.jsonl", "-o", "same.jsonl"]
    elif how == "dotdot":
        args = ["score", "same.jsonl", "-o", "./../x/same.jsonl"]
    elif how == "summary":
        args = ["score", "same.jsonl", "-o", "out.jsonl", "--summary", "../x/./same.jsonl"]
    elif how == "hardlink":
        os.link(src, x / "alias.jsonl")
        args = ["score", "same.jsonl", "-o", "alias.jsonl"]
    elif how == "symlink":
        (tmp_path / "link").symlink_to(x)
        args = ["score", str(src), "-o", str(tmp_path / "link" / "same.jsonl")]
    else:  # the input is the output's partial file
        args = ["score", "same.jsonl.partial", "-o", "same.jsonl"]
        src = x / "same.jsonl.partial"
        src.write_text(ITEM)
    proc = _cli(args, tmp_path, cwd=cwd)
    _assert_clean_error(proc, "refusing to write there", "it is the input file")
    assert src.read_bytes() == before
    assert sorted(p.name for p in x.iterdir()) == sorted(
        {"same.jsonl", src.name} | ({"alias.jsonl"} if how == "hardlink" else set()))


@pytest.mark.parametrize("how", ["output", "summary"])
def test_q2_refuses_to_overwrite_its_input(tmp_path, how):
    src = tmp_path / "x.csv"
    src.write_bytes(ROW)
    args = ["q2", src, "-o", src] if how == "output" else ["q2", src, "-o", tmp_path / "o.jsonl", "--summary", src]
    proc = _cli(args, tmp_path)
    _assert_clean_error(proc, "refusing to write there")
    assert src.read_bytes() == ROW
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.csv"]  # no home: nothing was loaded


def test_output_and_summary_must_differ(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(ITEM)
    proc = _cli(["score", src, "-o", tmp_path / "o.jsonl", "--summary", tmp_path / "o.jsonl"], tmp_path)
    _assert_clean_error(proc, "the output and the summary would be the same file")


# ---- outputs that cannot be written ----------------------------------------------------------
@pytest.mark.parametrize("command", ["score", "q2"])
def test_output_that_is_a_directory_fails_before_any_work(tmp_path, command):
    src = tmp_path / ("in.jsonl" if command == "score" else "in.csv")
    src.write_bytes(ITEM.encode() if command == "score" else ROW)
    outdir = tmp_path / "outdir"
    outdir.mkdir()
    proc = _cli([command, src, "-o", outdir], tmp_path)
    _assert_clean_error(proc, f"{outdir}: is a directory")
    assert list(outdir.iterdir()) == [] and not (tmp_path / "outdir.partial").exists()
    assert not (tmp_path / "home").exists()  # no model or cache was touched


def test_output_under_a_file_fails_before_any_work(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(ITEM)
    (tmp_path / "afile").write_text("x")
    proc = _cli(["score", src, "-o", tmp_path / "afile" / "out.jsonl"], tmp_path)
    _assert_clean_error(proc, "out.jsonl", "is not a folder")


def test_unwritable_folder_is_reported_with_its_path(tmp_path, monkeypatch):
    """The probe is a real file creation; a folder that refuses it is an OutputError naming it."""
    import fscore_lite.io as io

    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() != 0:  # a real read-only folder (root may write anywhere, so also simulate it)
        ro.chmod(0o500)
        try:
            with pytest.raises(OutputError, match="cannot write in"):
                check_writable_outputs([ro / "out.jsonl"])
        finally:
            ro.chmod(0o700)

    def refuse(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(io.tempfile, "mkstemp", refuse)
    with pytest.raises(OutputError) as e:
        check_writable_outputs([ro / "out.jsonl"])
    assert f"{ro / 'out.jsonl'}: cannot write in {ro} (Permission denied)" == str(e.value)


# ---- a write failure in the middle of a run --------------------------------------------------
class FakeStats:
    calls = cached_calls = tokens_evaluated = tokens_reused = tokens_generated = 0


class FakeScorer:
    """Stands in for FactScorer's models: every item gets one supported fact (the summary is FactScorer's)."""

    summary = FactScorer.summary
    run_share = None  # counts decisions: no run share is estimated

    def __init__(self):
        from fscore_lite.cache import CallCache
        from fscore_lite.factscore.pipeline import ScoreOptions, Timings
        from fscore_lite.settings import Settings

        self.timings, self.cache = Timings(), CallCache(None)
        self.options, self.settings = ScoreOptions(progress=False), Settings(threads=1, store=Path("a-store"))
        self.llm = type("L", (), {"sha256": "l" * 64, "stats": FakeStats()})()
        self.store = type("S", (), {"sha256": "s" * 64})()
        self.retriever = type("R", (), {"has_topic": staticmethod(lambda topic: True)})()  # every topic known
        self._llm, self.llm_loaded = self.llm, True
        self.scored: list[int] = []

    def describe(self):
        return {"settings": {"threads": 1}}

    def priors(self):
        return None

    def identity(self):
        return {"settings": {"threads": 1}, "llm": self.llm.sha256, "store": self.store.sha256}

    def score_item(self, item, progress=None):
        self.scored.append(item.line)
        if item.problem:  # as FactScorer does
            return dict(item.data, status=item.problem[0], error=item.problem[1], score=None, decisions=None)
        return dict(item.data, status="ok", score=1.0, init_score=1.0, num_facts=1,
                    decisions=[{"atom": "x", "is_supported": True}])


def test_disk_full_at_the_end_exits_cleanly_and_resumes_without_redoing(tmp_path, monkeypatch):
    from fscore_lite.factscore.pipeline import ScoreOptions, score_file

    src = tmp_path / "in.jsonl"
    src.write_text(ITEM + json.dumps({"topic": "B", "output": "B is a town."}) + "\n")
    out = tmp_path / "out" / "o.jsonl"
    real_replace = os.replace

    def full_disk(a, b, *args, **kw):
        if Path(b) == out:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(a, b, *args, **kw)

    monkeypatch.setattr(os, "replace", full_disk)
    first = FakeScorer()
    with pytest.raises(OutputError) as e:
        score_file(src, out, options=ScoreOptions(progress=False), scorer=first)
    msg = str(e.value)
    assert f"cannot write {out}: No space left on device" in msg and "--resume" in msg
    assert first.scored == [1, 2] and not out.exists()
    partial = out.with_name("o.jsonl.partial")
    assert [json.loads(x)["_line"] for x in partial.read_text().splitlines()[1:]] == [1, 2]
    assert not list(out.parent.glob(".o.jsonl.*.tmp"))  # no temporary file left behind

    monkeypatch.setattr(os, "replace", real_replace)
    again = FakeScorer()
    summary = score_file(src, out, options=ScoreOptions(progress=False), scorer=again, resume=True)
    assert again.scored == [] and summary["timings"]["items_resumed"] == 2
    assert [json.loads(x)["topic"] for x in out.read_text().splitlines()] == ["Ann Lee", "B"]
    assert not partial.exists() and summary_path_for(out).exists()


def test_write_failure_while_appending_names_the_partial_file(tmp_path, monkeypatch):
    from fscore_lite.io import ResumableJsonlWriter

    w = ResumableJsonlWriter(tmp_path / "o.jsonl")
    w.add(1, {"a": 1})

    def fail(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OutputError) as e:
        w.add(2, {"a": 2})
    assert f"cannot write {w.partial}: No space left on device" in str(e.value)
    assert "1 finished item(s) are kept" in str(e.value)
    assert not w.done(2) and w.done(1)
    w.close()


# ---- inputs ------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["score", "q2"])
def test_input_that_is_a_directory(tmp_path, command):
    d = tmp_path / ("in.jsonl" if command == "score" else "in.csv")
    d.mkdir()
    proc = _cli([command, d, "-o", tmp_path / "o.jsonl"], tmp_path)
    _assert_clean_error(proc, f"{d}: is a directory, not an input file")


def test_utf8_bom_is_accepted_in_jsonl_and_csv(tmp_path):
    from fscore_lite.factscore.pipeline import load_items
    from fscore_lite.q2.pipeline import read_q2_rows

    j = tmp_path / "in.jsonl"
    j.write_bytes(b"\xef\xbb\xbf" + ITEM.encode())
    (item,) = load_items(j)
    assert item.topic == "Ann Lee" and item.line == 1
    c = tmp_path / "in.csv"
    c.write_bytes(b"\xef\xbb\xbf" + ROW)
    (rec,) = read_q2_rows(c)
    assert list(rec.data) == ["response", "knowledge"] and rec.data["response"] == "The tower is in Paris."
    assert [r.data for r in read_csv_rows(c)] == [rec.data]


def test_malformed_json_reports_the_real_column(tmp_path):
    p = tmp_path / "in.jsonl"
    line2 = '{"topic": "B", "output": '
    p.write_text(ITEM + line2 + "\n")
    with pytest.raises(InputError) as e:
        list(read_jsonl(p))
    assert str(e.value) == f"{p}:2: malformed JSON: Expecting value at column {len(line2) + 1} (end of line)"
    p.write_text('{"topic": "B" "output": "x"}\r\n')  # a missing comma in the middle
    with pytest.raises(InputError) as e:
        list(read_jsonl(p))
    assert str(e.value) == f"{p}:1: malformed JSON: Expecting ',' delimiter at column 15"


# ---- settings ----------------------------------------------------------------------------------
@pytest.mark.parametrize("value,expected", [("abc", "FSCORE_LITE_THREADS must be a whole number"),
                                            ("0", "FSCORE_LITE_THREADS must be 1 or more, not 0")])
def test_threads_environment_variable_is_checked(tmp_path, value, expected):
    src = tmp_path / "in.jsonl"
    src.write_text(ITEM)
    proc = _cli(["score", src], tmp_path, env_extra={"FSCORE_LITE_THREADS": value})
    _assert_clean_error(proc, expected)


@pytest.mark.parametrize("command", ["score", "q2"])
@pytest.mark.parametrize("threads", ["0", "-1"])
def test_threads_flag_must_be_at_least_one(tmp_path, command, threads):
    src = tmp_path / "in.jsonl"
    src.write_text(ITEM if command == "score" else json.dumps({"response": "a", "knowledge": "b"}) + "\n")
    proc = _cli([command, src, "--threads", threads], tmp_path)
    _assert_clean_error(proc, f"--threads must be 1 or more, not {threads}")


def test_settings_keep_the_threads_that_run():
    from fscore_lite.settings import Settings

    assert Settings(threads=3).threads == 3 and Settings(threads=3).with_(threads=2).threads == 2
    for bad in (0, -1, 1.5):
        with pytest.raises(FscoreError):
            Settings(threads=bad)


# ---- options and conventions -------------------------------------------------------------------
def test_max_output_chars_option_exists_and_reaches_the_options(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(ITEM)
    proc = _cli(["score", src, "--max-output-chars", "0"], tmp_path)
    _assert_clean_error(proc, "--max-output-chars must be 1 or more, not 0")
    from fscore_lite.factscore.pipeline import ScoreOptions, score_file

    summary = score_file(src, tmp_path / "o.jsonl", options=ScoreOptions(progress=False, max_output_chars=10),
                         scorer=FakeScorer())
    assert summary["status_counts"] == {"output_too_long": 1}
    (item,) = [json.loads(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert "over the limit of 10 (--max-output-chars)" in item["error"]


def test_score_and_q2_share_the_summary_convention(tmp_path):
    from fscore_lite.q2.pipeline import run_q2

    assert summary_path_for(Path("out/run.jsonl")) == Path("out/run.summary.json")
    assert summary_path_for(Path("out/run.json")) == Path("out/run.json.summary.json")

    from fscore_lite.cache import CallCache
    from fscore_lite.q2.pipeline import Q2Scorer
    from fscore_lite.q2.score import StageTimer

    class FakeQ2:
        cache, timer, summary = CallCache(None), StageTimer(), Q2Scorer.summary

        def identity(self):
            return {}

        def describe(self):
            return {}

        def score_item(self, row, progress=None):
            return {**row.data, "status": "ok", "Q2": 1.0, "Q2_no_nli": 1.0, "no_valid_question": False, "questions": []}

    src = tmp_path / "in.csv"
    src.write_bytes(ROW)
    run_q2(src, tmp_path / "q.jsonl", scorer=FakeQ2(), progress=False)
    assert (tmp_path / "q.summary.json").exists() and not (tmp_path / "q.jsonl.summary.json").exists()
