"""`fscore-lite q2` on the command line: bad input, resume, statuses."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fscore_lite.errors import InputError
from fscore_lite.q2.pipeline import read_q2_rows

CSV_HEAD = b",topic,response,knowledge\n"
CASES = {
    "malformed_json": ("in.jsonl", b'{"response": "a", "knowledge": "b"}\n{"response": "a", \n', ":2: malformed JSON"),
    "missing_knowledge": ("in.jsonl", b'{"response": "a", "knowledge": "b"}\n\n{"response": "c"}\n',
                          ":3: missing required field 'knowledge'"),
    "non_utf8_jsonl": ("in.jsonl", b'{"response": "a", "knowledge": "b"}\n{"response": "caf\xe9", "knowledge": "b"}\n',
                       ":2: not valid UTF-8"),
    "non_utf8_csv": ("in.csv", CSV_HEAD + b'0,A,fine,fine\n1,B,"caf\xe9",k\n', ":3: not valid UTF-8"),
    "missing_knowledge_csv": ("in.csv", b",topic,response\n0,A,fine\n", ":1: the header has no column 'knowledge'"),
    "not_a_string": ("in.jsonl", b'{"response": 3, "knowledge": "b"}\n', ":1: field 'response' must be a string"),
    "empty_file": ("in.jsonl", b"\n", "no input rows"),
}


def _cli(args, home, timeout=300):
    env = dict(os.environ, FSCORE_LITE_HOME=str(home), FSCORE_LITE_THREADS="1")
    return subprocess.run([sys.executable, "-m", "fscore_lite", "q2", *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=timeout)


@pytest.mark.parametrize("case", sorted(CASES))
def test_reader_names_file_and_line(tmp_path, case):
    name, data, expected = CASES[case]
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(InputError) as e:
        read_q2_rows(p)
    assert str(e.value).startswith(str(p)) and expected in str(e.value)


@pytest.mark.parametrize("case", ["malformed_json", "missing_knowledge", "non_utf8_jsonl", "non_utf8_csv"])
def test_cli_bad_input_exits_2_without_output(tmp_path, case):
    name, data, expected = CASES[case]
    p = tmp_path / name
    p.write_bytes(data)
    out = tmp_path / "out.jsonl"
    proc = _cli([p, "-o", out, "-q"], tmp_path / "home")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: ") and f"{p}{expected}" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert list(tmp_path.glob("out.jsonl*")) == []


def test_cli_unknown_backend_is_a_clear_error(tmp_path):
    p = tmp_path / "in.jsonl"
    p.write_text(json.dumps({"response": "a", "knowledge": "b"}) + "\n")
    proc = _cli([p, "-o", tmp_path / "o.jsonl", "--backend", "gpu", "-q"], tmp_path / "home")
    assert proc.returncode == 2 and "--backend must be one of auto, onnx, llm, not 'gpu'" in proc.stderr and "Traceback" not in proc.stderr



def test_cli_unknown_qa_backend_names_the_registered_ones(tmp_path):
    p = tmp_path / "in.jsonl"
    p.write_text(json.dumps({"response": "a", "knowledge": "b"}) + "\n")
    proc = _cli([p, "-o", tmp_path / "o.jsonl", "--qa-backend", "gpu", "-q"], tmp_path / "home")
    assert proc.returncode == 2 and "--qa-backend must be one of onnx, llm, llm-free, not 'gpu'" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "o.jsonl").exists()


ROWS = [
    {"id": "a", "response": "The Eiffel Tower is in Paris.", "knowledge": "The Eiffel Tower is in Paris, France."},
    {"id": "b", "response": "   ", "knowledge": "Gardening is relaxing."},
    {"id": "c", "response": "Marie Curie was born in Warsaw.", "knowledge": "She was born in Warsaw in 1867."},
    {"id": "d", "response": "Albert Einstein developed the theory of relativity.", "knowledge": ""},
    {"id": "e", "response": "She won the Nobel Prize in 1903.", "knowledge": "She won the Nobel Prize in Physics in 1903."},
]


@pytest.mark.export
def test_resume_continues_without_redoing_or_duplicating(tmp_path, tiny_bundle):
    from fscore_lite.errors import FscoreError
    from fscore_lite.q2.pipeline import Q2Scorer, run_q2
    from fscore_lite.q2.score import Q2Options
    from fscore_lite.settings import Settings

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    home = tmp_path / "home"
    common = ["--models-dir", tiny_bundle, "--backend", "onnx", "--threads", "1", "-q"]
    settings = Settings(home=home, threads=1, models_dir=tiny_bundle)
    full = tmp_path / "full.jsonl"
    run_q2(src, full, settings, backend="onnx", progress=False)

    class Interrupted(Q2Scorer):
        def score_item(self, row, progress=None):
            if row.data["id"] == "c":
                raise KeyboardInterrupt
            return super().score_item(row, progress)

    out = tmp_path / "out.jsonl"
    with pytest.raises(KeyboardInterrupt):
        run_q2(src, out, settings, backend="onnx", progress=False,
               scorer=Interrupted(settings, backend="onnx"))
    assert not out.exists()  # only the partial file, with the two finished items
    partial = (tmp_path / "out.jsonl.partial").read_text().splitlines()
    assert [json.loads(x)["item"]["id"] for x in partial[1:]] == ["a", "b"]

    with pytest.raises(FscoreError, match="other settings"):  # a resume must not mix settings
        run_q2(src, out, settings, backend="onnx", resume=True, progress=False, options=Q2Options(questions="multi"))

    proc = _cli([src, "-o", out, *common, "--resume"], home)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == full.read_bytes()  # same bytes, no duplicates, input order
    assert not (tmp_path / "out.jsonl.partial").exists()
    summary = json.loads((tmp_path / "out.summary.json").read_text())  # OUT.summary.json, as for score
    assert summary["timings"]["items_resumed"] == 2 and summary["num_items"] == 5
    items = [json.loads(x) for x in out.read_text().splitlines()]
    assert [it["status"] for it in items] == ["ok", "empty_response", "ok", "empty_knowledge", "ok"]
    assert summary["status_counts"] == {"ok": 3, "empty_response": 1, "empty_knowledge": 1}
    assert all(not ({"timings", "seconds", "elapsed"} & set(it)) for it in items)  # timings only in the summary
