"""Human FActScore as a run: the annotated bios of ``factscore-labeled`` in ``score``'s format.

Each bio becomes the record ``score`` would write, with the human labels as the decisions and
the paper's convention (as in ``meta-eval factscore-human``): facts of relevant sentences are
supported iff labelled S (NS and IR are not); sentences marked irrelevant contribute their
model-generated facts as not supported. A bio without annotations is ``abstained``. Put beside
an estimated run of the same bios, the report then shows human and estimated side by side,
with their paired difference (the signed estimation error) and its interval.
"""
from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path

from ..factscore.atomic_facts import SentenceFacts
from ..factscore.score import GAMMA, response_score
from ..training.labeled import SUBJECTS, AnnotatedBio, load_subject
from .load import FACTSCORE, Run


def bio_record(bio: AnnotatedBio, gamma: float = GAMMA) -> dict:
    base = {"topic": bio.topic, "output": bio.output, "cat": list(bio.category), "bio_line": bio.line}
    if not bio.responded:
        return base | {"status": "abstained", "score": None, "init_score": None, "decisions": None}
    sentences, decisions = [], []
    for s in bio.sentences:
        if s.is_relevant:
            facts = [(f.text, f.label == "S", f"human: {f.label}") for f in s.human_facts]
        else:
            facts = [(t, False, "human: irrelevant sentence") for t in s.model_facts]
        sentences.append(asdict(SentenceFacts(s.text, [t for t, _, _ in facts])))
        decisions += [{"atom": t, "is_supported": ok, "margin": None, "rule": rule, "evidence": []}
                      for t, ok, rule in facts]
    if not decisions:
        return base | {"status": "no_facts", "score": None, "init_score": None, "decisions": None,
                       "sentences": sentences}
    score, init = response_score([d["is_supported"] for d in decisions], gamma)
    return base | {"status": "ok", "score": round(score, 6), "init_score": round(init, 6),
                   "num_facts": len(decisions), "decisions": decisions, "sentences": sentences}


def subject_of(run: Run) -> str | None:
    """The annotated subject a run is about, from its name or file name (``er-ChatGPT-parity``)."""
    for text in (run.name, run.path.name):
        for s in SUBJECTS:
            if re.search(rf"(^|[^a-z]){s.lower()}([^a-z]|$)", text.lower()):
                return s
    return None


def human_run(data: str | Path, subject: str, topics: list[str] | None = None, gamma: float = GAMMA,
              name: str | None = None) -> Run:
    """The human-annotated run of ``subject``; with ``topics``, only those bios, in that order."""
    bios = load_subject(data, subject)
    if topics is not None:
        by_topic: dict[str, AnnotatedBio] = {}
        for b in bios:
            by_topic.setdefault(b.topic, b)
        bios = [by_topic[t] for t in dict.fromkeys(topics) if t in by_topic]
    path = Path(data) / "factscore-labeled" / f"{subject}.jsonl"
    return Run(path, name or f"human: {subject}", FACTSCORE, [bio_record(b, gamma) for b in bios],
               {"gamma": gamma, "settings": {"mode": "human annotation", "verifier": "human labels (S / NS / IR)"}})


def run_gamma(run: Run) -> float:
    s = run.summary or {}
    for v in (s.get("gamma"), (s.get("settings") or {}).get("gamma")):
        if isinstance(v, (int, float)):
            return v
    return GAMMA


def with_human_runs(runs: list[Run], data: str | Path, category_field: str = "cat") -> list[Run]:
    """``runs`` with, after each FActScore run of an annotated subject, the human run on its topics.

    Records of such a run that lack ``category_field`` (``meta-eval factscore-er`` inputs carry
    only topic and facts) get the bio's ``cat`` in memory, so Figure 2 has categories for both."""
    out = []
    for r in runs:
        out.append(r)
        subject = subject_of(r) if r.kind == FACTSCORE else None
        if subject is None:
            continue
        cats = {}
        for b in load_subject(data, subject):
            cats.setdefault(b.topic, list(b.category))
        for rec in r.records:
            if category_field not in rec and rec.get("topic") in cats:
                rec[category_field] = cats[rec["topic"]]
        topics = [str(rec.get("topic", "")) for rec in r.records]
        out.append(human_run(data, subject, topics, run_gamma(r), name=f"human: {subject} ({r.name})"))
    return out
