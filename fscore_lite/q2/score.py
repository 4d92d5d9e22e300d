"""One response through the whole Q² pipeline, stage by stage, with every step recorded.

Stages (each timed separately, see :class:`StageTimer`): answer candidates → question
generation → filters (personal questions, then QA on the response for self-consistency) →
QA on the knowledge → per-question comparison (F1, NLI) → response score or end-to-end NLI
fallback. Every model call is cached, so a rerun repeats no model work.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

from .answer import is_self_consistent
from .compare import e2e_pair, e2e_score, knowledge_f1, needs_nli, nli_pair, question_score
from .spans import answer_candidates, is_personal_question

STAGES = ("candidates", "qg", "qa_response", "qa_knowledge", "nli", "fallback")


@dataclass(frozen=True)
class Q2Options:
    """Method options; the defaults are parity mode (the paper's documented run).

    ``questions``: "single" keeps the first beam that passes both filters, "multi" every one.
    ``remove_personal``: the personal-question filter (on in the paper's run).
    ``no_nli_gets_fallback``: as in the reference, ``Q2_no_nli`` of a response without a
    valid question is its end-to-end NLI fallback score too; False leaves it null.
    """

    questions: str = "single"
    remove_personal: bool = True
    no_nli_gets_fallback: bool = True

    def __post_init__(self):
        if self.questions not in ("single", "multi"):
            raise ValueError(f"questions must be 'single' or 'multi', not {self.questions!r}")

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class StageTimer:
    """Seconds and number of responses per stage (kept out of the per-item output)."""

    seconds: dict = field(default_factory=lambda: {s: 0.0 for s in STAGES})

    @contextmanager
    def stage(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - t0


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def score_response(response: str, knowledge: str, roles, nlp, options: Q2Options = Q2Options(),
                   timer: StageTimer | None = None) -> dict:
    """Score one (response, knowledge) pair; returns the scores and every intermediate step.

    Keys: ``Q2``, ``Q2_no_nli``, ``no_valid_question``, ``fallback`` (``{"label", "score"}``
    or null), ``candidates`` (per candidate: generated questions and the filter verdicts of
    those checked) and ``questions`` (per valid question: both answers, F1, NLI label, score).
    """
    timer = timer or StageTimer()
    with timer.stage("candidates"):
        candidates = answer_candidates(nlp(response))
    with timer.stage("qg"):
        generated = [roles.qg.questions(c, response) for c in candidates]

    steps, valid = [], []
    with timer.stage("qa_response"):
        for cand, questions in zip(candidates, generated):
            checked = []
            for q in questions:
                check = {"question": q, "personal": False, "response_answer": None, "response_no_answer": None,
                         "consistent": None}
                checked.append(check)
                if options.remove_personal and is_personal_question(nlp(q)):
                    check["personal"] = True
                    continue
                ans = roles.qa.answer(q, response)
                check.update(response_answer=ans.text, response_no_answer=ans.no_answer,
                             consistent=is_self_consistent(cand, ans))
                if check["consistent"]:
                    valid.append({"candidate": cand, "question": q, "response_answer": ans.text})
                    if options.questions == "single":
                        break
            steps.append({"candidate": cand, "generated": questions, "checked": checked})

    with timer.stage("qa_knowledge"):
        for v in valid:
            ka = roles.qa.answer(v["question"], knowledge)
            v.update(knowledge_answer=ka.text, knowledge_no_answer=ka.no_answer, f1=knowledge_f1(v["candidate"], ka))
            v["_ka"] = ka
    with timer.stage("nli"):
        for v in valid:
            ka = v.pop("_ka")
            label = None
            if needs_nli(v["f1"], ka):
                label = roles.nli.label(*nli_pair(v["question"], v["candidate"], ka.text))
            v.update(nli_label=label, score=question_score(v["f1"], label))

    out = {"Q2": None, "Q2_no_nli": None, "no_valid_question": not valid, "fallback": None,
           "candidates": steps, "questions": valid}
    if valid:
        out["Q2"] = _mean([v["score"] for v in valid])
        out["Q2_no_nli"] = _mean([v["f1"] for v in valid])
    else:
        with timer.stage("fallback"):
            label = roles.nli.label(*e2e_pair(response, knowledge))
        out["fallback"] = {"label": label, "score": e2e_score(label)}
        out["Q2"] = out["fallback"]["score"]
        if options.no_nli_gets_fallback:
            out["Q2_no_nli"] = out["fallback"]["score"]
    return out


def e2e_nli_score(response: str, knowledge: str, roles) -> dict:
    """End-to-end NLI alone (the paper's baseline): ``{"label", "score"}`` for the pair."""
    label = roles.nli.label(*e2e_pair(response, knowledge))
    return {"label": label, "score": e2e_score(label)}
