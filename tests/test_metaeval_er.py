"""`meta-eval factscore-er`: the pieces, and one small end-to-end run with the 0.5B model."""
import json
from types import SimpleNamespace

import pytest

from fscore_lite.factscore.pipeline import FactScorer
from fscore_lite.metaeval import factscore_er as er
from fscore_lite.training.labeled import SUBJECTS


def test_f1_of_not_supported_class():
    pred = [True, False, False, True]
    human = [True, False, True, False]
    # NS as positive: tp=1 (idx1), fp=1 (idx2), fn=1 (idx3)
    assert er.f1_not_supported(pred, human) == pytest.approx(0.5)
    assert er.f1_not_supported([True], [True]) is None


def test_word_overlap_floor():
    page = "Ann Lee (born 1950) is a Canadian jazz pianist from Toronto."
    assert er.overlap_supported("Ann Lee is a jazz pianist.", page)
    assert not er.overlap_supported("Ann Lee is a Brazilian football coach.", page)


def test_sample_is_fixed_and_bounded():
    from fscore_lite.training.labeled import AnnotatedBio

    bios = [AnnotatedBio("S", i, f"T{i}", "", (), ()) for i in range(1, 20)]
    a, b = er.sample(bios, 5), er.sample(list(reversed(bios)), 5)
    assert [x.topic for x in a] == [x.topic for x in b] and len(a) == 5
    assert er.sample(bios, None) == bios


@pytest.fixture(scope="module")
def mini_data(tmp_path_factory, data_dir):
    """One short bio per subject (first annotated sentence only) on topics with wiki text."""
    root = tmp_path_factory.mktemp("data")
    pages = {json.loads(l)["topic"]: l for l in (data_dir / "wiki-factscore-dev" / "pages.jsonl").read_text().splitlines()}
    (root / "factscore-labeled").mkdir()
    used = []
    for subject in SUBJECTS:
        for line in (data_dir / "factscore-labeled" / f"{subject}.jsonl").read_text().splitlines():
            d = json.loads(line)
            if d["annotations"] and d["topic"] in pages and d["topic"] not in used and d["annotations"][0]["is-relevant"]:
                d["annotations"] = d["annotations"][:1]
                d["annotations"][0]["model-atomic-facts"] = d["annotations"][0]["model-atomic-facts"][:3]
                (root / "factscore-labeled" / f"{subject}.jsonl").write_text(json.dumps(d) + "\n")
                used.append(d["topic"])
                break
    (root / "wiki-mini").mkdir()
    (root / "wiki-mini" / "pages.jsonl").write_text("".join(pages[t] + "\n" for t in used))
    return root


def _check_report_against_raw_files(report, mini_data, out_dir):
    """Every number of the report recomputed from the raw files, independently of run_er."""
    assert [r["subject"] for r in report["subjects"]] == list(SUBJECTS)
    pages = {json.loads(l)["topic"]: json.loads(l)["text"]
             for l in (mini_data / "wiki-mini" / "pages.jsonl").read_text().splitlines()}
    for r in report["subjects"]:
        (bio,) = [json.loads(l) for l in (mini_data / "factscore-labeled" / f"{r['subject']}.jsonl").read_text().splitlines()]
        (ann,) = bio["annotations"]
        labels = [f["label"] for f in ann["human-atomic-facts"]]
        human = 100 * labels.count("S") / len(labels)  # S / (S + NS + IR), the sentence is relevant
        model_facts = [f["text"] for f in ann["model-atomic-facts"]]
        (out,) = [json.loads(l) for l in (out_dir / f"er-{r['subject']}-shared-context.jsonl").read_text().splitlines()]
        assert out["status"] == "ok" and [d["atom"] for d in out["decisions"]] == [f.strip() for f in model_facts]
        estimated = 100 * sum(d["is_supported"] for d in out["decisions"]) / len(model_facts)  # gamma 0
        assert r["n_bios"] == 1 and r["n_facts"] == len(model_facts)
        assert r["human"] == pytest.approx(human) and r["estimated"] == pytest.approx(estimated)
        assert r["error_rate"] == pytest.approx(abs(estimated - human))
        floor = 100 * sum(er.overlap_supported(f, pages[bio["topic"]]) for f in model_facts) / len(model_facts)
        assert r["baseline_estimated"] == pytest.approx(floor)
    by_estimate = [r["subject"] for r in sorted(report["subjects"], key=lambda r: r["estimated"])]
    assert report["ranking_preserved"] is (by_estimate == list(er.RANKING))


class _FakeScorer:
    """FactScorer without models: a fact is supported when it has an even number of words."""

    verifier, llm_loaded = SimpleNamespace(kind="fake", name=None), True
    retriever = SimpleNamespace(has_topic=lambda topic: True)
    summary = FactScorer.summary
    run_share = None

    def priors(self):
        return None  # the fake counts decisions

    def __init__(self, settings, options):
        from fscore_lite.cache import CallCache
        from fscore_lite.factscore.pipeline import Timings

        self.settings, self.cache = settings, CallCache(None)

        stats = type("Stats", (), {"calls": 0, "cached_calls": 0, "tokens_evaluated": 0, "tokens_reused": 0,
                                   "tokens_generated": 0})()
        self.llm = type("LLM", (), {"name": "fake", "sha256": "f" * 64, "stats": stats})()
        self._llm = self.llm
        self.store = type("Store", (), {"sha256": "s" * 64})()
        self.timings = Timings()
        self.options = options

    def describe(self):
        return {"settings": {"gamma": self.options.gamma}}

    def identity(self):
        return {"settings": self.describe()["settings"], "llm": self.llm.sha256, "store": self.store.sha256}

    def score_item(self, item, progress=None):
        facts = [f.strip() for f in item.facts if f.strip()]
        decisions = [{"atom": f, "is_supported": len(f.split()) % 2 == 0} for f in facts]
        init = sum(d["is_supported"] for d in decisions) / len(decisions)
        return dict(item.data, status="ok", score=init, init_score=init, num_facts=len(facts), decisions=decisions)


def test_er_report_numbers_with_a_fake_estimator(mini_data, tmp_path, monkeypatch, minilm_bundle_dir):
    """The report's arithmetic (human, estimated, ER, floor, ranking) without an LLM."""
    import fscore_lite.factscore.pipeline as pipeline
    from fscore_lite.settings import Settings

    monkeypatch.setattr(pipeline, "FactScorer", _FakeScorer)
    settings = Settings(home=tmp_path / "home", models_dir=minilm_bundle_dir, threads=1)
    report = er.run_er(mini_data, settings, mode="shared-context", store=tmp_path / "store", out=tmp_path / "out",
                       baseline=True, per_fact=False, progress=False)
    _check_report_against_raw_files(report, mini_data, tmp_path / "out")
    for r in report["subjects"]:  # the fake's rule, applied to the labeled model facts
        (bio,) = [json.loads(l) for l in (mini_data / "factscore-labeled" / f"{r['subject']}.jsonl").read_text().splitlines()]
        facts = [f["text"] for f in bio["annotations"][0]["model-atomic-facts"]]
        assert r["estimated"] == pytest.approx(100 * sum(len(f.split()) % 2 == 0 for f in facts) / len(facts))
        # one bio: the interval over resampled topics is that bio's own signed error
        assert r["signed_error_ci95"] == [pytest.approx(r["estimated"] - r["human"], abs=0.01)] * 2
    assert "InstructGPT" in er.format_error_cis(report["subjects"])


@pytest.mark.llm
def test_er_end_to_end_small(mini_data, settings_1t, tmp_path):
    report = er.run_er(mini_data, settings_1t.with_(home=tmp_path / "home"), mode="shared-context",
                       store=tmp_path / "store", out=tmp_path / "out", context_budget=512, baseline=True,
                       progress=False)
    _check_report_against_raw_files(report, mini_data, tmp_path / "out")
    text = er.format_report(report)
    assert "ER" in text and "InstructGPT" in text
    for r in report["subjects"]:
        lo, hi = r["signed_error_ci95"]
        assert lo - 0.01 <= r["estimated"] - r["human"] <= hi + 0.01
        if r["f1_ns"] is not None:
            assert r["f1_ns_ci95"][0] - 1e-4 <= r["f1_ns"] <= r["f1_ns_ci95"][1] + 1e-4
    # a rerun is served from the cache and gives the same report
    again = er.run_er(mini_data, settings_1t.with_(home=tmp_path / "home"), mode="shared-context",
                      store=tmp_path / "store", out=tmp_path / "out2", context_budget=512, progress=False)
    assert [r["estimated"] for r in again["subjects"]] == [r["estimated"] for r in report["subjects"]]


def test_bad_wiki_pages_name_the_file_and_line(tmp_path):
    """--data's pages: bad JSON or a missing field is an error naming the file and line, not a traceback."""
    from fscore_lite.errors import FscoreError

    pages = tmp_path / "wiki-x" / "pages.jsonl"
    pages.parent.mkdir()
    good = json.dumps({"title": "Ada Lovelace", "text": "Ada Lovelace was a mathematician."})
    pages.write_text(good + "\n\n" + '{"title": "B", "text": "unfinished\n')
    with pytest.raises(FscoreError, match=r"wiki-x/pages\.jsonl:3: malformed JSON"):
        er.wiki_pages(tmp_path)
    pages.write_text(good + "\n" + json.dumps({"title": "B", "body": "x"}) + "\n")
    with pytest.raises(FscoreError, match=r"pages\.jsonl:2: missing required field 'text'"):
        er.wiki_pages(tmp_path)
    pages.write_text(good + "\n" + json.dumps({"topic": "Grace Hopper", "title": "Hopper", "text": "G."}) + "\n")
    got, files = er.wiki_pages(tmp_path)
    assert got == {"Ada Lovelace": "Ada Lovelace was a mathematician.", "Grace Hopper": "G."} and files == [pages]
