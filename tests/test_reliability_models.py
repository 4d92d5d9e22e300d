"""Issue 22 with the installed models: one spelling of a text scores the same; the summary says
what ran (no decoding setting without an LLM; the verifier's decision-settings hash)."""
from __future__ import annotations

import json
import unicodedata

from fscore_lite.factscore.pipeline import FactScorer, ScoreOptions, score_file
from fscore_lite.manifest import Bundle
from fscore_lite.settings import Settings
from tests.conftest import skip_or_fail

TOPIC = "Kō Itakura"  # a page of examples/pages.jsonl; "ō" is one code point here, two decomposed
FACTS = ["Kō Itakura plays for Borussia Mönchengladbach.", "Kō Itakura is a Japanese footballer."]


def _score(tmp_path, settings, options, name, topic, facts):
    src = tmp_path / f"{name}.jsonl"
    src.write_text(json.dumps({"topic": topic, "facts": facts}, ensure_ascii=False) + "\n", encoding="utf-8")
    out = tmp_path / f"{name}.out.jsonl"
    summary = score_file(src, out, settings, options)
    return summary, [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]


def test_composed_and_decomposed_spellings_score_the_same(tmp_path, settings_1t, example_store):
    nfd = unicodedata.normalize("NFD", TOPIC)
    assert nfd != TOPIC
    settings = settings_1t.with_(store=example_store.path, use_cache=False)
    verifiers = ["llm"] + (["trained"] if Bundle(settings.models_dir).first_for_role("verifier") else [])
    for verifier in verifiers:
        options = ScoreOptions(verifier=verifier, progress=False)
        _, (a,) = _score(tmp_path, settings, options, f"nfc-{verifier}", TOPIC, FACTS)
        _, (b,) = _score(tmp_path, settings, options, f"nfd-{verifier}", nfd,
                         [unicodedata.normalize("NFD", f) for f in FACTS])
        assert a["status"] == "ok" and a == b, verifier


def test_no_llm_no_decoding_setting_in_the_summary(tmp_path, example_store, minilm_bundle_dir):
    settings = Settings(home=tmp_path / "home", models_dir=minilm_bundle_dir, threads=1, use_cache=False,
                        store=example_store.path, parallel=3)
    summary, _ = _score(tmp_path, settings, ScoreOptions(verifier="llm", progress=False), "nofacts", TOPIC, [])
    assert summary["status_counts"] == {"no_facts": 1}
    assert summary["settings"]["decode_parallel"] is None and "llm" not in summary["models"]


def test_the_summary_records_the_verifier_decision_settings_hash(tmp_path, example_store):
    settings = Settings(threads=1, use_cache=False, store=example_store.path)
    entry = Bundle(settings.models_dir).first_for_role("verifier")
    if entry is None:
        skip_or_fail("no trained verifier installed (fscore-lite models train verifier)")
    scorer = FactScorer(settings, ScoreOptions(verifier="trained", progress=False))
    recorded = scorer.describe()["models"]["verifier"]
    assert recorded["decisions_sha256"] == entry.decisions_sha256 and recorded["sha256"] == scorer.verifier.sha256
    # the machine that trained the weights goes with them: another CPU kernel trains other last bits
    assert recorded.get("build_cpu") == entry.extra["training"].get("build_cpu") and "training" not in recorded["extra"]
    assert scorer.identity()["verifier_decisions"] == entry.decisions_sha256
