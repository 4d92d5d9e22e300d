"""Q² over a file: read and check every row, score, write JSONL + summary, resume.

Input: a Q² CSV file or JSONL with the string fields ``response`` and ``knowledge`` (other
fields are carried through). All rows are read and checked before anything is written, so
bad input (a malformed line, a missing field, undecodable bytes) fails with file:line and
leaves no output behind. A row with an empty response or knowledge is not an error: its
item gets ``status`` "empty_response" / "empty_knowledge" and no score.

Output: one JSON line per row, in input order, with the scores and every step, and nothing
that varies between runs (timings go to the summary), so two runs are byte-identical.
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from ..backends.onnx_session import session_spin
from ..cache import CallCache
from ..distributed import LocalExecutor
from ..errors import InputError
from ..io import ResumableJsonlWriter, atomic_write_json, check_writable_outputs, read_records, require_text
from ..io import summary_path_for
from ..progress import Progress  # noqa: F401  (also imported from here by the Q² meta-eval)
from ..settings import Settings
from .score import STAGES, Q2Options, StageTimer, e2e_nli_score, score_response

RESULT_KEYS = ("status", "Q2", "Q2_no_nli", "no_valid_question", "fallback", "candidates", "questions")


def read_q2_rows(path) -> list:
    """All records of ``path`` with ``response`` and ``knowledge`` checked (InputError on bad input)."""
    if str(path).lower().endswith(".csv") and Path(path).is_file():
        _check_utf8(path)
    records = list(read_records(path))
    if not records:
        raise InputError(path, None, "no input rows")
    for rec in records:
        require_text(path, rec, "response", allow_empty=True)
        require_text(path, rec, "knowledge", allow_empty=True)
    return records


def _check_utf8(path) -> None:
    """Locate undecodable bytes by line (the CSV reader can only give a byte offset)."""
    raw = Path(path).read_bytes()
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise InputError(path, line, f"not valid UTF-8 (byte {raw[e.start:e.start + 1]!r})") from None


class Q2Scorer:
    """The loaded roles, spaCy and options; scores items and keeps per-stage timings."""

    def __init__(self, settings: Settings | None = None, *, options: Q2Options | None = None, backend: str = "auto",
                 precision: str = "int8", cache: CallCache | None = None, roles=None):
        from .roles import load_roles
        from .spans import load_nlp

        self.settings = settings or Settings()
        self.options = options or Q2Options()
        if cache is None:
            cache = CallCache(self.settings.cache_path if self.settings.use_cache else None)
        self.cache = cache
        self.backend, self.precision = backend, precision
        self.roles = roles or load_roles(self.settings, backend=backend, cache=cache, precision=precision)
        self.nlp = load_nlp()
        self.timer = StageTimer()
        self.scored = 0

    def score_item(self, data: dict) -> dict:
        """The output item for one input row: its fields, then ``status`` and the Q² result."""
        response, knowledge = data["response"], data["knowledge"]
        item = {k: v for k, v in data.items() if k not in RESULT_KEYS}
        if not response.strip():
            return {**item, "status": "empty_response", "Q2": None, "Q2_no_nli": None}
        if not knowledge.strip():
            return {**item, "status": "empty_knowledge", "Q2": None, "Q2_no_nli": None}
        result = score_response(response, knowledge, self.roles, self.nlp, self.options, self.timer)
        self.scored += 1
        return {**item, "status": "ok", **result}

    def e2e_nli(self, response: str, knowledge: str) -> dict:
        with self.timer.stage("fallback"):
            return e2e_nli_score(response, knowledge, self.roles)

    def describe(self) -> dict:
        """Backends, options and settings (the reproducibility part of a summary)."""
        return {
            "backends": self.roles.describe(),
            "precision": self.precision,
            "options": self.options.to_json(),
            "settings": {"threads": self.settings.threads, "onnx_spin_us": session_spin(self.settings.threads),
                         "llm": self.settings.llm,
                         "models_dir": str(self.settings.models_dir),
                         "cache": str(self.cache.path) if self.cache.path else None},
        }

    def run_key(self, input_sha256: str) -> str:
        """Identity of a run for --resume: input bytes, method options and every model's sha256."""
        d = self.describe()
        key = {"input": input_sha256, "options": d["options"], "precision": self.precision,
               "models": {r: (v["backend"], v["name"], v["sha256"]) for r, v in d["backends"].items()}}
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def summarise(items: list[dict]) -> dict:
    """Means over scored items, the share without a valid question, status counts."""
    scored = [it for it in items if it.get("status") == "ok"]
    statuses: dict[str, int] = {}
    for it in items:
        statuses[it.get("status", "?")] = statuses.get(it.get("status", "?"), 0) + 1

    def mean(key):
        vals = [it[key] for it in scored if it.get(key) is not None]
        return sum(vals) / len(vals) if vals else None

    no_q = sum(1 for it in scored if it["no_valid_question"])
    return {"n_items": len(items), "n_scored": len(scored), "status_counts": statuses,
            "Q2": mean("Q2"), "Q2_no_nli": mean("Q2_no_nli"),
            "no_valid_question_share": no_q / len(scored) if scored else None,
            "valid_questions_per_response": (sum(len(it["questions"]) for it in scored) / len(scored)) if scored else None}


def file_sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def run_q2(input_path, out_path, settings: Settings | None = None, *, options: Q2Options | None = None,
           backend: str = "auto", precision: str = "int8", resume: bool = False, summary_path=None,
           progress: bool = True, scorer: Q2Scorer | None = None, executor=None) -> dict:
    """Score every row of ``input_path`` into ``out_path`` (JSONL) and write the summary JSON
    (default ``OUT.summary.json``); returns the summary. ``executor`` (default: this process)
    scores the pending rows: see :mod:`fscore_lite.distributed`."""
    t_start = time.perf_counter()
    records = read_q2_rows(input_path)  # all input is checked before any output exists
    out_path = Path(out_path)
    summary_path = Path(summary_path) if summary_path else summary_path_for(out_path)
    # and every output path, before any model is loaded
    check_writable_outputs([out_path, summary_path, out_path.with_name(out_path.name + ".partial")],
                           inputs=[input_path])
    scorer = scorer or Q2Scorer(settings, options=options, backend=backend, precision=precision)
    writer = ResumableJsonlWriter(out_path, resume=resume, run_key=scorer.run_key(file_sha256(input_path)))
    resumed = sum(1 for r in records if writer.done(r.line))
    bar = Progress(len(records), "q2", enabled=progress, item_unit="responses")
    hits0, misses0 = scorer.cache.hits, scorer.cache.misses
    try:
        for _ in range(resumed):
            bar.skip()
        pending = ((rec.line, rec.data) for rec in records if not writer.done(rec.line))
        for line, item in (executor or LocalExecutor(scorer.score_item)).map(pending):
            writer.add(line, item)
            bar.advance(len(item.get("questions") or ()), unit="questions")
            bar.advance()
        elapsed = time.perf_counter() - t_start
        summary = {"input": str(input_path), "output": str(out_path), **summarise(writer.ordered()),
                   "resumed_items": resumed, **scorer.describe(),
                   "cache": {"hits": scorer.cache.hits - hits0, "misses": scorer.cache.misses - misses0},
                   "timings": {"total_s": round(elapsed, 3),
                               "stages_s": {s: round(scorer.timer.seconds[s], 3) for s in STAGES},
                               "responses_per_s": round((len(records) - resumed) / elapsed, 4) if elapsed > 0 else None}}
        atomic_write_json(summary_path, summary)  # first: if it fails, the partial file still resumes
        writer.finish()
    finally:
        writer.close()
        bar.close()
    return summary
