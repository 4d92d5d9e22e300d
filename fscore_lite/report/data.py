"""From run records to the numbers and the compact per-response JSON the report embeds."""
from __future__ import annotations

import re
from pathlib import Path

from ..records import RESPONSE_STATUSES, status_counts
from ..stats import N_BOOT, SEED, auc, bootstrap_ci, mean, paired_difference
from .figures import category_bins, category_of, order_categories, position_bins, roc_points
from .load import FACTSCORE, Q2, Run


def _round(v, n=4):
    return None if v is None else round(float(v), n)


# ---- FActScore -----------------------------------------------------------------------------
def fact_json(d: dict, passage_key) -> dict:
    out = {"a": d.get("atom", ""), "ok": bool(d.get("is_supported"))}
    for src, dst in (("probability", "p"), ("margin", "m"), ("npprob", "np"), ("rule", "r")):
        if d.get(src) is not None:
            out[dst] = d[src]
    scores = d.get("passage_scores")
    ev = []
    for i, e in enumerate(d.get("evidence") or []):
        item = {"id": e.get("id"), "ti": e.get("title"), "sc": e.get("score")}
        ps = None
        if isinstance(scores, list) and i < len(scores):
            ps = scores[i]
            if isinstance(ps, dict):
                ps = ps.get("probability", ps.get("score"))
        elif isinstance(scores, dict):
            ps = scores.get(str(e.get("id")), scores.get(e.get("id")))
        if ps is not None:
            item["ps"] = ps
        key = passage_key(e.get("id"))
        if key is not None:
            item["k"] = key
        ev.append(item)
    out["ev"] = ev
    return out


def sentence_text(s: dict) -> str:
    """A sentence of ``score``'s output: ``{"sentence", "facts"}`` (``"text"`` accepted too)."""
    v = s.get("sentence", s.get("text", ""))
    return v if isinstance(v, str) else ""


def sentence_groups(rec: dict, n_facts: int) -> list[dict] | None:
    """Sentences with the indexes of their facts, when the record's sentences account for
    exactly its decisions (facts are generated sentence by sentence, in order)."""
    sents = rec.get("sentences")
    if not isinstance(sents, list) or not sents:
        return None
    out, i = [], 0
    for s in sents:
        k = len(s.get("facts") or [])
        out.append({"x": sentence_text(s), "f": list(range(i, i + k))})
        i += k
    return out if i == n_facts else None


def topic_keys(records: list[dict]) -> list:
    """A key per record for pairing runs: the topic, with its occurrence number when repeated."""
    seen: dict = {}
    keys = []
    for r in records:
        t = str(r.get("topic", ""))
        seen[t] = seen.get(t, 0) + 1
        keys.append(t if seen[t] == 1 else f"{t} #{seen[t]}")
    return keys


def factscore_run(run: Run, index: int, *, category_field: str = "cat", bins: int = 10, n_boot: int = N_BOOT,
                  seed: int = SEED, passage_key=lambda run, pid: None) -> dict:
    recs = run.records
    considered = [r for r in recs if r.get("status") in RESPONSE_STATUSES]
    responding = [r for r in considered if r.get("status") == "ok" and r.get("decisions")]
    scores = [float(r["score"]) for r in responding if r.get("score") is not None]
    inits = [float(r["init_score"]) for r in responding if r.get("init_score") is not None]
    facts = [len(r["decisions"]) for r in responding]
    summ = run.summary or {}
    settings = summ.get("settings") or {}
    models = summ.get("models") or {}
    statuses = status_counts(recs)
    store = summ.get("store") or {}
    score = mean(scores)
    # the run's own interval (with the run share, resampled the run's way) when the summary is this run's
    same = summ.get("score") is not None and score is not None and abs(float(summ["score"]) - score) < 1e-6
    ci = summ.get("score_ci95") if same and summ.get("score_ci95") else bootstrap_ci(scores, n_boot=n_boot, seed=seed)
    responses, fig = [], []
    responding_ids = {id(r) for r in responding}
    for i, (r, key) in enumerate(zip(recs, topic_keys(recs))):
        decs = r.get("decisions") or []
        fl = [fact_json(d, lambda pid: passage_key(run, pid)) for d in decs]
        item = {"t": r.get("topic", ""), "key": key, "st": r.get("status", "?"), "s": _round(r.get("score"), 6),
                "i": _round(r.get("init_score"), 6), "cat": category_of(r, category_field), "facts": fl,
                "sents": sentence_groups(r, len(fl))}
        if r.get("error"):
            item["err"] = str(r["error"])
        if item["sents"] is None:
            if isinstance(r.get("sentences"), list) and not fl:  # no_facts: show the sentences, no highlights
                item["out"] = " ".join(sentence_text(s) for s in r["sentences"])
            elif isinstance(r.get("output"), str):
                item["out"] = r["output"]
        responses.append(item)
        if id(r) in responding_ids:
            fig.append({"cat": item["cat"], "score": r.get("score"), "supported": [f["ok"] for f in fl]})
    verifier = settings.get("verifier")
    if verifier is None and settings:
        verifier = f"LLM log-probability True/False ({settings.get('prompt_style', 'completion')})"
    if isinstance(verifier, dict):
        verifier = ", ".join(f"{k}: {v}" for k, v in verifier.items())
    model_names = {role: {"name": m.get("name"), "sha256": m.get("sha256")} for role, m in models.items()
                   if isinstance(m, dict)}
    return {
        "index": index, "name": run.name, "path": str(run.path), "kind": FACTSCORE,
        "summary_path": str(run.summary_path) if run.summary_path else None,
        "score": score, "ci": list(ci) if ci else None, "init_score": mean(inits),
        "respond_ratio": (len(responding) / len(considered)) if considered else None,
        "facts_per_response": mean(facts), "n_items": len(recs), "n_responding": len(responding),
        "n_facts": sum(facts), "n_supported": sum(sum(1 for d in r["decisions"] if d.get("is_supported"))
                                                  for r in responding),
        "statuses": statuses, "mode": settings.get("mode"), "verifier": verifier,
        "models": model_names, "store_sha256": store.get("sha256"), "store_path": store.get("path"),
        "summary_score": summ.get("score"),
        "responses": responses, "_fig": fig,
        "pair_scores": {resp["key"]: resp["s"] for resp in responses if resp["st"] == "ok" and resp["s"] is not None},
        "bins": bins,
    }


def figure2_data(runs: list[dict], bins: int) -> dict:
    cats = order_categories(c["cat"] for r in runs for c in r["_fig"])
    return {"categories": cats,
            "series": [{"run": r["index"], "name": r["name"], "by_category": category_bins(r["_fig"], cats),
                        "by_position": position_bins(r["_fig"], bins)} for r in runs]}


def pairs(runs_ranked: list[dict], n_boot: int, seed: int) -> list[dict]:
    """Paired differences (higher-ranked minus lower-ranked) over shared responding topics:
    every pair for up to 6 runs, else neighbours in the ranking."""
    cand = []
    if len(runs_ranked) <= 6:
        cand = [(a, b) for i, a in enumerate(runs_ranked) for b in runs_ranked[i + 1:]]
    else:
        cand = list(zip(runs_ranked, runs_ranked[1:]))
    out = []
    for a, b in cand:
        d = paired_difference(a["pair_scores"], b["pair_scores"], n_boot=n_boot, seed=seed)
        if d is not None:
            out.append({"a": a["name"], "b": b["name"], **d})
    return out


# ---- Q² -------------------------------------------------------------------------------------
_GOLD_FIELDS = ("gold_label", "label", "consistent", "is_consistent")


def _gold_value(v):
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)) and v in (0, 1):
        return bool(v)
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("consistent", "grounded", "true", "1", "yes"):
            return True
        if s in ("inconsistent", "ungrounded", "false", "0", "no"):
            return False
    return None


def gold_label(rec: dict, path: Path):
    """True (consistent) / False / None: a label field of the record, else the file name
    (``*_consistent*`` / ``*_inconsistent*``, as ``meta-eval q2`` writes them)."""
    for f in _GOLD_FIELDS:
        if f in rec:
            g = _gold_value(rec[f])
            if g is not None:
                return g
    stem = path.name.lower()
    if re.search(r"(^|[_\-.])inconsistent([_\-.]|$)", stem):
        return False
    if re.search(r"(^|[_\-.])consistent([_\-.]|$)", stem):
        return True
    return None


def roc_group(path: Path) -> str:
    stem = path.name
    for s in (".jsonl", ".q2"):
        if stem.endswith(s):
            stem = stem[: -len(s)]
    return re.sub(r"[_\-.]?(in)?consistent$", "", stem) or stem


def q2_run(run: Run, index: int) -> dict:
    recs = run.records
    scored = [r for r in recs if r.get("status") == "ok"]
    summ = run.summary or {}
    statuses = status_counts(recs)
    responses = []
    for r in recs:
        qs = []
        for q in r.get("questions") or []:
            qs.append({"c": q.get("candidate"), "q": q.get("question"), "ra": q.get("response_answer"),
                       "ka": q.get("knowledge_answer"), "kna": q.get("knowledge_no_answer"), "f1": _round(q.get("f1")),
                       "nli": q.get("nli_label"), "s": _round(q.get("score"))})
        item = {"r": r.get("response", ""), "k": r.get("knowledge", ""), "st": r.get("status", "?"),
                "q2": _round(r.get("Q2")), "q2n": _round(r.get("Q2_no_nli")), "qs": qs,
                "nvq": bool(r.get("no_valid_question")), "gold": gold_label(r, run.path)}
        if r.get("e2e_nli") is not None:
            item["e2e"] = _round(r["e2e_nli"])
        if r.get("fallback"):
            item["fb"] = r["fallback"]
        for f in ("topic", "message"):
            if isinstance(r.get(f), str):
                item[f] = r[f]
        responses.append(item)
    backends = summ.get("backends") or {}
    return {"index": index, "name": run.name, "path": str(run.path), "kind": Q2,
            "summary_path": str(run.summary_path) if run.summary_path else None,
            "Q2": mean([r.get("Q2") for r in scored]), "Q2_no_nli": mean([r.get("Q2_no_nli") for r in scored]),
            "e2e_nli": mean([r.get("e2e_nli") for r in scored]),
            "n_items": len(recs), "n_scored": len(scored),
            "no_valid_question_share": mean([1.0 if r.get("no_valid_question") else 0.0 for r in scored]),
            "n_questions": sum(len(r.get("questions") or []) for r in scored),
            "statuses": statuses,
            "backends": {k: f"{v.get('backend')}:{v.get('name')}" for k, v in backends.items() if isinstance(v, dict)},
            "responses": responses, "group": roc_group(run.path)}


def q2_classification(runs: list[dict], threshold: float = 0.5) -> list[dict]:
    """Per ROC group (runs of one system, e.g. ``dodeca_consistent`` + ``dodeca_inconsistent``)
    and over all runs: ROC, AUC and accuracy at ``threshold`` for each score with gold labels."""
    groups: dict = {}
    for r in runs:
        groups.setdefault(r["group"], []).append(r)
    if len(groups) > 1:
        groups["all"] = runs
    out = []
    for name, rs in groups.items():
        entry = {"group": name, "runs": [r["name"] for r in rs], "metrics": {}}
        for key, label in (("q2", "Q2"), ("q2n", "Q2 no NLI"), ("e2e", "E2E NLI")):
            pairs_ = [(resp[key], resp["gold"]) for r in rs for resp in r["responses"]
                      if resp["st"] == "ok" and resp.get(key) is not None and resp["gold"] is not None]
            pts = roc_points(pairs_)
            if not pts:
                continue
            correct = sum(1 for s, g in pairs_ if (s > threshold) == g)
            entry["metrics"][key] = {"label": label, "n": len(pairs_), "auc": auc([s for s, _ in pairs_], [g for _, g in pairs_]), "points": pts,
                                     "accuracy": 100.0 * correct / len(pairs_),
                                     "n_consistent": sum(1 for _, g in pairs_ if g)}
        if entry["metrics"]:
            out.append(entry)
    return out
