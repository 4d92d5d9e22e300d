"""The probe battery of issue 22: bad inputs, outputs, settings, corrupted cache / store /
manifest, concurrent runs, each run as a user would (``python -m fscore_lite ...`` in a fresh
home with no models). Every probe must end in its expected exit status and message, never in a
traceback, and must leave the files it should not touch as they were.

``python -m tests.test_reliability_probes`` runs the battery and prints the table that
docs/RELIABILITY.md keeps (probe, command, exit status, first line of the message).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

REPO = Path(__file__).resolve().parent.parent
ITEM = {"topic": "Ann Lee", "facts": ["Ann Lee is a painter."]}
RUN_RECORD = {"topic": "Ann Lee", "status": "ok", "score": 1.0, "init_score": 1.0, "num_facts": 1,
              "decisions": [{"atom": "Ann Lee is a painter.", "is_supported": True}]}


@dataclass
class Probe:
    name: str
    args: list[str]  # "{d}" stands for the probe's folder
    rc: int
    expect: str  # in stderr (an error) or stdout (rc 0)
    setup: Callable[[Path], None] = lambda d: None
    env: dict = field(default_factory=dict)
    unchanged: tuple[str, ...] = ()  # files (in {d}) that must keep their bytes
    absent: tuple[str, ...] = ()  # files that must not exist afterwards


def _w(name: str, data: bytes | str) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        (d / name).write_bytes(data.encode() if isinstance(data, str) else data)
    return setup


def _all(*steps) -> Callable[[Path], None]:
    return lambda d: [s(d) for s in steps]


def _mkdir(name: str) -> Callable[[Path], None]:
    return lambda d: (d / name).mkdir(parents=True)


def _symlink(name: str, target: str) -> Callable[[Path], None]:
    return lambda d: (d / name).symlink_to(target)


def _fifo(name: str, data: str) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        os.mkfifo(d / name)
        # a writer that feeds the pipe once, then exits (a second open would wait forever)
        subprocess.Popen([sys.executable, "-c", f"open({str(d / name)!r}, 'w').write({data!r})"])
    return setup


GOOD = json.dumps(ITEM) + "\n"
RUN = _all(_w("run.jsonl", json.dumps(RUN_RECORD) + "\n"), _w("run.summary.json", '{"num_items": 1}\n'))
MANIFEST_EDITED = "models/manifest.json"


def _edited_intercept(d: Path) -> None:
    from fscore_lite.manifest import Bundle, ModelEntry, describe_file, stamp_decisions

    root = d / "home" / "models"
    (root / "v").mkdir(parents=True)
    (root / "v" / "w.onnx").write_bytes(b"weights")
    b = Bundle(root)
    b.add(ModelEntry("verifier-x", "verifier", "ce", (describe_file(root, "v/w.onnx", "weights"),),
                     extra=stamp_decisions({"combiner": {"weights": [1.0], "intercept": -2.0, "threshold": 0.5}})))
    b.save()
    data = json.loads((root / "manifest.json").read_text())
    data["models"][0]["extra"]["combiner"]["intercept"] = -1.5
    (root / "manifest.json").write_text(json.dumps(data))


def _deleted_decisions_key(d: Path) -> None:
    """The intercept edited and the decisions_sha256 key deleted, as a hand edit would."""
    _edited_intercept(d)
    path = d / "home" / "models" / "manifest.json"
    data = json.loads(path.read_text())
    del data["models"][0]["extra"]["decisions_sha256"]
    path.write_text(json.dumps(data))


def _store_garbage(d: Path) -> None:
    (d / "store").mkdir()
    for name in ("manifest.json", "passages.sqlite", "vectors.npy"):
        (d / "store" / name).write_bytes(b"\x00garbage" * 50)


PROBES = [
    # ---- inputs
    Probe("bad JSON", ["score", "{d}/in.jsonl", "-o", "{d}/o.jsonl"], 2, "in.jsonl:2: malformed JSON",
          _w("in.jsonl", GOOD + '{"topic": "x",\n'), absent=("o.jsonl", "o.jsonl.partial")),
    Probe("unterminated string (no 'at at', not cut off)", ["score", "{d}/in.jsonl"], 2,
          "in.jsonl:1: malformed JSON: Unterminated string starting at column 11",
          _w("in.jsonl", '{"topic": "abc\n')),
    Probe("report of a run with a cut line", ["report", "{d}/run.jsonl", "-o", "{d}/r.html"], 2,
          "run.jsonl:1: not JSON (Unterminated string starting at column 11)", _w("run.jsonl", '{"topic": "abc\n')),
    Probe("non-UTF-8 bytes", ["score", "{d}/in.jsonl"], 2, "in.jsonl:1: not valid UTF-8",
          _w("in.jsonl", b'{"topic": "\xff"}\n')),
    Probe("empty input", ["score", "{d}/in.jsonl"], 2, "no input items", _w("in.jsonl", "")),
    Probe("input is a folder", ["score", "{d}/in.jsonl"], 2, "is a directory, not an input file",
          _mkdir("in.jsonl")),
    Probe("missing input", ["score", "{d}/nope.jsonl"], 2, "nope.jsonl: file not found"),
    Probe("JSON array line", ["score", "{d}/in.jsonl"], 2, "in.jsonl:1: expected a JSON object, got list",
          _w("in.jsonl", "[1, 2]\n")),
    Probe("facts not a list", ["score", "{d}/in.jsonl"], 2, "in.jsonl:1: field 'facts' must be a list of strings",
          _w("in.jsonl", '{"topic": "A", "facts": "x"}\n')),
    Probe("lone surrogate in a fact", ["score", "{d}/in.jsonl", "-o", "{d}/o.jsonl"], 2,
          "in.jsonl:2: field 'facts' contains a lone surrogate",
          _w("in.jsonl", GOOD + '{"topic": "B", "facts": ["\\ud800"]}\n'), absent=("o.jsonl", "o.jsonl.partial")),
    Probe("lone surrogate in an extra field", ["score", "{d}/in.jsonl"], 2, "in.jsonl:1: field 'note' contains",
          _w("in.jsonl", '{"topic": "B", "facts": [], "note": "\\udfff"}\n')),
    Probe("NaN in an input field", ["score", "{d}/in.jsonl"], 2, "in.jsonl:1: the number NaN is not finite",
          _w("in.jsonl", '{"topic": "B", "facts": [], "w": NaN}\n')),
    Probe("1e999 in an input field", ["q2", "{d}/in.jsonl"], 2, "in.jsonl:1: the number 1e999 is not finite",
          _w("in.jsonl", '{"response": "a", "knowledge": "b", "w": 1e999}\n')),
    Probe("CSV unterminated quote", ["q2", "{d}/in.csv", "-o", "{d}/o.jsonl"], 2,
          "in.csv:3: malformed CSV: a quoted field starts on this line and is never closed",
          _w("in.csv", 'response,knowledge\na,b\nc,"d\ne,f\n'), absent=("o.jsonl",)),
    Probe("CSV extra field", ["q2", "{d}/in.csv"], 2, "in.csv:2: row has more fields than the header",
          _w("in.csv", "response,knowledge\na,b,c\n")),
    Probe("CSV non-UTF-8", ["q2", "{d}/in.csv"], 2, "in.csv:3: not valid UTF-8",
          _w("in.csv", b"response,knowledge\na,b\n\xff,c\n")),
    Probe("FIFO input (read once)", ["score", "{d}/in.fifo", "-o", "{d}/o.jsonl"], 2,
          "passage store",  # read, checked, then stops at the missing store: no hang
          _fifo("in.fifo", GOOD)),
    # ---- outputs
    Probe("-o is the input", ["score", "{d}/in.jsonl", "-o", "{d}/./in.jsonl"], 2, "it is the input file",
          _w("in.jsonl", GOOD), unchanged=("in.jsonl",)),
    Probe("-o is a folder", ["score", "{d}/in.jsonl", "-o", "{d}/out"], 2, "is a directory",
          _all(_w("in.jsonl", GOOD), _mkdir("out"))),
    Probe("-o under a file", ["score", "{d}/in.jsonl", "-o", "{d}/in.jsonl/o.jsonl"], 2, "is not a folder",
          _w("in.jsonl", GOOD), unchanged=("in.jsonl",)),
    Probe("output held by another run", ["score", "{d}/in.jsonl", "-o", "{d}/o.jsonl"], 2,
          "o.jsonl: another run (process", _w("in.jsonl", GOOD), unchanged=("o.jsonl.partial",)),
    # -o naming a run another way: ./run.jsonl (what refuses it refuses a plain run.jsonl too), a symlink
    Probe("report -o ./its run", ["report", "{d}/run.jsonl", "-o", "{d}/./run.jsonl"], 2,
          "refusing to write the report there", RUN, unchanged=("run.jsonl", "run.summary.json")),
    Probe("report -o a link to its run", ["report", "{d}/run.jsonl", "-o", "{d}/link.jsonl"], 2,
          "refusing to write the report there", _all(RUN, _symlink("link.jsonl", "run.jsonl")),
          unchanged=("run.jsonl", "run.summary.json")),
    Probe("report -o the run's summary", ["report", "{d}/run.jsonl", "-o", "{d}/run.summary.json"], 2,
          "the summary of", RUN, unchanged=("run.summary.json",)),
    Probe("report -o /dev/null", ["report", "{d}/run.jsonl", "-o", "/dev/null"], 2, "/dev/null: refusing to write "
          "there: it is a device", RUN),
    Probe("report DIR", ["report", "{d}/runs"], 2, "runs: is a directory", _mkdir("runs")),
    Probe("report --bootstrap 0", ["report", "{d}/run.jsonl", "--bootstrap", "0", "-o", "{d}/r.html"], 2,
          "--bootstrap must be 1 or more", RUN, absent=("r.html",)),
    Probe("report --bootstrap -5", ["report", "{d}/run.jsonl", "--bootstrap", "-5", "-o", "{d}/r.html"], 2,
          "--bootstrap must be 1 or more", RUN),
    Probe("report of a non-run", ["report", "{d}/in.jsonl", "-o", "{d}/r.html"], 2,
          "neither `score` output", _w("in.jsonl", GOOD)),
    Probe("report of a run with NaN", ["report", "{d}/nan.jsonl", "-o", "{d}/r.html"], 2,
          "nan.jsonl:1: the number NaN is not JSON", _w("nan.jsonl", '{"init_score": NaN, "decisions": []}\n'),
          absent=("r.html",)),
    Probe("report ok", ["report", "{d}/run.jsonl", "-o", "{d}/r.html", "--bootstrap", "10"], 0, "r.html", RUN),
    # one rule for every output: never an input (nor the output's lock file), a lock, a store's or the
    # bundle's file, a device, a FIFO or a symlink; finished work in OUT.partial needs --resume or --force
    Probe("input is the output's lock file", ["score", "{d}/x/r.jsonl.lock", "-o", "{d}/x/r.jsonl"], 2,
          "its lock file", _all(_mkdir("x"), _w("x/r.jsonl.lock", GOOD)), unchanged=("x/r.jsonl.lock",)),
    Probe("input is the summary's lock file", ["score", "{d}/x/r2.summary.json.lock", "-o", "{d}/x/r2.jsonl"], 2,
          "its lock file", _all(_mkdir("x"), _w("x/r2.summary.json.lock", GOOD)),
          unchanged=("x/r2.summary.json.lock",)),
    Probe("-o a .lock file", ["score", "{d}/in.jsonl", "-o", "{d}/x/o.lock"], 2, "a .lock file is how runs",
          _w("in.jsonl", GOOD), absent=("x/o.lock",)),
    Probe("-o /dev/null", ["score", "{d}/in.jsonl", "-o", "/dev/null"], 2, "/dev/null: refusing to write there: "
          "it is a device", _w("in.jsonl", GOOD)),
    Probe("-o the store's database", ["score", "{d}/in.jsonl", "-o", "{d}/st/store.sqlite", "--store", "{d}/st"], 2,
          "it is inside", _all(_w("in.jsonl", GOOD), _mkdir("st"), _w("st/store.sqlite", "db")),
          unchanged=("st/store.sqlite",)),
    Probe("-o in the model bundle", ["q2", "{d}/in.jsonl", "-o", "{d}/home/models/manifest.json"], 2,
          "it is inside", _all(_w("in.jsonl", '{"response": "a", "knowledge": "b"}\n'), _mkdir("home/models"),
                               _w("home/models/manifest.json", '{"models": []}')),
          unchanged=("home/models/manifest.json",)),
    Probe("-o a FIFO", ["score", "{d}/in.jsonl", "-o", "{d}/o.fifo"], 2, "it is a named pipe (FIFO)",
          _all(_w("in.jsonl", GOOD), lambda d: os.mkfifo(d / "o.fifo"))),
    Probe("-o a symlink", ["score", "{d}/in.jsonl", "-o", "{d}/o.jsonl"], 2, "it is a symbolic link",
          _all(_w("in.jsonl", GOOD), _w("real.jsonl", "keep\n"), _symlink("o.jsonl", "real.jsonl")),
          unchanged=("real.jsonl",)),
    Probe("finished items in OUT.partial, no --resume", ["score", "{d}/in.jsonl", "-o", "{d}/o.jsonl"], 2,
          "holds 1 finished item(s) of an earlier run",
          _all(_w("in.jsonl", GOOD), _w("o.jsonl.partial", '{"_run": "k"}\n{"_line": 1, "item": {}}\n')),
          unchanged=("o.jsonl.partial",)),
    Probe("finished items in OUT.partial, --force", ["score", "{d}/in.jsonl", "-o", "{d}/o.jsonl", "--force"], 2,
          "passage store",  # the earlier items may be discarded: the run goes on to the missing store
          _all(_w("in.jsonl", GOOD), _w("o.jsonl.partial", '{"_run": "k"}\n{"_line": 1, "item": {}}\n'))),
    Probe("/dev/stdin without -o", ["score", "/dev/stdin"], 2, "give the output with -o"),
    Probe("score -", ["score", "-"], 2, "'-' is not a file name here; to read standard input, give /dev/stdin"),
    Probe("kb build --force over a store holding the input", ["kb", "build", "{d}/st/pages.jsonl", "-o", "{d}/st",
          "--force"], 2, "is inside it, and replacing the folder would delete the input",
          _all(_mkdir("st"), _w("st/manifest.json", "{}"), _w("st/pages.jsonl", '{"title": "A", "text": "a"}\n')),
          unchanged=("st/pages.jsonl", "st/manifest.json")),
    # input limits, read as a stream; CSV headers
    Probe("score /dev/zero", ["score", "/dev/zero", "-o", "{d}/o.jsonl"], 2,
          "/dev/zero:1: line is longer than the 16777216 byte limit", absent=("o.jsonl",)),
    Probe("100,000-deep nested array", ["score", "{d}/in.jsonl"], 2, "in.jsonl:1: JSON nested too deeply",
          _w("in.jsonl", '{"topic": "A", "facts": ' + "[" * 100_000 + "]" * 100_000 + "}\n")),
    Probe("5,000-digit integer: score", ["score", "{d}/in.jsonl"], 2, "in.jsonl:1: a number of 5000 digits",
          _w("in.jsonl", '{"topic": "A", "facts": [], "n": ' + "7" * 5000 + "}\n")),
    Probe("5,000-digit integer: q2", ["q2", "{d}/in.jsonl"], 2, "in.jsonl:1: a number of 5000 digits",
          _w("in.jsonl", '{"response": "a", "knowledge": "b", "n": -' + "7" * 5000 + "}\n")),
    Probe("CSV duplicate header column", ["q2", "{d}/in.csv", "-o", "{d}/o.jsonl"], 2,
          "in.csv:1: the header names the column(s) 'response' more than once",
          _w("in.csv", "response,response,knowledge\na,b,c\n"), absent=("o.jsonl",)),
    Probe("CSV short row", ["q2", "{d}/in.csv"], 2, "in.csv:3: row has 1 field(s), fewer than the header's 2",
          _w("in.csv", "response,knowledge\na,b\nc\n")),
    Probe("CSV without a knowledge column", ["q2", "{d}/in.csv"], 2, "in.csv:1: the header has no column 'knowledge'",
          _w("in.csv", "response,extra\na,b\n")),
    Probe("kb build -o under a file", ["kb", "build", "{d}/pages.jsonl", "-o", "{d}/afile/store"], 2,
          "afile is a file, not a folder", _all(_w("pages.jsonl", '{"title": "A", "text": "a"}\n'), _w("afile", "x")),
          unchanged=("afile",)),
    # ---- settings
    Probe("--k 0", ["score", "{d}/in.jsonl", "--k", "0"], 2, "--k must be a whole number of passages, 1 or more",
          _w("in.jsonl", GOOD)),
    Probe("--k -1", ["score", "{d}/in.jsonl", "--k", "-1"], 2, "--k must be", _w("in.jsonl", GOOD)),
    Probe("--gamma nan", ["score", "{d}/in.jsonl", "--gamma", "nan"], 2, "--gamma must be a finite number",
          _w("in.jsonl", GOOD)),
    Probe("--gamma -5", ["score", "{d}/in.jsonl", "--gamma", "-5"], 2, "--gamma must be", _w("in.jsonl", GOOD)),
    Probe("--gamma inf", ["score", "{d}/in.jsonl", "--gamma", "inf"], 2, "--gamma must be", _w("in.jsonl", GOOD)),
    Probe("--context-budget 0", ["score", "{d}/in.jsonl", "--context-budget", "0"], 2,
          "--context-budget must be 1 or more", _w("in.jsonl", GOOD)),
    Probe("--parallel 4", ["score", "{d}/in.jsonl", "--parallel", "4"], 2, "--parallel must be 1 to 3, not 4",
          _w("in.jsonl", GOOD)),
    Probe("--parallel 0", ["score", "{d}/in.jsonl", "--parallel", "0"], 2, "--parallel must be 1 to 3",
          _w("in.jsonl", GOOD)),
    Probe("--threads 0", ["score", "{d}/in.jsonl", "--threads", "0"], 2, "--threads must be 1 or more",
          _w("in.jsonl", GOOD)),
    Probe("--threads 2**40", ["score", "{d}/in.jsonl", "--threads", "1099511627776"], 2,
          "--threads must be at most 1024", _w("in.jsonl", GOOD)),
    Probe("FSCORE_LITE_THREADS=99999", ["score", "{d}/in.jsonl"], 2, "FSCORE_LITE_THREADS must be at most 1024",
          _w("in.jsonl", GOOD), env={"FSCORE_LITE_THREADS": "99999"}),
    Probe("--n-ctx -1", ["score", "{d}/in.jsonl", "--n-ctx", "-1"], 2, "--n-ctx must be a whole number of tokens "
          "from 64", _w("in.jsonl", GOOD)),
    Probe("--n-ctx 0 (before any model)", ["score", "{d}/in.jsonl", "--n-ctx", "0"], 2, "--n-ctx must be",
          _w("in.jsonl", GOOD)),
    Probe("--k 100000", ["score", "{d}/in.jsonl", "--k", "100000"], 2, "--k must be at most 1000",
          _w("in.jsonl", GOOD)),
    Probe("--gamma 1e300", ["score", "{d}/in.jsonl", "--gamma", "1e300"], 2, "--gamma must be at most",
          _w("in.jsonl", GOOD)),
    Probe("--context-budget 10**9", ["score", "{d}/in.jsonl", "--context-budget", "1000000000"], 2,
          "--context-budget must be at most 131072", _w("in.jsonl", GOOD)),
    Probe("report --bootstrap 100000000", ["report", "{d}/run.jsonl", "--bootstrap", "100000000", "-o",
          "{d}/r.html"], 2, "--bootstrap must be 1 or more resamples, at most 100000", RUN, absent=("r.html",)),
    Probe("report --position-bins 100000000", ["report", "{d}/run.jsonl", "--position-bins", "100000000", "-o",
          "{d}/r.html"], 2, "--position-bins must be 1 or more, at most 1000", RUN, absent=("r.html",)),
    Probe("FSCORE_LITE_THREADS=abc", ["score", "{d}/in.jsonl"], 2, "FSCORE_LITE_THREADS must be a whole number",
          _w("in.jsonl", GOOD), env={"FSCORE_LITE_THREADS": "abc"}),
    Probe("FSCORE_LITE_THREADS=abc with --threads", ["score", "{d}/in.jsonl", "--threads", "1"], 2,
          "passage store",  # the variable is not read; the run stops later, at the missing store
          _w("in.jsonl", GOOD), env={"FSCORE_LITE_THREADS": "abc"}),
    Probe("doctor with FSCORE_LITE_THREADS=abc", ["doctor"], 0, "FSCORE_LITE_THREADS must be a whole number",
          env={"FSCORE_LITE_THREADS": "abc"}),
    Probe("cache info with FSCORE_LITE_THREADS=abc", ["cache", "info"], 0, '"exists": false',
          env={"FSCORE_LITE_THREADS": "abc"}),
    Probe("--mode bogus", ["score", "{d}/in.jsonl", "--mode", "x"], 2, "--mode must be one of parity, shared-context",
          _w("in.jsonl", GOOD)),
    # ---- corrupted cache, store, manifest
    Probe("damaged cache: doctor", ["doctor"], 0, "the call cache", _all(_mkdir("home"), _w("home/calls.sqlite",
                                                                                            b"garbage" * 100))),
    Probe("damaged cache: cache info", ["cache", "info"], 2, "--no-cache",
          _all(_mkdir("home"), _w("home/calls.sqlite", b"garbage" * 100))),
    Probe("damaged cache: cache prune", ["cache", "prune", "--older-than", "0"], 2, "aside",
          _all(_mkdir("home"), _w("home/calls.sqlite", b"garbage" * 100)), unchanged=("home/calls.sqlite",)),
    Probe("cache is a folder", ["cache", "info"], 2, "it is a folder", _mkdir("home/calls.sqlite")),
    Probe("damaged manifest: score", ["score", "{d}/in.jsonl"], 2, "manifest.json is damaged",
          _all(_w("in.jsonl", GOOD), _mkdir("home/models"), _w("home/models/manifest.json", "garbage"))),
    Probe("damaged manifest: models verify", ["models", "verify"], 2, "is damaged",
          _all(_mkdir("home/models"), _w("home/models/manifest.json", '{"models": [{"name": 1}]}'))),
    Probe("damaged manifest: doctor", ["doctor"], 0, "is damaged",
          _all(_mkdir("home/models"), _w("home/models/manifest.json", "[1]"))),
    Probe("hand-edited intercept: models verify", ["models", "verify"], 1, "changed after the build",
          _edited_intercept),
    Probe("decisions_sha256 deleted: models verify", ["models", "verify"], 1, "holds decision settings (combiner, "
          "calibration, threshold) but no 'decisions_sha256'", _deleted_decisions_key),
    Probe("garbage store: kb verify", ["kb", "verify", "{d}/store"], 2, "store", _store_garbage),
    Probe("garbage store: score", ["score", "{d}/in.jsonl", "--store", "{d}/store"], 2, "store",
          _all(_w("in.jsonl", GOOD), _store_garbage)),
]


def _hold_output(d: Path):
    """A process that holds {d}/o.jsonl as a running `score` does (its lock); returns it."""
    code = ("import sys, time; from fscore_lite.io import ResumableJsonlWriter as W; "
            f"w = W({str(d / 'o.jsonl')!r}, run_key='first'); print('held', flush=True); time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    assert child.stdout.readline().strip() == "held"
    return child


def run_probe(p: Probe, d: Path) -> tuple[subprocess.CompletedProcess, str, dict]:
    p.setup(d)
    before = {f: (d / f).read_bytes() for f in p.unchanged if (d / f).is_file()}
    env = dict(os.environ, FSCORE_LITE_HOME=str(d / "home"), FSCORE_LITE_THREADS="1")
    env.pop("FSCORE_LITE_STORE", None)
    env.pop("FSCORE_LITE_MODELS", None)
    env.update(p.env)
    holder = _hold_output(d) if p.name == "output held by another run" else None
    if holder:
        before["o.jsonl.partial"] = (d / "o.jsonl.partial").read_bytes()
    args = [a.replace("{d}", str(d)) for a in p.args]
    try:
        proc = subprocess.run([sys.executable, "-m", "fscore_lite", *args], capture_output=True, text=True,
                              env=env, timeout=120, cwd=d)
    finally:
        if holder:
            holder.kill()
            holder.wait()
    cmd = "fscore-lite " + " ".join(a.replace(str(d) + "/", "").replace(str(d), ".") for a in p.args
                                    ).replace("{d}/", "").replace("{d}", ".")
    return proc, cmd, before


@pytest.mark.parametrize("probe", PROBES, ids=[p.name for p in PROBES])
def test_probe(tmp_path, probe):
    d = tmp_path
    proc, _, before = run_probe(probe, d)
    out = proc.stderr if probe.rc else proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert proc.returncode == probe.rc, (proc.returncode, proc.stderr)
    if probe.rc == 2:
        assert proc.stderr.startswith("error: "), proc.stderr
    assert probe.expect in out, out
    for f, data in before.items():
        assert (d / f).read_bytes() == data, f"{f} was changed"
    for f in probe.absent:
        assert not (d / f).exists(), f"{f} was written"
    if probe.name != "output held by another run":  # there the holder was killed: its lock file stays, unlocked
        assert not list(d.glob("*.lock")), "a lock file was left behind"


def test_two_real_runs_on_one_output(tmp_path):
    """A `score` run in progress (through the production score_file, with a stand-in scorer that
    waits at its first item until the test lets it go on) and a second `score` started on the
    same -o: the second stops at once naming the first's process; the first then finishes with
    its own items only."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps({"topic": f"A{i}", "facts": ["x"]}) + "\n" for i in range(3)))
    b.write_text("".join(json.dumps({"topic": f"B{i}", "facts": ["x"]}) + "\n" for i in range(3)))
    out, go = tmp_path / "o.jsonl", tmp_path / "go"
    code = ("import os, time, sys; sys.path.insert(0, %r); from tests.test_paths import FakeScorer\n"
            "from fscore_lite.factscore.pipeline import ScoreOptions, score_file\n"
            "class Held(FakeScorer):\n"
            "    def score_item(self, item, progress=None):\n"
            "        print('item', flush=True)\n"
            "        while not os.path.exists(%r): time.sleep(0.05)\n"
            "        return super().score_item(item)\n"
            "score_file(%r, %r, options=ScoreOptions(progress=False), scorer=Held())\n"
            ) % (str(REPO), str(go), str(a), str(out))
    first = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline().strip() == "item"
        env = dict(os.environ, FSCORE_LITE_HOME=str(tmp_path / "home"), FSCORE_LITE_THREADS="1")
        second = subprocess.run([sys.executable, "-m", "fscore_lite", "score", str(b), "-o", str(out)],
                                capture_output=True, text=True, env=env, timeout=120)
        assert second.returncode == 2 and f"another run (process {first.pid})" in second.stderr, second.stderr
    finally:
        go.touch()
        code = first.wait(120)
    assert code == 0
    assert [json.loads(x)["topic"] for x in out.read_text().splitlines()] == ["A0", "A1", "A2"]
    assert not list(tmp_path.glob("*.lock"))


if __name__ == "__main__":  # the table of docs/RELIABILITY.md
    import tempfile

    print("| probe | command | exit | message (first line) |\n|---|---|---|---|")
    for p in PROBES:
        with tempfile.TemporaryDirectory() as t:
            proc, cmd, _ = run_probe(p, Path(t))
            first = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
            msg = next((x for x in first if p.expect in x), first[0] if first else "")
            msg = msg.replace(t + "/", "").replace(t, ".").replace("|", "\\|")
            flag = "" if ("Traceback" not in proc.stderr and proc.returncode == p.rc) else " **UNEXPECTED**"
            print(f"| {p.name} | `{cmd}` | {proc.returncode}{flag} | {msg[:160]} |")
