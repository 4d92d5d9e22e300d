"""Scoring and embedding on a local Ray instance (the ``ray`` extra): the bytes of a local run,
a killed actor restarted and its item retried, ``--resume`` from the driver's partial output,
and every actor's model calls written to the call cache by the driver.

One Ray instance (``ray.init(num_cpus=2)``) serves the module; FActScore items carry their facts
and use a trained verifier (the tiny one of tests/test_verifier.py, trained in seconds), so no
LLM runs.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import EXAMPLES, skip_or_fail
from .test_verifier import _train, tiny_inputs  # noqa: F401 - the fixture is used by name

FACTS = {
    "Travis Oliphant": ["Travis Oliphant is the primary creator of NumPy.", "Travis Oliphant founded Anaconda.",
                        "Travis Oliphant is a professional golfer."],
    "Fran Unsworth": ["Fran Unsworth is a British journalist.", "Fran Unsworth was born in 1957."],
    "Kō Itakura": ["Kō Itakura is a Japanese footballer.", "Kō Itakura plays for Real Madrid."],
    "Roselyn Sánchez": ["Roselyn Sánchez is a Puerto Rican actress.", "Roselyn Sánchez starred in Devious Maids."],
    "Ben Lummis": ["Ben Lummis won New Zealand Idol in 2004.", "Ben Lummis is a Norwegian chess player."],
}


@pytest.fixture(scope="module")
def ray_local():
    try:
        import ray
    except ImportError:
        skip_or_fail("ray is not installed (pip install 'fscore-lite[ray]')")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_worker_niceness", "0")  # as fscore-lite's own `--ray local`
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def items_file(tmp_path_factory) -> Path:
    rows = [{"topic": t, "facts": f} for t, f in FACTS.items()]
    rows.insert(2, {"topic": "Nobody Known", "facts": ["Nobody Known is a painter."]})  # topic_not_found
    rows.append({"topic": "Travis Oliphant", "facts": ["Travis Oliphant studied at Brigham Young University."]})
    path = tmp_path_factory.mktemp("ray-in") / "items.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def verifier_models(tmp_path_factory, tiny_inputs):  # noqa: F811
    """A model bundle: the installed embedder and a tiny trained verifier."""
    return _train(tiny_inputs, tmp_path_factory.mktemp("ray-verifier"))[0]


@pytest.fixture(scope="module")
def local_score(items_file, example_store, verifier_models, tmp_path_factory):
    """``fscore-lite score`` without --ray in a subprocess: its output bytes, its cache, and
    whether the process ever loaded ray."""
    models = verifier_models
    home = tmp_path_factory.mktemp("home-local")
    out = home / "local.jsonl"
    code = ("import sys\nfrom fscore_lite.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
            "    assert not e.code, e.code\nprint('RAY_LOADED', any(m.split('.')[0] == 'ray' for m in sys.modules))\n")
    env = dict(os.environ, FSCORE_LITE_HOME=str(home), FSCORE_LITE_MODELS=str(models))
    proc = subprocess.run([sys.executable, "-c", code, "score", str(items_file), "-o", str(out), "--store",
                           str(example_store.path), "--verifier", "trained", "--threads", "1", "-q"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return {"bytes": out.read_bytes(), "cache": home / "calls.sqlite", "models": models,
            "ray_loaded": proc.stdout.split("RAY_LOADED")[-1].strip()}


def _cache_keys(path: Path) -> set:
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return set(db.execute("SELECT model, kind, key, output FROM calls"))
    finally:
        db.close()


def test_the_local_cli_never_loads_ray(local_score):
    assert local_score["ray_loaded"] == "False"
    rows = [json.loads(x) for x in local_score["bytes"].decode().splitlines()]
    assert [r["status"] for r in rows] == ["ok", "ok", "topic_not_found", "ok", "ok", "ok", "ok"]


def test_score_on_ray_is_byte_identical_after_a_killed_actor_and_resumes(ray_local, local_score, items_file,
                                                                          example_store, tmp_path):
    from fscore_lite.distributed.ray_runner import RayExecutor, ScorerSpec
    from fscore_lite.factscore.pipeline import ScoreOptions, score_file
    from fscore_lite.settings import Settings

    settings = Settings(home=tmp_path / "home", threads=1, store=example_store.path, models_dir=local_score["models"])
    options = ScoreOptions(verifier="trained", progress=False)
    executor = RayExecutor(ScorerSpec("factscore", settings, options), "auto", actors=2)

    class KillAfterFirst:
        """Kills the actor that returned the first record; by then it holds the next item."""

        def map(self, items):
            records = executor.map(items)
            first = next(records)
            os.kill(next(iter(executor.pids)), signal.SIGKILL)
            yield first
            yield from records

    class StopAfterTwo:
        def map(self, items):
            records = executor.map(items)
            yield next(records)
            yield next(records)
            raise KeyboardInterrupt

    try:
        out = tmp_path / "ray.jsonl"
        score_file(items_file, out, settings, options, executor=KillAfterFirst())
        assert out.read_bytes() == local_score["bytes"]
        assert len(executor.pids) >= 3  # 2 actors, one of them restarted in a new process
        # every model call of every actor, written once by the driver: the local run's rows
        assert executor.rows_written > 0
        assert _cache_keys(settings.cache_path) == _cache_keys(local_score["cache"])

        resumed = tmp_path / "resumed.jsonl"
        with pytest.raises(KeyboardInterrupt):
            score_file(items_file, resumed, settings, options, executor=StopAfterTwo())
        assert not resumed.exists() and resumed.with_name("resumed.jsonl.partial").exists()
        summary = score_file(items_file, resumed, settings, options, resume=True, executor=executor)
        assert summary["timings"]["items_resumed"] == 2
        assert resumed.read_bytes() == local_score["bytes"]
    finally:
        executor.close()


def test_q2_on_ray_from_the_cli_is_byte_identical(ray_local, tiny_bundle, tmp_path):
    from fscore_lite.q2.pipeline import run_q2
    from fscore_lite.settings import Settings

    src = tmp_path / "in.jsonl"
    rows = [{"id": 1, "response": "The Eiffel Tower is in Paris.", "knowledge": "The Eiffel Tower is in Paris, France."},
            {"id": 2, "response": "", "knowledge": "x"},
            {"id": 3, "response": "Marie Curie was born in Warsaw.", "knowledge": "She was born in Warsaw in 1867."},
            {"id": 4, "response": "Water boils at 100 degrees.", "knowledge": "At sea level water boils at 100 C."}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run_q2(src, tmp_path / "local.jsonl", Settings(home=tmp_path / "h1", threads=1, models_dir=tiny_bundle,
                                                   llm="none"), progress=False)
    # a second driver joins the module's Ray instance (--ray auto), as on a cluster
    env = dict(os.environ, FSCORE_LITE_HOME=str(tmp_path / "h2"), FSCORE_LITE_MODELS=str(tiny_bundle),
               FSCORE_LITE_LLM="none")
    proc = subprocess.run([sys.executable, "-m", "fscore_lite", "q2", str(src), "-o", str(tmp_path / "ray.jsonl"),
                           "--threads", "1", "--ray", "auto", "--ray-actors", "2", "-q"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    ran = json.loads(proc.stdout)["ray"]
    assert ran["address"] == "auto" and ran["actors"] == 2 and ran["cache_rows_written"] > 0
    assert (tmp_path / "ray.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()
    assert _cache_keys(tmp_path / "h2" / "calls.sqlite") == _cache_keys(tmp_path / "h1" / "calls.sqlite")


def test_kb_build_embedding_on_ray_gives_the_same_store_bytes(ray_local, minilm_embedder, minilm_bundle_dir,
                                                               tmp_path):
    from fscore_lite.distributed import ray_build_options
    from fscore_lite_index.build import build_store

    def build(path, **options):
        build_store(EXAMPLES / "pages.jsonl", path, source_label="examples", snapshot="2026", threads=1,
                    batch_size=8, progress=False, hnsw=True, **options)  # several batches for 2 actors
        return {f.name: f.read_bytes() for f in sorted(path.iterdir())}

    local = build(tmp_path / "local", embedder=minilm_embedder)
    options = ray_build_options("auto", 2, 1, minilm_bundle_dir)  # what `kb build --embed --ray auto` passes
    encoder = options["embed_pages"].__self__
    options["window_pages"] = 2  # pages cross windows of the pool (5 pages: 3 windows)
    try:
        on_ray = build(tmp_path / "ray", **options)
    finally:
        encoder.close()
    assert encoder.batches == 5 and "hnsw.bin" in local and on_ray == local


def test_bad_ray_options_are_clear_errors_before_any_work(tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"topic": "A", "facts": ["A is a thing."]}) + "\n")
    proc = subprocess.run([sys.executable, "-m", "fscore_lite", "score", str(inp), "--ray", "local",
                           "--ray-actors", "0", "-q"], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, FSCORE_LITE_HOME=str(tmp_path / "home")))
    assert proc.returncode == 2 and "--ray-actors must be 1 or more" in proc.stderr
    assert "Traceback" not in proc.stderr and not list(tmp_path.glob("in.factscore*"))
