"""`score` with no store named: the demo store stands in, and topics it lacks are reported once."""
import json

from fscore_lite.factscore.pipeline import ScoreOptions, score_file
from fscore_lite.settings import Settings

# The known topic carries no facts (status no_facts), so no verifier and no LLM is needed.
ITEMS = [{"topic": "Travis Oliphant", "facts": []},
         {"topic": "Ada Lovelace", "facts": ["Ada Lovelace was a mathematician."]},
         {"topic": "Alan Turing", "facts": ["Alan Turing was born in London."]}]


def _run(tmp_path, settings, name):
    src = tmp_path / f"{name}.jsonl"
    src.write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    out = tmp_path / f"{name}.out.jsonl"
    summary = score_file(src, out, settings, ScoreOptions(verifier="llm", progress=False))
    return summary, out


def test_implicit_demo_store_says_how_many_topics_were_missing(tmp_path, example_store, minilm_bundle_dir,
                                                               capsys, monkeypatch):
    monkeypatch.delenv("FSCORE_LITE_STORE", raising=False)
    home = tmp_path / "home"
    (home / "stores").mkdir(parents=True)
    (home / "stores" / "demo").symlink_to(example_store.path, target_is_directory=True)
    settings = Settings(home=home, models_dir=minilm_bundle_dir, threads=1, use_cache=False)
    assert settings.store_default

    summary, out = _run(tmp_path, settings, "implicit")
    err = capsys.readouterr().err
    assert summary["status_counts"] == {"no_facts": 1, "topic_not_found": 2}
    assert summary["store_default"] is True
    assert json.loads(out.with_name(out.name.replace(".jsonl", ".summary.json")).read_text())["store_default"] is True
    assert err.count("warning: no --store was given") == 1
    assert "2 of the 3 items have a topic that is not in it" in err
    assert str(home / "stores" / "demo") in err
    assert "fscore-lite kb build PAGES.jsonl -o STORE" in err and "--store STORE" in err


def test_a_named_store_gets_no_warning(tmp_path, example_store, minilm_bundle_dir, capsys):
    settings = Settings(home=tmp_path / "home", models_dir=minilm_bundle_dir, threads=1, use_cache=False,
                        store=example_store.path)
    assert not settings.store_default
    summary, _ = _run(tmp_path, settings, "named")
    assert summary["status_counts"]["topic_not_found"] == 2
    assert "store_default" not in summary
    assert "demo store" not in capsys.readouterr().err
