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

from dataclasses import replace

from ..backends.onnx_session import session_spin
from ..cache import CallCache
from ..errors import InputError
from ..driver import RunFacts, run_file
from ..io import Record, read_input, read_records, require_text
from ..io import summary_path_for  # noqa: F401  (re-exported)
from ..progress import Progress  # also imported from here by the Q² meta-eval
from ..records import ItemRecord, status_counts
from ..settings import Settings, check_threads
from ..stats import mean
from .compare import token_overlap
from .score import METRICS, STAGES, Q2Options, StageTimer, e2e_nli_score, score_response

# every field score_item writes: an input field of the same name is replaced
RESULT_KEYS = ("status", "score", "Q2", "Q2_no_nli", "e2e_nli", "overlap", "no_valid_question", "fallback",
               "candidates", "questions")
EMPTY = {"score": None, "Q2": None, "Q2_no_nli": None, "e2e_nli": None, "overlap": None}


def read_q2_rows(path) -> list:
    """All records of ``path`` (a path or an :class:`InputFile` already read) with ``response``
    and ``knowledge`` checked (InputError on bad input); text is NFC-normalised."""
    data = read_input(path)
    records = list(read_records(data, nfc=True))
    if not records:
        raise InputError(data.path, None, "no input rows")
    if str(data.path).lower().endswith(".csv"):  # every row has the header's columns: say so once, at the header
        missing = [k for k in ("response", "knowledge") if k not in records[0].data]
        if missing:
            raise InputError(data.path, 1, f"the header has no column {' or '.join(repr(k) for k in missing)} "
                             f"(its columns: {', '.join(records[0].data)})")
    for rec in records:
        require_text(data.path, rec, "response", allow_empty=True)
        require_text(data.path, rec, "knowledge", allow_empty=True)
    return records


class Q2Scorer:
    """The loaded roles, spaCy and options; scores items and keeps per-stage timings.

    ``backend``/``precision``, when given, override those of ``options``."""

    def __init__(self, settings: Settings | None = None, *, options: Q2Options | None = None,
                 backend: str | None = None, precision: str | None = None, cache: CallCache | None = None,
                 roles=None):
        from .roles import load_roles
        from .spans import load_nlp

        self.settings = settings or Settings()
        chosen = {k: v for k, v in (("backend", backend), ("precision", precision)) if v is not None}
        self.options = replace(options or Q2Options(), **chosen)
        if roles is None:  # a kernel this build or CPU does not have is refused before anything loads
            from ..backends.llama_kernels import resolve_kernel

            resolve_kernel(self.settings.llm_kernel)
        if cache is None:
            cache = CallCache(self.settings.cache_path if self.settings.use_cache else None)
        self.cache = cache
        self.backend, self.precision = self.options.backend, self.options.precision
        self.roles = roles or load_roles(self.settings, backend=self.backend, cache=cache, precision=self.precision,
                                         qa_backend=self.options.qa_backend, qg_backend=self.options.qg_backend)
        self.nlp = load_nlp()
        self.timer = StageTimer()
        self.scored = 0

    def score_item(self, row: Record, progress: Progress | None = None) -> dict:
        """The output record of one input row: its fields, then ``status`` and the Q² result;
        ``progress`` counts its valid questions."""
        rec = self.record(row.data)
        if progress is not None:
            progress.advance(len(rec.result.get("questions") or ()), unit="questions")
        return rec.to_json()

    def record(self, data: dict) -> ItemRecord:
        response, knowledge = data["response"], data["knowledge"]
        if not response.strip():
            return ItemRecord(data, {"status": "empty_response", **EMPTY}, RESULT_KEYS)
        if not knowledge.strip():
            return ItemRecord(data, {"status": "empty_knowledge", **EMPTY}, RESULT_KEYS)
        result = score_response(response, knowledge, self.roles, self.nlp, self.options, self.timer)
        # the end-to-end NLI score: the fallback's when it ran (the same pair), else its own call
        e2e = result["fallback"]["score"] if result["fallback"] else self.e2e_nli(response, knowledge)["score"]
        with self.timer.stage("overlap"):
            overlap = token_overlap(response, knowledge)
        scores = {"Q2": result["Q2"], "Q2_no_nli": result["Q2_no_nli"], "e2e_nli": e2e, "overlap": overlap}
        self.scored += 1
        return ItemRecord(data, {"status": "ok", "score": scores[METRICS[self.options.metric]], **scores, **result},
                          RESULT_KEYS)

    def e2e_nli(self, response: str, knowledge: str) -> dict:
        """End-to-end NLI alone on the pair (``{"label", "score"}``), timed as stage ``e2e_nli``."""
        with self.timer.stage("e2e_nli"):
            return e2e_nli_score(response, knowledge, self.roles)

    def describe(self) -> dict:
        """Backends, options and settings (the reproducibility part of a summary)."""
        backends = self.roles.describe()
        return {
            "backends": backends,
            "precision": self.precision,
            "metric": {"name": self.options.metric, "field": METRICS[self.options.metric]},
            "options": self.options.to_json(),
            "settings": {"threads": self.settings.threads, "onnx_spin_us": session_spin(self.settings.threads),
                         "llm": self.settings.llm, "llm_kernel": self._kernel_setting(backends),
                         "models_dir": str(self.settings.models_dir),
                         "cache": str(self.cache.path) if self.cache.path else None},
        }

    def _kernel_setting(self, backends: dict) -> dict | None:
        """llama.cpp's CPU kernel where a role runs the LLM (None: none does), with its instruction
        sets once it has loaded."""
        if not any(v.get("backend") == "llm" for v in backends.values()):
            return None
        from ..backends.llama_kernels import loaded, resolve_kernel

        k = loaded()
        if k is not None:
            return k.to_json()
        return {"requested": self.settings.llm_kernel, "ran": resolve_kernel(self.settings.llm_kernel)}

    def identity(self) -> dict:
        """What a result depends on besides the input (the resume key): method options, every model's sha256,
        the LLM's CPU kernel."""
        d = self.describe()
        kernel = d["settings"]["llm_kernel"]
        return {"options": d["options"], "precision": self.precision,
                **({"llm_kernel": kernel["ran"]} if kernel else {}),
                "models": {r: (v["backend"], v["name"], v["sha256"]) for r, v in d["backends"].items()}}

    def summary(self, results: list[dict], run: RunFacts) -> dict:
        """The summary of a file: means, statuses, backends and settings, cache use, timings."""
        scored = len(results) - run.items_resumed
        return {**summarise(results), **self.describe(), "cache": run.cache,
                "timings": {"total_s": round(run.total_s, 3), "load_s": round(run.load_s, 3),
                            "stages_s": {s: round(self.timer.seconds[s], 3) for s in STAGES},
                            "responses_per_s": round(scored / run.total_s, 4) if run.total_s > 0 else None,
                            "items_resumed": run.items_resumed}}


def summarise(items: list[dict]) -> dict:
    """Means over scored items (the headline ``score`` and each score), the share without a
    valid question, status counts."""
    scored = [it for it in items if it.get("status") == "ok"]
    return {"num_items": len(items), "num_scored": len(scored), "status_counts": status_counts(items),
            "score": mean(it.get("score") for it in scored),
            **{k: mean(it.get(k) for it in scored) for k in METRICS.values()},
            "no_valid_question_share": mean(float(bool(it["no_valid_question"])) for it in scored),
            "valid_questions_per_response": mean(len(it["questions"]) for it in scored)}


def q2_file(input_path, output_path, settings: Settings | None = None, *, options: Q2Options | None = None,
            backend: str | None = None, precision: str | None = None, resume: bool = False, summary_path=None,
            progress: bool = True, scorer: Q2Scorer | None = None, executor=None, force: bool = False) -> dict:
    """Score every row of ``input_path`` into ``output_path`` (JSONL) and write the summary JSON
    (default ``OUT.summary.json``); returns the summary. ``scorer``: an already loaded one;
    ``backend``/``precision``: as :class:`Q2Scorer`'s; ``executor`` (default: this process)
    scores the pending rows: see :mod:`fscore_lite.distributed`."""
    settings = settings or Settings()
    check_threads(settings.threads)  # a bad FSCORE_LITE_THREADS (no --threads) stops here
    data = read_input(input_path)  # once: a pipe cannot be read twice
    records = read_q2_rows(data)  # all input is checked before any output exists

    def load() -> Q2Scorer:
        return scorer or Q2Scorer(settings, options=options, backend=backend, precision=precision)

    summary, _ = run_file(input_path, output_path, records, load, input_sha256=data.sha256,
                          summary_path=summary_path, resume=resume, label="q2", progress=progress,
                          item_unit="responses", executor=executor, force=force,
                          protected=[settings.store, settings.models_dir])
    return summary


run_q2 = q2_file  # the earlier name
