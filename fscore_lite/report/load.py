"""Reading run outputs for the report: per-item JSONL of ``score`` or ``q2``, and its summary.

A FActScore record has ``init_score`` and ``decisions`` (set to null for items that were not
scored); a Q² record has ``Q2`` and, when scored, ``questions``. The summary is
``OUT.summary.json`` (``score``) or ``OUT.jsonl.summary.json`` (``q2``) next to the JSONL.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import FscoreError

FACTSCORE, Q2 = "factscore", "q2"


@dataclass
class Run:
    path: Path
    name: str
    kind: str
    records: list[dict]
    summary: dict | None = None
    summary_path: Path | None = None
    extra: dict = field(default_factory=dict)


def summary_candidates(path: Path) -> list[Path]:
    stem = path.name[: -len(".jsonl")] if path.name.endswith(".jsonl") else path.name
    return [path.with_name(stem + ".summary.json"), path.with_name(path.name + ".summary.json")]


def check_report_paths(runs: list[str | Path], output: str | Path) -> None:
    """Refuse, before any work, an output that is one of the runs or a run's summary (however
    spelled: ``./run.jsonl``, a link), or a run that is a folder."""
    from ..io import check_output_path, same_file

    for run in map(Path, runs):
        if run.is_dir():
            raise FscoreError(f"{run}: is a directory; give the per-item JSONL that `score` or `q2` wrote "
                              f"(for example {run / 'out.jsonl'})")
        for kept in (run, *summary_candidates(run)):
            if same_file(output, kept):
                raise FscoreError(f"{output}: refusing to write the report there: it is {kept}, "
                                  f"{'a run given to the report' if kept == run else 'the summary of ' + str(run)}; "
                                  "choose another -o (for example report.html)")
    if Path(output).is_dir():
        raise FscoreError(f"{output}: is a directory; give a file path (for example {Path(output) / 'report.html'})")
    check_output_path(output, inputs=runs)  # the rule every output follows: no lock, device, FIFO or link


def _refuse_constant(text: str):
    raise ValueError(f"the number {text} is not JSON (not finite)")


def read_records(path: Path) -> list[dict]:
    records = []
    if path.is_dir():
        raise FscoreError(f"{path}: is a directory, not a run's JSONL")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FscoreError(f"{path}: no such file") from None
    except OSError as e:
        raise FscoreError(f"{path}: cannot read ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise FscoreError(f"{path}: not valid UTF-8 ({e.reason})") from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line, parse_constant=_refuse_constant)
        except json.JSONDecodeError as e:
            from ..io import json_error

            raise FscoreError(f"{path}:{n}: not JSON ({json_error(e, line)})") from None
        except ValueError as e:  # NaN or Infinity: the report's embedded data would not load
            raise FscoreError(f"{path}:{n}: {e}") from None
        if not isinstance(rec, dict):
            raise FscoreError(f"{path}:{n}: expected a JSON object per line")
        records.append(rec)
    if not records:
        raise FscoreError(f"{path}: no records (the file is empty)")
    return records


def detect_kind(records: list[dict], path: Path | str = "") -> str:
    """``factscore`` or ``q2``, by the keys the records carry."""
    fs = sum(1 for r in records if "init_score" in r or "decisions" in r)
    q2 = sum(1 for r in records if "Q2" in r or "questions" in r)
    if not fs and not q2:
        raise FscoreError(f"{path}: neither `score` output (init_score/decisions) nor `q2` output (Q2/questions)")
    return FACTSCORE if fs >= q2 else Q2


def run_name(path: Path) -> str:
    name = path.name
    for suffix in (".jsonl", ".factscore", ".q2"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name or path.name


def load_run(path: str | Path, name: str | None = None) -> Run:
    path = Path(path)
    records = read_records(path)
    kind = detect_kind(records, path)
    summary = summary_path = None
    for cand in summary_candidates(path):
        if cand.is_file():
            try:
                summary = json.loads(cand.read_text(encoding="utf-8"), parse_constant=_refuse_constant)
                summary_path = cand
            except (ValueError, OSError):  # malformed, not UTF-8, NaN: the run is shown without it
                summary = None
            break
    return Run(path, name or run_name(path), kind, records, summary if isinstance(summary, dict) else None,
               summary_path)
