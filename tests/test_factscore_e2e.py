"""FActScore end to end with the real 0.5B GGUF model and a real (small) passage store."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fscore_lite.backends.llama_kernels import PORTABLE_FEATURES
from fscore_lite.backends.llm import LlamaRunner
from fscore_lite.cache import CallCache
from fscore_lite.factscore.pipeline import FactScorer, ScoreOptions, score_file
from fscore_lite.manifest import Bundle

pytestmark = pytest.mark.llm
TOPICS = ("Andreas Kisser", "Adil Rami")


@pytest.fixture(scope="session")
def small_store(tmp_path_factory, data_dir, settings_1t):
    from fscore_lite_index.build import build_store

    src = tmp_path_factory.mktemp("src") / "pages.jsonl"
    lines = [l for l in (data_dir / "wiki-factscore-dev" / "pages.jsonl").read_text().splitlines()
             if json.loads(l)["topic"] in TOPICS]
    assert len(lines) == 2
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path_factory.mktemp("store") / "store"
    build_store(src, out, threads=1, models_dir=settings_1t.models_dir, progress=False, hnsw=True)  # --search-all test
    return out


def _runner(settings, cache=None, reuse_prefix=True):
    bundle = Bundle(settings.models_dir)
    e = bundle.get(settings.llm)
    return LlamaRunner(bundle.verified_path(e), e.sha256, e.name, threads=1, n_ctx=4096,
                       cache=cache or CallCache(None), reuse_prefix=reuse_prefix)


def _scorer(settings, store, llm, **opts):
    s = settings.with_(store=store)
    opts.setdefault("verifier", "llm")  # these tests are about the LLM judge
    return FactScorer(s, ScoreOptions(progress=False, **opts), cache=llm.cache, llm=llm)


def _write(path: Path, items) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in items))
    return path


def test_stated_fact_supported_fabricated_fact_not(settings_1t, small_store, test_llm):
    scorer = _scorer(settings_1t, small_store, test_llm)
    from fscore_lite.factscore.pipeline import Item

    rec = scorer.score_item(Item(1, {"topic": "Andreas Kisser"}, topic="Andreas Kisser",
                                 facts=["Andreas Kisser is Brazilian.", "Andreas Kisser is a Japanese chef."]))
    assert rec["status"] == "ok"
    stated, fabricated = rec["decisions"]
    assert stated["is_supported"] is True and stated["margin"] > 0
    assert fabricated["is_supported"] is False and fabricated["margin"] < 0
    assert stated["margin"] > fabricated["margin"]
    assert len(stated["evidence"]) == 5 and all(e["title"] == "Andreas Kisser" for e in stated["evidence"])


def test_atomic_facts_generated_from_a_sentence(settings_1t, small_store, test_llm):
    scorer = _scorer(settings_1t, small_store, test_llm)
    out = scorer.generator.run("Adil Rami is a French footballer who played for Lille.")
    assert len(out) == 1 and out[0].facts
    assert all(f.endswith(".") for f in out[0].facts)
    assert any("Lille" in f for f in out[0].facts)


def test_parity_identical_with_and_without_prefix_reuse(settings_1t, small_store):
    facts = ["Andreas Kisser is a guitarist.", "Andreas Kisser is a member of Sepultura.",
             "Andreas Kisser was born in Brazil."]
    margins = {}
    for reuse in (True, False):
        llm = _runner(settings_1t, reuse_prefix=reuse)
        scorer = _scorer(settings_1t, small_store, llm, k=3)
        ev = [scorer.retriever.retrieve("Andreas Kisser", f) for f in facts]
        verdicts = scorer.verifier.verify("Andreas Kisser", facts, ev)
        margins[reuse] = [(v.is_supported, v.margin) for v in verdicts]
        if reuse:
            assert llm.stats.tokens_reused > 0
        else:
            assert llm.stats.tokens_reused == 0
    # Bit for bit: every prompt is decoded on the schedule its own tokens fix, whatever the
    # context held before (tests/test_llm_layout.py), so reusing a prefix changes cost only.
    assert margins[True] == margins[False]


def test_rerun_hits_cache_and_output_is_deterministic(settings_1t, small_store, tmp_path):
    inp = _write(tmp_path / "in.jsonl", [
        {"topic": "Adil Rami", "facts": ["Adil Rami is a footballer.", "Adil Rami won an Oscar."], "id": 7},
        {"topic": "Nobody Here", "output": "He was a painter."},
    ])
    outs = []
    for run in range(3):
        cache = CallCache(tmp_path / ("cache-a.sqlite" if run < 2 else "cache-b.sqlite"))
        llm = _runner(settings_1t, cache)
        scorer = _scorer(settings_1t, small_store, llm, k=2)
        out = tmp_path / f"out{run}.jsonl"
        summary = score_file(inp, out, settings_1t.with_(store=small_store), scorer.options, scorer=scorer)
        outs.append(out.read_bytes())
        if run == 1:  # same cache: no model call at all
            assert llm.stats.calls > 0 and llm.stats.cached_calls == llm.stats.calls
            assert summary["llm_calls"]["tokens_evaluated"] == 0
    assert outs[0] == outs[1] == outs[2]  # run 2 recomputed everything with an empty cache
    rows = [json.loads(x) for x in outs[0].decode().splitlines()]
    assert [r["status"] for r in rows] == ["ok", "topic_not_found"]
    assert rows[0]["id"] == 7 and rows[0]["num_facts"] == 2
    for d in rows[0]["decisions"]:
        assert set(d) >= {"atom", "is_supported", "margin", "evidence"}
        assert set(d["evidence"][0]) == {"id", "title", "score"}
    summ = json.loads((tmp_path / "out0.summary.json").read_text())
    for key in ("score", "init_score", "respond_ratio", "num_facts_per_response", "models", "store", "timings"):
        assert key in summ
    assert summ["store"]["sha256"] and summ["models"]["llm"]["sha256"]
    # llama.cpp's CPU kernel: asked for and resolved in the settings (the resume key), with its
    # instruction sets on the LLM that ran
    assert summ["settings"]["llm_kernel"] == {"requested": "portable", "ran": "haswell"}
    assert summ["models"]["llm"]["cpu_kernel"] == {"requested": "portable", "ran": "haswell",
                                                    "features": PORTABLE_FEATURES}


def test_resume_continues_without_redoing_or_duplicating(settings_1t, small_store, tmp_path, test_llm):
    inp = _write(tmp_path / "in.jsonl", [{"topic": f"Missing {i}", "output": "x y z."} for i in range(4)])
    out = tmp_path / "out.jsonl"
    scorer = _scorer(settings_1t, small_store, test_llm)
    calls = []
    real = scorer.score_item

    def flaky(item, progress=None):
        calls.append(item.line)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(item, progress)

    scorer.score_item = flaky
    with pytest.raises(KeyboardInterrupt):
        score_file(inp, out, settings_1t, scorer.options, scorer=scorer)
    assert not out.exists()  # no half-written output
    assert out.with_name("out.jsonl.partial").exists()
    calls.clear()
    scorer.score_item = lambda item, progress=None: (calls.append(item.line), real(item, progress))[1]
    summary = score_file(inp, out, settings_1t, scorer.options, resume=True, scorer=scorer)
    assert calls == [3, 4]
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 4 and summary["timings"]["items_resumed"] == 2
    assert not out.with_name("out.jsonl.partial").exists()


def _items_in(partial: Path) -> int:
    """Complete item lines in an OUT.partial file (a line torn by a kill does not count)."""
    n = 0
    for line in partial.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            n += "_line" in json.loads(line)
        except json.JSONDecodeError:
            pass
    return n


def test_resume_after_kill_gives_the_bytes_of_an_uninterrupted_run(settings_1t, small_store, tmp_path):
    """Real LLM work, killed in a subprocess after the first item, then ``--resume``d.

    Without the kill, item 2 reuses item 1's verification context (same topic, same passages);
    after the kill it starts cold in a new process. The bytes must not differ. ``--no-cache`` on
    every run, so no cached margin can hide a difference."""
    import time

    inp = _write(tmp_path / "in.jsonl", [
        {"topic": "Andreas Kisser", "facts": ["Andreas Kisser is a guitarist.", "Andreas Kisser is Brazilian."]},
        {"topic": "Andreas Kisser", "facts": ["Andreas Kisser is a member of Sepultura.",
                                              "Andreas Kisser is a Japanese chef."]},
        {"topic": "Adil Rami", "facts": ["Adil Rami is a footballer.", "Adil Rami won an Oscar."]},
    ])
    env = dict(os.environ, FSCORE_LITE_HOME=str(tmp_path / "home"), FSCORE_LITE_MODELS=str(settings_1t.models_dir))

    def cmd(out: Path, *extra: str) -> list[str]:
        return [sys.executable, "-m", "fscore_lite", "score", str(inp), "-o", str(out), "--store", str(small_store),
                "--llm", settings_1t.llm, "--verifier", "llm", "--threads", "1", "--k", "2", "--no-cache", "-q",
                *extra]

    full = tmp_path / "full.jsonl"
    proc = subprocess.run(cmd(full), capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr

    out = tmp_path / "part.jsonl"
    partial = out.with_name("part.jsonl.partial")
    child = subprocess.Popen(cmd(out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.monotonic() + 900
        while not (partial.exists() and _items_in(partial) >= 1):
            assert child.poll() is None, f"the run ended before it could be killed: {child.stderr.read()!r}"
            assert time.monotonic() < deadline, "no item was written in time"
            time.sleep(0.02)
    finally:
        child.kill()
        child.wait()
        child.stderr.close()
    assert _items_in(partial) == 1 and not out.exists()

    proc = subprocess.run(cmd(out, "--resume"), capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.with_name("part.summary.json").read_text())["timings"]["items_resumed"] == 1
    rows = [json.loads(x) for x in full.read_text().splitlines()]
    assert [r["status"] for r in rows] == ["ok", "ok", "ok"]
    assert out.read_bytes() == full.read_bytes()


SITE = """
import sys
sys.modules["torch"] = None  # the runtime must never import torch or transformers
sys.modules["transformers"] = None
import socket
def _no(*a, **k):
    raise RuntimeError("network blocked by test")
socket.socket.connect = _no
socket.create_connection = _no
"""


def test_cli_scoring_with_network_and_torch_blocked_and_per_item_statuses(settings_1t, small_store, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITE)
    inp = _write(tmp_path / "in.jsonl", [
        {"topic": "Andreas Kisser", "facts": ["Andreas Kisser is a guitarist."]},
        {"topic": "Andreas Kisser", "output": ""},
        {"topic": "Andreas Kisser", "output": "He plays. " * 110_000},
        {"topic": "Unknown Person", "output": "She sings."},
    ])
    out = tmp_path / "o.jsonl"
    env = dict(os.environ, PYTHONPATH=str(site), FSCORE_LITE_HOME=str(tmp_path / "home"),
               FSCORE_LITE_MODELS=str(settings_1t.models_dir))
    proc = subprocess.run([sys.executable, "-m", "fscore_lite", "score", str(inp), "-o", str(out), "--store",
                           str(small_store), "--llm", settings_1t.llm, "--verifier", "llm", "--threads", "1",
                           "--k", "2", "-q"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["status"] for r in rows] == ["ok", "empty_output", "output_too_long", "topic_not_found"]
    assert "in.jsonl:3" in rows[2]["error"]
    assert json.loads(proc.stdout)["respond_ratio"] == pytest.approx(0.5)


def test_search_all_ranks_whole_store_for_unknown_topic(settings_1t, small_store, test_llm):
    scorer = _scorer(settings_1t, small_store, test_llm, search_all=True)
    ev = scorer.retriever.retrieve("Not A Page", "He played for Lille and Marseille.")
    assert len(ev) == 5 and ev[0].passage.title == "Adil Rami"
    strict = _scorer(settings_1t, small_store, test_llm)
    assert strict.retriever.retrieve("Not A Page", "He played for Lille.") == []


def test_abstention_inside_the_pipeline_loads_no_model(settings_1t, small_store, tmp_path):
    """--abstain generic: a refusal gets status abstained and no facts, before any LLM is loaded."""
    inp = _write(tmp_path / "in.jsonl", [
        {"topic": "Adil Rami", "output": "I'm sorry, I have no information about this person."},
        {"topic": "Adil Rami", "facts": ["Adil Rami is a footballer."]},
    ])
    s = settings_1t.with_(store=small_store)
    options = ScoreOptions(progress=False, abstain="generic", verifier="llm", gamma=0)
    scorer = FactScorer(s, options, cache=CallCache(None))
    from fscore_lite.factscore.pipeline import Item

    rec = scorer.score_item(Item(1, {"topic": "Adil Rami"}, topic="Adil Rami",
                                 output="I'm sorry, I cannot provide more about him."))
    assert rec["status"] == "abstained" and rec["decisions"] is None and rec["score"] is None
    assert not scorer.llm_loaded  # nothing needed the LLM yet
    summary = score_file(inp, tmp_path / "out.jsonl", s, options, scorer=scorer)
    assert summary["status_counts"] == {"abstained": 1, "ok": 1}
    assert summary["respond_ratio"] == pytest.approx(0.5)  # the abstained item does not respond
    assert scorer.llm_loaded  # the LLM judge verified the second item


def test_chat_template_wraps_the_verification_prompt(settings_1t, small_store):
    """--chat-template: the reference prompt becomes one user turn of the model's own template."""
    llm = _runner(settings_1t)
    llm.chat_template = True
    text = llm.format_prompt("Input: Adil Rami is a footballer. True or False?\nOutput:")
    assert text != "Input: Adil Rami is a footballer. True or False?\nOutput:"
    assert "Input: Adil Rami is a footballer. True or False?" in text
    assert text.index("user") < text.index("Input:") < text.rindex("assistant")  # Qwen2's im_start roles
    scorer = _scorer(settings_1t, small_store, llm, chat_template=True)
    assert scorer.describe()["settings"]["prompt_style"] == "chat-template"
    from fscore_lite.factscore.pipeline import Item

    rec = scorer.score_item(Item(1, {}, topic="Adil Rami", facts=["Adil Rami is a footballer."]))
    assert rec["status"] == "ok" and isinstance(rec["decisions"][0]["margin"], float)


def test_prompt_longer_than_the_context_is_a_clear_error(settings_1t):
    from fscore_lite.errors import FscoreError

    bundle = Bundle(settings_1t.models_dir)
    e = bundle.get(settings_1t.llm)
    llm = LlamaRunner(bundle.verified_path(e), e.sha256, e.name, threads=1, n_ctx=256, cache=CallCache(None))
    with pytest.raises(FscoreError, match="does not fit the context of 256 tokens; raise --n-ctx"):
        llm.next_token_logprobs("word " * 400, ["True", "False"])
