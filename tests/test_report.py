"""`fscore-lite report`: HTML from score/q2 outputs, checked in the DOM and in headless Chromium.

Runs are real-format outputs: records built exactly as ``FactScorer.score_item`` writes them
(statuses, sentences with facts, decisions with margin and evidence), from the human-annotated
bios of ``factscore-labeled`` (their human facts and labels as the decisions) and from a small
hand-made run with a passage store; Q² records as ``Q2Scorer.score_item`` writes them.
"""
from __future__ import annotations

import json
import math
import re
import shutil
import tempfile
import time
from dataclasses import asdict
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from fscore_lite.factscore.atomic_facts import SentenceFacts  # score's sentences are asdict(SentenceFacts)
from fscore_lite.factscore.score import aggregate, response_score
from fscore_lite.report import write_report
from fscore_lite.stats import bootstrap_ci, paired_difference, score_ci95
from fscore_lite.report.figures import position_bin

REPO = Path(__file__).resolve().parent.parent
N_BIOS = 24  # per subject, the same topics for both subjects (paired)


# ---- run builders ------------------------------------------------------------------------------
def _decision(atom, supported, margin, evidence, **extra):
    return {"atom": atom, "is_supported": supported, "margin": margin, "rule": None, "evidence": evidence, **extra}


def scored_record(data: dict, sentences: list[dict] | None, decisions: list[dict], gamma=10) -> dict:
    """A record as score_item writes it for an "ok" item."""
    rec = dict(data)
    score, init = response_score([d["is_supported"] for d in decisions], gamma)
    rec.update(status="ok", score=round(score, 6), init_score=round(init, 6), num_facts=len(decisions),
               decisions=decisions)
    if sentences is not None:
        rec["sentences"] = sentences
    return rec


def bios_run(data_dir: Path, subject: str, n: int = N_BIOS, step: int = 7) -> list[dict]:
    """``n`` bios of a subject, every ``step``-th topic in alphabetical order (the same topics for
    every subject, all frequency categories): sentences and human facts (IR dropped) as the run's output."""
    out = []
    with open(data_dir / "factscore-labeled" / f"{subject}.jsonl", encoding="utf-8") as f:
        bios = sorted((json.loads(line) for line in f), key=lambda d: d["topic"])
        for d in bios[::step]:
            base = {"topic": d["topic"], "output": d["output"], "cat": d["cat"]}
            if d["annotations"] is None:
                out.append(base | {"status": "abstained", "score": None, "init_score": None, "decisions": None})
            else:
                sents, decs = [], []
                for a in d["annotations"]:
                    facts = [h for h in a.get("human-atomic-facts") or [] if h["label"] != "IR"]
                    sents.append(asdict(SentenceFacts(a["text"], [h["text"] for h in facts])))
                    for k, h in enumerate(facts):
                        decs.append(_decision(h["text"], h["label"] == "S", round(2.0 if h["label"] == "S" else -1.5, 4),
                                              [{"id": 1000 + k, "title": d["topic"], "score": round(0.9 - 0.1 * k, 5)}]))
                if decs:
                    out.append(scored_record(base, sents, decs))
                else:
                    out.append(base | {"status": "no_facts", "score": None, "init_score": None, "decisions": None,
                                       "sentences": sents})
            if len(out) == n:
                break
    return out


STORE_PAGES = {
    "Ada Lovelace": ["<s>Ada Lovelace was an English mathematician and writer.</s>",
                     "<s>She is known for her work on the Analytical Engine of Charles Babbage.</s>"],
    "Alan Turing": ["<s>Alan Turing was an English mathematician and computer scientist.</s>",
                    "<s>He was born in Maida Vale, London, in 1912.</s>"],
}


def write_store(path: Path) -> dict:
    from fscore_lite_index.writer import StoreWriter

    w = StoreWriter(path, 4)
    rng = np.random.default_rng(0)
    for title, psgs in STORE_PAGES.items():
        v = rng.normal(size=(len(psgs), 4)).astype(np.float32)
        w.add_page(title, psgs, v / np.linalg.norm(v, axis=1, keepdims=True), ())
    w.finish({"embed_model": "test-embed", "embed_sha256": "e" * 64, "dim": 4, "passage_count": w.passage_count,
              "source": "unit test"})
    from fscore_lite.store import open_store

    with open_store(path) as s:
        return {"sha256": s.sha256, "ids": {t: [p.id for p in s.page_passages(t)] for t in STORE_PAGES}}


def small_run(store: dict) -> list[dict]:
    """Every status score_item can write, generated facts with sentences, precomputed facts,
    the trained verifier's ``probability`` and per-passage ``passage_scores``."""
    ada, alan = store["ids"]["Ada Lovelace"], store["ids"]["Alan Turing"]
    ev_ada = [{"id": ada[1], "title": "Ada Lovelace", "score": 0.71234}, {"id": ada[0], "title": "Ada Lovelace", "score": 0.5}]
    ev_alan = [{"id": alan[1], "title": "Alan Turing", "score": 0.8}, {"id": alan[0], "title": "Alan Turing", "score": 0.4}]
    ada_out = ("Ada Lovelace was an English mathematician. She worked on the Analytical Engine. "
               "She was born in Paris.")
    recs = [
        scored_record({"topic": "Ada Lovelace", "output": ada_out, "cat": ["rare", "Europe/Middle East"]},
                      [asdict(SentenceFacts("Ada Lovelace was an English mathematician.", ["Ada Lovelace was English.", "Ada Lovelace was a mathematician."])),
                       asdict(SentenceFacts("She worked on the Analytical Engine.", ["Ada Lovelace worked on the Analytical Engine."])),
                       asdict(SentenceFacts("She was born in Paris.", ["Ada Lovelace was born in Paris."]))],
                      [_decision("Ada Lovelace was English.", True, 3.1, ev_ada),
                       _decision("Ada Lovelace was a mathematician.", True, 2.5, ev_ada),
                       _decision("Ada Lovelace worked on the Analytical Engine.", True, 1.25, ev_ada,
                                 probability=0.91, passage_scores=[0.95, 0.2]),
                       _decision("Ada Lovelace was born in Paris.", False, -2.0, ev_ada,
                                 probability=0.12, passage_scores=[0.1, 0.05])]),
        scored_record({"topic": "Alan Turing", "facts": ["Alan Turing was born in 1912.", "Alan Turing was French."],
                       "cat": ["very freq", "Europe/Middle East"]}, None,
                      [_decision("Alan Turing was born in 1912.", True, 1.0, ev_alan),
                       _decision("Alan Turing was French.", False, -1.0, ev_alan)]),
        {"topic": "Nobody Known", "output": "I'm sorry, I cannot find information.", "status": "abstained",
         "score": None, "init_score": None, "decisions": None},
        {"topic": "Zyx Qwerty", "output": "Zyx Qwerty is a painter.", "status": "topic_not_found", "score": None,
         "init_score": None, "decisions": None,
         "error": "topic 'Zyx Qwerty' is not a page of the store (use --search-all to search the whole store)"},
        {"topic": "Ada Lovelace", "output": "", "status": "empty_output", "error": "in.jsonl:5: field 'output' is empty",
         "score": None, "init_score": None, "decisions": None},
    ]
    return recs


def write_run(path: Path, records: list[dict], summary: dict | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    if summary is not None:
        summary = aggregate(records) | summary
        path.with_name(path.name[: -len(".jsonl")] + ".summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return path


def _summary(store_path=None, store_sha="s" * 64, verifier=None):
    settings = {"mode": "parity", "prompt_style": "completion (reference)"}
    if verifier:
        settings["verifier"] = verifier
    return {"models": {"llm": {"name": "qwen2.5-coder-1.5b-instruct-q4_k_m", "sha256": "a1" * 32},
                       "embed": {"name": "all-minilm-l6-v2-int8", "sha256": "b2" * 32}},
            "store": {"path": str(store_path) if store_path else "/nonexistent", "sha256": store_sha},
            "settings": settings}


def q2_record(response, knowledge, questions, status="ok", **extra):
    rec = {"response": response, "knowledge": knowledge, **extra, "status": status}
    if status != "ok":
        return rec | {"Q2": None, "Q2_no_nli": None}
    valid = [{"candidate": c, "question": q, "response_answer": c, "knowledge_answer": ka,
              "knowledge_no_answer": ka is None, "f1": f1, "nli_label": nli, "score": s}
             for c, q, ka, f1, nli, s in questions]
    out = {"Q2": None, "Q2_no_nli": None, "no_valid_question": not valid, "fallback": None,
           "candidates": [{"candidate": v["candidate"], "generated": [v["question"]], "checked": []} for v in valid],
           "questions": valid}
    if valid:
        out["Q2"] = sum(v["score"] for v in valid) / len(valid)
        out["Q2_no_nli"] = sum(v["f1"] for v in valid) / len(valid)
    else:
        out["fallback"] = {"label": "contradiction", "score": 0.0}
        out["Q2"] = out["Q2_no_nli"] = 0.0
    return rec | out


def q2_runs(tmp: Path) -> list[Path]:
    cons = [q2_record("gardening is considered relaxing .", "Gardening is considered by many to be relaxing.",
                      [("gardening", "What is considered relaxing?", "Gardening", 1.0, None, 1.0)], topic="Gardening"),
            q2_record("it aired in the us and canada", "It aired on PBS in the United States and Canada.",
                      [("canada", "Where did it air?", "the United States and Canada", 0.4, "entailment", 1.0)],
                      topic="Bob Ross"),
            q2_record("i love indian food", "Indian cuisine is varied.", [], topic="Indian cuisine")]
    inc = [q2_record("they are very well behaved .", "Useful tree species were identified.",
                     [("well behaved", "What are they?", None, 0.0, "contradiction", 0.0)], topic="Gardening"),
           q2_record("it was made in 1990", "It aired from 1983 to 1994.",
                     [("1990", "When was it made?", "1983", 0.0, "neutral", 0.0)], topic="Bob Ross"),
           q2_record("", "x", [], status="empty_response", topic="Empty")]
    return [write_run(tmp / "dodeca_consistent.q2.jsonl", cons), write_run(tmp / "dodeca_inconsistent.q2.jsonl", inc)]


# ---- DOM -------------------------------------------------------------------------------------------
class Dom(HTMLParser):
    """Elements with their attributes and classes, and the embedded JSON."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []
        self._script = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.elements.append((tag, a))
        if tag == "script":
            self._script = (a, [])

    def handle_endtag(self, tag):
        if tag == "script" and self._script is not None:
            self.scripts.append((self._script[0], "".join(self._script[1])))
            self._script = None

    def handle_data(self, data):
        if self._script is not None:
            self._script[1].append(data)

    def find(self, tag=None, cls=None, **attrs):
        out = []
        for t, a in self.elements:
            if tag and t != tag:
                continue
            if cls and cls not in (a.get("class") or "").split():
                continue
            if all(a.get(k.replace("_", "-")) == str(v) for k, v in attrs.items()):
                out.append(a)
        return out

    def data(self) -> dict:
        return json.loads(next(s for a, s in self.scripts if a.get("id") == "report-data"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_dir):
    tmp = tmp_path_factory.mktemp("report")
    store = write_store(tmp / "store")
    paths = {
        "small": write_run(tmp / "small.jsonl", small_run(store), _summary(tmp / "store", store["sha256"],
                                                                         verifier="trained combiner v1")),
        "ChatGPT": write_run(tmp / "ChatGPT.jsonl", bios_run(data_dir, "ChatGPT"), _summary()),
        "InstructGPT": write_run(tmp / "InstructGPT.jsonl", bios_run(data_dir, "InstructGPT")),
    }
    return tmp, paths, store


def _records(path):
    return [json.loads(l) for l in Path(path).read_text(encoding="utf-8").splitlines()]


def test_dom_counts_match_the_runs(runs):
    tmp, paths, _ = runs
    order = ["small", "ChatGPT", "InstructGPT"]
    out = write_report([paths[k] for k in order], tmp / "r.html")
    html = out.read_text(encoding="utf-8")
    dom = Dom(html)
    data = dom.data()
    assert [r["name"] for r in data["factscore"]] == order
    for i, key in enumerate(order):
        recs = _records(paths[key])
        rows = dom.find("div", "resp", data_kind="factscore", data_run=i)
        assert len(rows) == len(recs)
        assert [r["data-status"] for r in rows] == [r["status"] for r in recs]
        n_facts = sum(len(r.get("decisions") or []) for r in recs)
        n_unsup = sum(1 for r in recs for d in r.get("decisions") or [] if not d["is_supported"])
        n_sents = sum(1 for r in recs if r.get("decisions") for s in r.get("sentences") or [] if s["facts"])
        assert n_facts > 0
        assert sum(int(r["data-nf"]) for r in rows) == n_facts
        assert sum(int(r["data-ns"]) for r in rows if r["data-ns"] != "-") == n_unsup
        assert sum(int(r["data-nsent"]) for r in rows) == n_sents
        # the embedded data the script renders: the same facts, decisions and sentence groups
        resp = data["factscore"][i]["responses"]
        assert sum(len(x["facts"]) for x in resp) == n_facts
        assert [f["ok"] for x in resp for f in x["facts"]] == [d["is_supported"] for r in recs
                                                                for d in r.get("decisions") or []]
        for x, r in zip(resp, recs):
            if r.get("sentences") and r.get("decisions"):
                assert [len(s["f"]) for s in x["sents"]] == [len(s["facts"]) for s in r["sentences"]]
                assert [x["facts"][j]["a"] for s in x["sents"] for j in s["f"]] == [d["atom"] for d in r["decisions"]]
    # self-contained: no external resource of any kind
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)
    assert "@import" not in html and "url(" not in html
    assert all(not a.get("src") for t, a in dom.elements if t in ("script", "img", "link", "iframe"))


def test_statuses_probability_and_passages(runs):
    tmp, paths, store = runs
    out = write_report([paths["small"]], tmp / "small.html")
    dom = Dom(out.read_text(encoding="utf-8"))
    data = dom.data()
    statuses = [r["data-status"] for r in dom.find("div", "resp")]
    assert statuses == ["ok", "ok", "abstained", "topic_not_found", "empty_output"]
    summary_row = dom.find("tr", "run")[0]
    assert summary_row["data-rank"] == "1"
    html = out.read_text(encoding="utf-8")
    assert "trained combiner v1" in html and "parity" in html
    assert "a1a1a1a1a1a1" in html  # LLM sha256, shortened
    assert store["sha256"][:12] in html
    resp = data["factscore"][0]["responses"]
    assert resp[0]["facts"][2]["p"] == 0.91 and resp[0]["facts"][2]["ev"][0]["ps"] == 0.95
    assert resp[0]["facts"][0]["m"] == 3.1
    assert resp[1]["sents"] is None and len(resp[1]["facts"]) == 2  # precomputed facts: listed, no sentences
    assert "not a page of the store" in resp[3]["err"]
    # evidence texts from the run's store, keyed by store hash and passage id
    k = resp[0]["facts"][0]["ev"][0]["k"]
    assert k == f"{store['sha256'][:12]}:{store['ids']['Ada Lovelace'][1]}"
    assert "Analytical Engine" in data["passages"][k]["text"]


def test_intervals_contain_the_estimate(runs):
    tmp, paths, _ = runs
    out = write_report([paths["ChatGPT"], paths["InstructGPT"]], tmp / "pair.html", n_boot=500)
    dom = Dom(out.read_text(encoding="utf-8"))
    rows = dom.find("tr", "run")
    assert len(rows) == 2
    scores = [float(a["data-value"]) for a in dom.find("td", "score")]
    cis = [(float(a["data-lo"]), float(a["data-hi"])) for a in dom.find("td", "ci")]
    assert scores == sorted(scores, reverse=True)  # ranked
    for s, (lo, hi) in zip(scores, cis):
        assert lo <= s <= hi and hi - lo > 0.01
    expected = sorted(aggregate(_records(paths[k]))["score"] for k in ("ChatGPT", "InstructGPT"))[::-1]
    assert scores == pytest.approx(expected)
    pair = dom.find("tr", "pair")
    assert len(pair) == 1
    p = pair[0]
    mean, lo, hi = float(p["data-mean"]), float(p["data-lo"]), float(p["data-hi"])
    assert lo <= mean <= hi
    # the paired difference is over the topics both runs scored
    a = {r["topic"]: r["score"] for r in _records(paths["ChatGPT"]) if r["status"] == "ok"}
    b = {r["topic"]: r["score"] for r in _records(paths["InstructGPT"]) if r["status"] == "ok"}
    shared = [t for t in a if t in b]
    assert int(p["data-n"]) == len(shared)
    diffs = [a[t] - b[t] for t in shared]
    sign = 1 if scores[0] == pytest.approx(aggregate(_records(paths["ChatGPT"]))["score"]) else -1
    assert mean == pytest.approx(sign * sum(diffs) / len(diffs))


def test_figure2_bins_cover_every_fact_once(runs):
    tmp, paths, _ = runs
    out = write_report([paths["ChatGPT"], paths["InstructGPT"]], tmp / "fig.html", position_bins=5)
    dom = Dom(out.read_text(encoding="utf-8"))
    for i, kind in enumerate(("ChatGPT", "InstructGPT")):
        recs = [r for r in _records(paths[kind]) if r["status"] == "ok"]
        n_facts = sum(len(r["decisions"]) for r in recs)
        n_sup = sum(1 for r in recs for d in r["decisions"] if d["is_supported"])
        # the series index follows the ranking-independent run order
        pos = [a for t, a in dom.elements if t == "g" and "pt" in a.get("class", "") and a.get("data-run") == str(i)
               and a.get("data-label", "").endswith("%")]
        cat = [a for t, a in dom.elements if t == "g" and "pt" in a.get("class", "") and a.get("data-run") == str(i)
               and not a.get("data-label", "").endswith("%")]
        assert len(pos) == 5
        assert sum(int(a["data-n-facts"]) for a in pos) == n_facts
        assert sum(int(a["data-n-supported"]) for a in pos) == n_sup
        assert sum(int(a["data-n-facts"]) for a in cat) == n_facts
        assert sum(int(a["data-n-responses"]) for a in cat) == len(recs)
        cats = {r["cat"][0] for r in recs}
        assert {a["data-label"] for a in cat} >= cats
    labels = [a["data-label"] for t, a in dom.elements if t == "g" and a.get("data-run") == "0"
              and not a.get("data-label", "").endswith("%")]
    assert labels == [c for c in ("very rare", "rare", "medium", "freq", "very freq") if c in labels]


def test_position_bins_partition():
    for n in range(1, 40):
        for bins in (1, 3, 5, 10):
            got = [position_bin(i, n, bins) for i in range(n)]
            assert got == sorted(got) and all(0 <= b < bins for b in got)
            if n >= bins:
                assert got[0] == 0 and got[-1] == bins - 1
            if n % bins == 0:  # quantile bins: equal shares of each response's facts
                assert all(got.count(b) == n // bins for b in range(bins))


def test_bootstrap_is_seeded_and_sane():
    vals = [0.2, 0.93, 0.51, 0.77, 0.41, 1.0, 0.03, 0.66, 0.12, 0.58]
    ci = bootstrap_ci(vals)
    assert ci == bootstrap_ci(vals)  # deterministic
    assert ci != bootstrap_ci(vals, seed=1)
    mean = sum(vals) / len(vals)
    assert ci[0] < mean < ci[1] and 0 <= ci[0] and ci[1] <= 1
    # a large sample: the percentile interval is close to the normal one, mean ± 1.96 s/√n
    big = [float(x) for x in np.random.default_rng(3).beta(2, 3, size=400)]
    m, sd = float(np.mean(big)), float(np.std(big, ddof=1))
    lo, hi = bootstrap_ci(big, n_boot=2000)
    assert lo == pytest.approx(m - 1.96 * sd / math.sqrt(400), abs=0.004)
    assert hi == pytest.approx(m + 1.96 * sd / math.sqrt(400), abs=0.004)
    assert bootstrap_ci([]) is None and bootstrap_ci([0.5]) == (0.5, 0.5)
    d = paired_difference({"a": 1.0, "b": 0.5, "c": 0.8}, {"a": 0.5, "b": 0.5, "d": 0.1})
    assert d["n"] == 2 and d["mean"] == pytest.approx(0.25)
    assert d["ci"][0] <= d["mean"] <= d["ci"][1]
    assert paired_difference({"a": 1.0}, {"b": 1.0}) is None


def test_clustered_interval_resamples_whole_groups():
    from fscore_lite.stats import signed_error_ci
    from fscore_lite.stats import clustered_mean_ci

    rng = np.random.default_rng(5)
    # one value per group: the same interval as the plain bootstrap draws with the same seed
    single = {f"t{i:02d}": [float(v)] for i, v in enumerate(rng.normal(size=30))}
    flat = [v[0] for _, v in sorted(single.items())]
    assert clustered_mean_ci(single) == bootstrap_ci(flat)
    # the key order of the dict does not matter
    assert clustered_mean_ci(dict(reversed(list(single.items())))) == clustered_mean_ci(single)
    # groups of perfectly correlated values: as wide as one value per group, not √3 narrower
    tripled = {k: v * 3 for k, v in single.items()}
    lo1, hi1 = clustered_mean_ci(single)
    lo3, hi3 = clustered_mean_ci(tripled)
    assert (lo3, hi3) == pytest.approx((lo1, hi1))
    loose_lo, loose_hi = bootstrap_ci([x for _, v in sorted(tripled.items()) for x in v])
    assert loose_hi - loose_lo < 0.7 * (hi3 - lo3)  # resampling values one by one understates it
    # a group counts with its size in the mean, as in the plain mean of all values
    lo, hi = clustered_mean_ci({"a": [1.0, 1.0, 1.0], "b": [0.0]})
    assert lo <= 0.75 <= hi and clustered_mean_ci({}) is None and clustered_mean_ci({"a": []}) is None
    # a subject's signed error in points, estimate minus human, grouped by topic
    ci = signed_error_ci([0.5, 0.7, 0.2, 0.9], [0.4, 0.6, 0.3, 0.6], ["x", "x", "y", "z"])
    mean = 100 * (0.1 + 0.1 - 0.1 + 0.3) / 4
    assert ci[0] <= mean <= ci[1] and ci[0] >= -10 - 1e-9 and ci[1] <= 30 + 1e-9


def test_clustered_f1_interval_sums_the_counts_of_the_topics_drawn():
    from fscore_lite.stats import f1_not_supported, f1_ns_ci
    from fscore_lite.stats import clustered_ratio_ci

    rng = np.random.default_rng(11)
    topics = [f"t{i % 25}" for i in range(400)]
    human = [bool(x) for x in rng.random(400) < 0.6]
    pred = [h if r < 0.75 else not h for h, r in zip(human, rng.random(400))]  # right 3 times in 4
    f1 = f1_not_supported(pred, human)
    lo, hi = f1_ns_ci(pred, human, topics)
    assert lo <= f1 <= hi and hi - lo > 0.02 and f1_ns_ci(pred, human, topics) == [lo, hi]
    # all facts in one topic: nothing to resample, the interval is the point
    assert f1_ns_ci(pred, human, ["t"] * 400) == [round(f1, 4)] * 2
    # a topic whose facts are all supported and judged so has no F1 weight; no weight at all: None
    assert f1_ns_ci([True, True], [True, True], ["a", "b"]) is None
    assert clustered_ratio_ci({"a": (1.0, 0.0), "b": (2.0, 4.0)}) == (0.5, 0.5)


def test_score_summary_has_ci95():
    items = []
    for k in (2, 3, 4, 5, 7):
        dec = [{"is_supported": i % k != 0} for i in range(12)]
        score, init = response_score([d["is_supported"] for d in dec])
        items.append({"status": "ok", "decisions": dec, "score": score, "init_score": init})
    items.append({"status": "abstained", "decisions": None})
    out = aggregate(items)
    lo, hi = out["score_ci95"]
    assert lo <= out["score"] <= hi and lo < hi
    assert out["score_ci95"] == aggregate(items)["score_ci95"]
    assert out["score_ci95"] == score_ci95([response_score([d["is_supported"] for d in it["decisions"]])[0]
                                             for it in items[:-1]])
    assert aggregate([{"status": "abstained", "decisions": None}])["score_ci95"] is None


def test_q2_view_with_gold_labels(tmp_path):
    paths = q2_runs(tmp_path)
    out = write_report(paths, tmp_path / "q2.html")
    dom = Dom(out.read_text(encoding="utf-8"))
    data = dom.data()
    assert data["factscore"] == [] and len(data["q2"]) == 2
    rows = dom.find("div", "resp", data_kind="q2")
    assert len(rows) == 6
    assert sum(int(r["data-nq"]) for r in rows) == 4
    assert [r["data-status"] for r in rows].count("empty_response") == 1
    gold = {(a["data-group"], a["data-score"]): a for a in dom.find("tr", "gold")}
    g = gold[("dodeca", "q2")]
    # scored: 3 consistent (1.0, 1.0, 0.0 fallback) and 2 inconsistent (0.0, 0.0): 4 of 5 right at 0.5
    assert int(g["data-n"]) == 5 and float(g["data-accuracy"]) == pytest.approx(80.0)
    assert float(g["data-auc"]) == pytest.approx(((2 * 2) + 0.5 * 2) / 6)
    assert dom.find("svg", "chart", id="q2-roc") and dom.find("svg", "chart", id="q2-hist")
    q = data["q2"][0]["responses"][1]["qs"][0]
    assert q["nli"] == "entailment" and q["f1"] == 0.4 and q["ka"] == "the United States and Canada"
    assert data["q2"][1]["responses"][0]["qs"][0]["kna"] is True


def test_cli_writes_the_report(runs, tmp_path):
    _, paths, _ = runs
    from typer.testing import CliRunner

    from fscore_lite.cli import app

    out = tmp_path / "cli.html"
    res = CliRunner().invoke(app, ["report", str(paths["small"]), str(paths["ChatGPT"]), "-o", str(out),
                                   "--label", "small run", "--label", "chatgpt", "--bootstrap", "200"])
    assert res.exit_code == 0, res.output
    assert res.output.strip() == str(out)
    dom = Dom(out.read_text(encoding="utf-8"))
    assert [r["name"] for r in dom.data()["factscore"]] == ["small run", "chatgpt"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"topic": "x"}\n', encoding="utf-8")
    res = CliRunner().invoke(app, ["report", str(bad), "-o", str(tmp_path / "x.html")])
    assert res.exit_code != 0
    assert "neither `score` output" in str(res.exception)  # main() prints it as "error: ..." with status 2
    assert not (tmp_path / "x.html").exists()


def test_report_is_reproducible(runs, tmp_path):
    _, paths, _ = runs
    a = write_report([paths["ChatGPT"], paths["InstructGPT"]], tmp_path / "a.html").read_bytes()
    b = write_report([paths["ChatGPT"], paths["InstructGPT"]], tmp_path / "b.html").read_bytes()
    assert a == b


# ---- headless Chromium ---------------------------------------------------------------------------
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def browser_page(tmp_path_factory):
    """A headless Chromium page (Debian's chromium, driven by playwright) that refuses and records
    every request that is not to a local file, and records console errors."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium is not installed and could not be: `make test` installs it with "
                    "`apt-get install -y chromium` (needs root and the Debian archive)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright package is missing: install the test extra (pip install -e '.[test]')")
    profile = tempfile.mkdtemp(prefix="fscore-chromium-")
    pw = sync_playwright().start()
    try:
        ctx = pw.chromium.launch_persistent_context(profile, executable_path=exe, headless=True, args=CHROMIUM_ARGS,
                                                    viewport={"width": 1280, "height": 900}, offline=True)
        page = ctx.pages[0] if ctx.pages else ctx.new_page()
        log = {"external": [], "console_errors": [], "page_errors": []}

        def route(r):
            url = r.request.url
            if url.startswith(("file:", "data:", "about:")):
                r.continue_()
            else:
                log["external"].append(url)
                r.abort()

        ctx.route("**/*", route)
        page.on("console", lambda m: log["console_errors"].append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: log["page_errors"].append(str(e)))
        yield page, log
        ctx.close()
    finally:
        pw.stop()
        shutil.rmtree(profile, ignore_errors=True)


def _open(page, path: Path) -> float:
    t0 = time.perf_counter()
    page.goto(path.resolve().as_uri(), wait_until="load")
    page.wait_for_function("document.documentElement.dataset.ready === '1'", timeout=10_000)
    return time.perf_counter() - t0


def test_browser_renders_clicks_and_screenshot(runs, browser_page):
    tmp, paths, _ = runs
    page, log = browser_page
    out = write_report([paths["small"], paths["ChatGPT"], paths["InstructGPT"]], tmp / "browser.html")
    _open(page, out)
    assert log["external"] == [] and log["console_errors"] == [] and log["page_errors"] == []
    # every response rendered: highlighted sentences and facts equal the JSONL
    page.evaluate("""() => document.querySelectorAll('#factscore-list .resp').forEach(r => fscoreReport.toggle(r))""")
    for i, key in enumerate(["small", "ChatGPT", "InstructGPT"]):
        recs = _records(paths[key])
        sel = f'#factscore-list .resp[data-run="{i}"]'
        n_sent = page.locator(f"{sel} .sent:not(.nofacts)").count()
        n_listed = page.locator(f"{sel} .facts.all .fact").count()
        facts_in_sents = page.evaluate(f"""() => [...document.querySelectorAll('{sel} .sent')]
                                           .reduce((a, s) => a + (+s.dataset.n), 0)""")
        want_sents = sum(1 for r in recs if r.get("decisions") for s in r.get("sentences") or [] if s["facts"])
        want_listed = sum(len(r["decisions"]) for r in recs if r.get("decisions") and not r.get("sentences"))
        assert n_sent == want_sents
        assert n_listed == want_listed
        assert facts_in_sents + n_listed == sum(len(r.get("decisions") or []) for r in recs)
    page.evaluate("""() => document.querySelectorAll('#factscore-list .resp').forEach(r => fscoreReport.toggle(r))""")
    # only "not supported": rows without an unsupported fact disappear, statuses stay visible
    page.check("#factscore-ns")
    visible = page.locator("#factscore-list .resp:visible").count()
    all_recs = [r for k in ("small", "ChatGPT", "InstructGPT") for r in _records(paths[k])]
    assert visible == sum(1 for r in all_recs if r["status"] != "ok"
                          or any(not d["is_supported"] for d in r["decisions"]))
    page.uncheck("#factscore-ns")
    # one response: click it, click a sentence, see its facts and the evidence with shared words marked
    page.select_option("#factscore-run", "0")
    page.fill("#factscore-search", "ada lovelace")
    row = page.locator('#factscore-list .resp[data-run="0"][data-i="0"]')
    row.locator(".rhead").click()
    row.locator(".sent", has_text="born in Paris").click()
    facts = row.locator(".facts .fact")
    assert facts.count() == 1
    assert "Ada Lovelace was born in Paris." in facts.first.inner_text()
    assert "not supported" in facts.first.inner_text() and "p(supported) 0.120" in facts.first.inner_text()
    row.locator(".sent", has_text="Analytical Engine").click()
    assert row.locator(".facts .fact").count() == 1
    row.locator(".facts .fact summary").first.click()
    ev = row.locator(".facts .fact .ev").first
    assert "Analytical Engine" in ev.inner_text() and "passage score 0.950" in ev.inner_text()
    assert ev.locator("mark").count() >= 2
    assert log["external"] == [] and log["console_errors"] == [] and log["page_errors"] == []
    (REPO / "out").mkdir(exist_ok=True)
    shot = REPO / "out" / "report-browser.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000


def test_browser_q2_view(tmp_path, browser_page):
    page, log = browser_page
    out = write_report(q2_runs(tmp_path), tmp_path / "q2.html")
    _open(page, out)
    row = page.locator('#q2-list .resp[data-run="0"][data-i="1"]')
    row.locator(".rhead").click()
    assert row.locator("tr.qa").count() == 1
    assert row.locator("mark.qspan").inner_text() == "canada"
    assert "entailment" in row.locator("tr.qa").inner_text()
    row.locator("mark.qspan").click()
    assert row.locator("tr.qa.active").count() == 1
    assert page.locator("#q2-roc polyline.roc").count() >= 1
    assert log["external"] == [] and log["console_errors"] == [] and log["page_errors"] == []
    (REPO / "out").mkdir(exist_ok=True)
    page.screenshot(path=str(REPO / "out" / "report-q2.png"), full_page=True)


def test_browser_500_responses_open_fast(tmp_path, data_dir, browser_page):
    page, log = browser_page
    recs = []
    for subject in ("ChatGPT", "InstructGPT", "PerplexityAI"):
        for r in bios_run(data_dir, subject, n=10_000, step=1):
            recs.append(r | {"topic": f"{r['topic']} ({subject})"})
    recs = recs[:500]
    assert len(recs) == 500
    out = write_report([write_run(tmp_path / "big.jsonl", recs)], tmp_path / "big.html")
    _open(page, out)  # warm-up: first start of the renderer
    seconds = min(_open(page, out) for _ in range(2))
    size_mb = out.stat().st_size / 1e6
    (REPO / "out").mkdir(exist_ok=True)
    (REPO / "out" / "report-500-load.txt").write_text(f"500 responses, {size_mb:.1f} MB: opened in {seconds:.3f} s\n")
    assert seconds < 2.0, f"500-response report took {seconds:.2f} s to open"
    assert page.locator("#factscore-list .resp").count() == 500
    last = max(i for i, r in enumerate(recs) if r.get("sentences") and r.get("decisions"))
    page.locator("#factscore-list .resp .rhead").nth(last).click()
    assert page.locator("#factscore-list .resp").nth(last).locator(".sent").count() == len(recs[last]["sentences"])
    assert log["external"] == [] and log["console_errors"] == [] and log["page_errors"] == []


# ---- doctor and --json ---------------------------------------------------------------------------
def _toy_bundle(root: Path) -> Path:
    from fscore_lite.manifest import Bundle, ModelEntry, describe_file

    bundle = Bundle(root)
    for name, role, size in (("toy-llm", "llm", 5000), ("toy-embed", "embed", 3000)):
        (root / name).mkdir(parents=True)
        (root / name / "w.bin").write_bytes(bytes(range(256)) * (size // 256))
        bundle.add(ModelEntry(name=name, role=role, architecture="toy", quantization="Q8_0", license="MIT (toy)",
                              source="test", files=(describe_file(root, f"{name}/w.bin", "weights"),)))
    bundle.save()
    return root


def test_models_list_json_has_the_table_fields(tmp_path):
    from typer.testing import CliRunner

    from fscore_lite.cli import app
    from fscore_lite.manifest import Bundle

    root = _toy_bundle(tmp_path / "bundle")
    res = CliRunner().invoke(app, ["models", "list", "--json", "--models-dir", str(root)])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    entries = Bundle(root).entries
    assert [m["name"] for m in got["models"]] == ["toy-llm", "toy-embed"]  # role order, as the table
    llm = got["models"][0]
    assert llm == {"name": "toy-llm", "role": "llm", "quantization": "Q8_0", "size": 4864,
                   "sha256": entries["toy-llm"].sha256, "license": "MIT (toy)"}


def test_doctor_reports_installed_and_missing(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from fscore_lite.cli import app

    home = tmp_path / "home"
    for var in ("FSCORE_LITE_MODELS", "FSCORE_LITE_STORE", "FSCORE_LITE_LLM"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("FSCORE_LITE_HOME", str(home))
    monkeypatch.setenv("FSCORE_LITE_LLM", "toy-llm")
    _toy_bundle(home / "models")
    store = write_store(home / "stores" / "mine")
    (home / "calls.sqlite").write_bytes(b"x" * 1234)
    res = CliRunner().invoke(app, ["doctor", "--json", "--threads", "1"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["threads"] == 1 and d["cache"]["size"] == 1234
    assert {m["name"]: m["ok"] for m in d["models"]} == {"toy-llm": True, "toy-embed": True}
    (s,) = d["stores"]
    assert s["ok"] and s["sha256"] == store["sha256"] and s["passages"] == 4 and s["pages"] == 2
    missing = "\n".join(d["missing"])
    assert "embedder all-minilm-l6-v2-int8 is not installed" in missing
    assert "test-embed, which is not installed" in missing  # the store's embedder
    assert "default store" in missing and "stores/demo does not exist" in missing
    assert d["versions"]["numpy"] == np.__version__
    # a damaged model file is reported, with the fix
    (home / "models" / "toy-llm" / "w.bin").write_bytes(b"short")
    text = CliRunner().invoke(app, ["doctor"]).stdout
    assert "BAD llm" in text and "toy-llm: toy-llm/w.bin has 5 bytes" in text
    assert "mine" in text and store["sha256"][:12] in text


def test_human_beside_estimated(tmp_path, data_dir):
    """An estimator-error-rate run (precomputed model facts, gamma 0, as meta-eval factscore-er
    writes it) with --human: the human FActScore of the same bios, side by side, paired."""
    from typer.testing import CliRunner

    from fscore_lite.cli import app
    from fscore_lite.metaeval.factscore_human import human_score
    from fscore_lite.training.labeled import load_subject

    bios = [b for b in load_subject(data_dir, "InstructGPT") if b.responded and b.model_facts()][:12]
    recs = []
    for k, b in enumerate(bios):
        facts = b.model_facts()
        decs = [_decision(f, (i + k) % 3 != 0, 0.5, []) for i, f in enumerate(facts)]
        recs.append(scored_record({"topic": b.topic, "facts": facts, "bio_line": b.line}, None, decs, gamma=0))
    run = write_run(tmp_path / "er-InstructGPT-parity.jsonl", recs)
    (tmp_path / "er-InstructGPT-parity.summary.json").write_text(json.dumps(aggregate(recs, gamma=0)))
    out = tmp_path / "h.html"
    res = CliRunner().invoke(app, ["report", str(run), "-o", str(out), "--human", str(data_dir)])
    assert res.exit_code == 0, res.output
    dom = Dom(out.read_text(encoding="utf-8"))
    names = [r["name"] for r in dom.data()["factscore"]]
    assert names == ["er-InstructGPT-parity", "human: InstructGPT (er-InstructGPT-parity)"]
    scores = {int(r["data-run"]): float(s["data-value"])
              for r, s in zip(dom.find("tr", "run"), dom.find("td", "score"))}
    want_human = sum(human_score(b) for b in bios) / len(bios)
    assert scores[1] == pytest.approx(want_human, abs=1e-6)
    assert scores[0] == pytest.approx(aggregate(recs, gamma=0)["score"])
    (pair,) = dom.find("tr", "pair")
    assert int(pair["data-n"]) == len(bios)
    assert abs(float(pair["data-mean"])) == pytest.approx(abs(scores[0] - scores[1]), abs=1e-6)
    # the human run carries the bios' sentences, so its facts are highlighted per sentence
    hresp = dom.data()["factscore"][1]["responses"]
    assert all(r["sents"] for r in hresp) and [r["t"] for r in hresp] == [b.topic for b in bios]
    # the estimated run's records had no category: they get the bios' for Figure 2
    est = dom.data()["factscore"][0]["responses"]
    assert [r["cat"] for r in est] == [b.category[0] for b in bios]
