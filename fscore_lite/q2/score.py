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

from ..stats import mean
from .answer import is_self_consistent
from .compare import e2e_pair, e2e_score, knowledge_f1, needs_nli, nli_pair, question_score
from .spans import answer_candidates, is_personal_question

STAGES = ("candidates", "qg", "qa_response", "qa_knowledge", "nli", "fallback", "e2e_nli", "overlap")
PIPELINE_STAGES = STAGES[:6]  # the Q² pipeline proper; the last two are the other scores
QUESTIONS = ("single", "multi")
# --metric: the name of each score -> its field in the per-item record
METRICS = {"q2": "Q2", "q2-no-nli": "Q2_no_nli", "nli": "e2e_nli", "overlap": "overlap"}


@dataclass(frozen=True)
class Q2Options:
    """Method options; the defaults are parity mode (the paper's documented run).

    ``questions``: "single" keeps the first beam that passes both filters, "multi" every one.
    ``remove_personal``: the personal-question filter (on in the paper's run).
    ``no_nli_gets_fallback``: as in the reference, ``Q2_no_nli`` of a response without a
    valid question is its end-to-end NLI fallback score too; False leaves it null.
    ``batch``: run the model calls of one response together (QG of every answer candidate in
    one beam search — one decoder call per step for all their beams —, QA on the response in rounds —
    round k holds the k-th unfiltered question of every candidate still without a valid one —
    QA on the knowledge in one call, NLI in one call). The same steps and decisions as one
    call per question (False, the reference's way), faster; logits differ only by float
    rounding (int8: by the activation scale of the batch). Batches are fixed by the response,
    never by other rows. ``batch_qg``: QG's part of that on its own (None: as ``batch``).
    ``metric``: which score is the headline ``score`` of an item and of the summary (the
    paper's Q² is "q2"; every score is computed and kept whichever is chosen).
    ``backend``, ``qa_backend`` and ``qg_backend`` (that role's backend by name, None: as ``backend``) and
    ``precision`` choose the models (:mod:`.roles`); the summary records them under
    ``backends`` and ``precision``, not with the method options.
    """

    questions: str = "single"
    remove_personal: bool = True
    no_nli_gets_fallback: bool = True
    batch: bool = True
    batch_qg: bool | None = None
    metric: str = "q2"
    backend: str = "auto"
    qa_backend: str | None = None
    qg_backend: str | None = None
    precision: str = "int8"

    @staticmethod
    def choices() -> dict[str, tuple[str, ...]]:
        from .roles import BACKENDS, PRECISIONS, backends_for

        return {"questions": QUESTIONS, "metric": tuple(METRICS), "backend": BACKENDS,
                "qa_backend": backends_for("qa"), "qg_backend": backends_for("qg"), "precision": PRECISIONS}

    def __post_init__(self):
        from .roles import check_choice

        for name, allowed in self.choices().items():
            if not (name in ("qa_backend", "qg_backend") and getattr(self, name) is None):
                check_choice(name.replace("_", "-"), getattr(self, name), allowed)

    def to_json(self) -> dict:
        """The method options (the summary's ``options``)."""
        return {k: v for k, v in asdict(self).items() if k not in ("backend", "qa_backend", "qg_backend", "precision")}


@dataclass
class StageTimer:
    """Seconds and number of entries per stage (kept out of the per-item output)."""

    seconds: dict = field(default_factory=lambda: {s: 0.0 for s in STAGES})
    calls: dict = field(default_factory=lambda: {s: 0 for s in STAGES})

    @contextmanager
    def stage(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - t0
            self.calls[name] += 1


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
        batch_qg = options.batch if options.batch_qg is None else options.batch_qg
        generated = (roles.qg.questions_many(candidates, response) if batch_qg
                     else [roles.qg.questions(c, response) for c in candidates])

    steps = [{"candidate": c, "generated": qs, "checked": []} for c, qs in zip(candidates, generated)]
    found: list[list[dict]] = [[] for _ in candidates]  # valid questions per candidate, in order
    with timer.stage("qa_response"):
        if options.batch:
            _check_batched(steps, found, response, roles, nlp, options)
        else:
            for i, step in enumerate(steps):
                for q in step["generated"]:
                    check = _check_entry(step, q, nlp, options)
                    if check is None:
                        continue
                    if _record(check, step["candidate"], roles.qa.answer(q, response), found[i], options):
                        break
    valid = [v for vs in found for v in vs]

    with timer.stage("qa_knowledge"):
        answers = _answers(roles.qa, [(v["question"], knowledge) for v in valid], options.batch)
        for v, ka in zip(valid, answers):
            v.update(knowledge_answer=ka.text, knowledge_no_answer=ka.no_answer, f1=knowledge_f1(v["candidate"], ka))
    with timer.stage("nli"):
        todo = [(v, ka) for v, ka in zip(valid, answers) if needs_nli(v["f1"], ka)]
        labels = _labels(roles.nli, [nli_pair(v["question"], v["candidate"], ka.text) for v, ka in todo], options.batch)
        by_id = {id(v): lab for (v, _), lab in zip(todo, labels)}
        for v in valid:
            label = by_id.get(id(v))
            v.update(nli_label=label, score=question_score(v["f1"], label))

    out = {"Q2": None, "Q2_no_nli": None, "no_valid_question": not valid, "fallback": None,
           "candidates": steps, "questions": valid}
    if valid:
        out["Q2"] = mean([v["score"] for v in valid])
        out["Q2_no_nli"] = mean([v["f1"] for v in valid])
    else:
        with timer.stage("fallback"):
            label = roles.nli.label(*e2e_pair(response, knowledge))
        out["fallback"] = {"label": label, "score": e2e_score(label)}
        out["Q2"] = out["fallback"]["score"]
        if options.no_nli_gets_fallback:
            out["Q2_no_nli"] = out["fallback"]["score"]
    return out


def _check_entry(step: dict, q: str, nlp, options: Q2Options) -> dict | None:
    """Record that ``q`` was checked; None when the personal-question filter drops it."""
    check = {"question": q, "personal": False, "response_answer": None, "response_no_answer": None,
             "consistent": None}
    step["checked"].append(check)
    if options.remove_personal and is_personal_question(nlp(q)):
        check["personal"] = True
        return None
    return check


def _record(check: dict, cand: str, ans, found: list, options: Q2Options) -> bool:
    """Fill in the self-consistency verdict; True when the candidate is done (single mode)."""
    check.update(response_answer=ans.text, response_no_answer=ans.no_answer, consistent=is_self_consistent(cand, ans))
    if check["consistent"]:
        found.append({"candidate": cand, "question": check["question"], "response_answer": ans.text})
        return options.questions == "single"
    return False


def _check_batched(steps: list[dict], found: list[list[dict]], response: str, roles, nlp, options: Q2Options) -> None:
    """The self-consistency filter with one QA call per round.

    Multi mode: every unfiltered question, one call. Single mode: round k asks the next
    unfiltered question of each candidate that has no valid question yet, so exactly the
    questions the one-at-a-time loop asks are asked (and recorded in the same order).
    """
    pos = [0] * len(steps)
    live = list(range(len(steps)))
    while live:
        batch = []  # (candidate index, check)
        for i in live:
            step, qs = steps[i], steps[i]["generated"]
            while pos[i] < len(qs):
                q = qs[pos[i]]
                pos[i] += 1
                check = _check_entry(step, q, nlp, options)
                if check is not None:
                    batch.append((i, check))
                    if options.questions == "single":
                        break
        if not batch:
            break
        answers = _answers(roles.qa, [(c["question"], response) for _, c in batch], True)
        done = {i for (i, check), ans in zip(batch, answers)
                if _record(check, steps[i]["candidate"], ans, found[i], options)}
        live = [i for i in live if i not in done and pos[i] < len(steps[i]["generated"])]


def _answers(qa, pairs: list[tuple[str, str]], batch: bool) -> list:
    """Answers for the pairs: one batched call when asked and the backend has one."""
    if batch and len(pairs) > 1 and hasattr(qa, "answer_many"):
        return list(qa.answer_many(pairs))
    return [qa.answer(q, t) for q, t in pairs]


def _labels(nli, pairs: list[tuple[str, str]], batch: bool) -> list[str]:
    if batch and len(pairs) > 1 and hasattr(nli, "labels_many"):
        return list(nli.labels_many(pairs))
    return [nli.label(p, h) for p, h in pairs]


def e2e_nli_score(response: str, knowledge: str, roles) -> dict:
    """End-to-end NLI alone (the paper's baseline): ``{"label", "score"}`` for the pair."""
    label = roles.nli.label(*e2e_pair(response, knowledge))
    return {"label": label, "score": e2e_score(label)}
