"""`meta-eval factscore-er --report` and `meta-eval q2 --report`: the HTML report of their outputs."""
import json

from typer.testing import CliRunner

from fscore_lite.cli import app


def _q2_rows(label):
    score = 0.9 if label == "consistent" else 0.2
    return [{"response": f"r{i}", "knowledge": "k", "status": "ok", "Q2": score - 0.1 * i, "Q2_no_nli": score,
             "no_valid_question": False, "questions": [], "e2e_nli": score} for i in range(2)]


def test_meta_eval_q2_report_has_the_four_files_with_gold_labels(tmp_path, monkeypatch):
    import fscore_lite.metaeval.q2_wow as q2_wow

    def fake_run(data, settings, *, limit=None, out_dir=None, **kw):  # the files run_q2_wow writes
        for key, _ in q2_wow.SYSTEMS:
            for label in q2_wow.LABELS:
                p = out_dir / "q2-wow" / f"{key}_{label}.q2.jsonl"
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text("".join(json.dumps(r) + "\n" for r in _q2_rows(label)))
        return {"fake": True}

    monkeypatch.setattr(q2_wow, "run_q2_wow", fake_run)
    report = tmp_path / "rep" / "q2.html"
    res = CliRunner().invoke(app, ["meta-eval", "q2", "--out", str(tmp_path / "out"), "--report", str(report),
                                   "--json", "-q"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["report"] == str(report)
    html = report.read_text()
    for key, _ in q2_wow.SYSTEMS:
        for label in q2_wow.LABELS:
            assert f"{key}_{label}" in html
    assert "AUC" in html  # gold labels from the file names reached the ROC section


def test_meta_eval_er_report_puts_human_beside_estimated(tmp_path, monkeypatch, data_dir):
    """With a stand-in estimator (no models): the report holds each estimated run and its human run."""
    import fscore_lite.factscore.pipeline as pipeline
    import fscore_lite.metaeval.factscore_er as er
    from fscore_lite.factscore.pipeline import Timings
    from fscore_lite.settings import Settings

    from types import SimpleNamespace

    from fscore_lite.cache import CallCache

    class Scorer:
        verifier, llm_loaded = SimpleNamespace(kind="fake", name=None), False
        retriever = SimpleNamespace(has_topic=lambda topic: True)
        summary = pipeline.FactScorer.summary
        run_share = None  # counts decisions: no run share is estimated

        def __init__(self, settings, options):
            self.settings, self.options, self.timings = settings, options, Timings()
            self.cache = CallCache(None)
            self.store = type("S", (), {"sha256": "s" * 64})()

        def identity(self):
            return {"fake": 1}

        def describe(self):
            return {"settings": {"gamma": self.options.gamma, "verifier": "fake"}}

        def priors(self):
            return None

        def score_item(self, item, progress=None):
            decisions = [{"atom": f, "is_supported": len(f) % 2 == 0} for f in item.facts]
            s = sum(d["is_supported"] for d in decisions) / len(decisions)
            return dict(item.data, status="ok", score=s, init_score=s, num_facts=len(decisions), decisions=decisions)

    monkeypatch.setattr(pipeline, "FactScorer", Scorer)
    monkeypatch.setattr(er, "ensure_store", lambda files, settings, store: tmp_path / "store")
    report = tmp_path / "er.html"
    res = er.run_er(data_dir, Settings(home=tmp_path / "home", threads=1),
                    subjects=["ChatGPT", "InstructGPT"], limit=1, out=tmp_path / "out", per_fact=False,
                    progress=False, report=report)
    assert res["report"] == str(report)
    html = report.read_text()
    for subject in ("ChatGPT", "InstructGPT"):
        assert f"er-{subject}-parity" in html and f"human: {subject}" in html
    assert "er-PerplexityAI" not in html  # only the subjects asked for
