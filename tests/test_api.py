"""The Python API: `fscore_lite.score` / `fscore_lite.q2` take the CLI's options by name and give its results."""
import json

import pytest

import fscore_lite
from fscore_lite.cli import main
from fscore_lite.errors import FscoreError

# No topic is in the example store: every item is topic_not_found, so no verifier or LLM is loaded.
ITEMS = [{"topic": "Ada Lovelace", "facts": ["Ada Lovelace was a mathematician."], "id": 1},
         {"topic": "Alan Turing", "output": "Alan Turing was born in London.", "id": 2}]


def _input(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    return src


def test_score_api_and_cli_write_the_same_output(tmp_path, example_store, minilm_bundle_dir, capsys, monkeypatch):
    monkeypatch.setenv("FSCORE_LITE_HOME", str(tmp_path / "home"))
    src = _input(tmp_path)
    common = dict(store=example_store.path, models_dir=minilm_bundle_dir, threads=1, verifier="llm")
    summary = fscore_lite.score(src, tmp_path / "api.jsonl", use_cache=False, progress=False, **common)
    assert summary["status_counts"] == {"topic_not_found": 2} and summary["num_items"] == 2
    assert summary["settings"]["verifier"] == "llm" and summary["summary"] == str(tmp_path / "api.summary.json")

    with pytest.raises(SystemExit) as exc:
        main(["score", str(src), "-o", str(tmp_path / "cli.jsonl"), "--store", str(example_store.path),
              "--models-dir", str(minilm_bundle_dir), "--threads", "1", "--verifier", "llm", "--no-cache", "-q"])
    assert (exc.value.code or 0) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["status_counts"] == summary["status_counts"] and printed["output"] == str(tmp_path / "cli.jsonl")
    assert (tmp_path / "cli.jsonl").read_bytes() == (tmp_path / "api.jsonl").read_bytes()
    assert [json.loads(x)["id"] for x in (tmp_path / "api.jsonl").read_text().splitlines()] == [1, 2]

    # the default output name is the CLI's
    fscore_lite.score(src, progress=False, use_cache=False, **common)
    assert (tmp_path / "in.factscore.jsonl").read_bytes() == (tmp_path / "api.jsonl").read_bytes()


@pytest.mark.parametrize("option,value,message", [
    ("verifier", "oracle", "--verifier must be one of auto, trained, llm, llm+trained, not 'oracle'"),
    ("mode", "fast", "--mode must be one of parity, shared-context, not 'fast'"),
    ("share", "all", "--share must be one of estimate, decisions, not 'all'"),
    ("abstain", "maybe", "--abstain must be one of none, generic, perplexity_ai, not 'maybe'"),
])
def test_score_refuses_a_bad_choice_before_writing(tmp_path, option, value, message):
    src = _input(tmp_path)
    with pytest.raises(FscoreError) as e:
        fscore_lite.score(src, tmp_path / "o.jsonl", **{option: value})
    assert str(e.value) == message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


@pytest.mark.parametrize("option,value,message", [
    ("questions", "many", "--questions must be one of single, multi, not 'many'"),
    ("backend", "gpu", "--backend must be one of auto, onnx, llm, not 'gpu'"),
    ("precision", "fp16", "--precision must be one of int8, fp32, not 'fp16'"),
])
def test_q2_refuses_a_bad_choice_before_writing(tmp_path, option, value, message):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"response": "a", "knowledge": "b"}) + "\n")
    with pytest.raises(FscoreError) as e:
        fscore_lite.q2(src, tmp_path / "o.jsonl", **{option: value})
    assert str(e.value) == message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


@pytest.mark.parametrize("option,value,message", [
    ("backend", "gpu", "--backend must be one of auto, onnx, llm, not 'gpu'"),
    ("precision", "fp16", "--precision must be one of int8, fp32, not 'fp16'"),
])
def test_load_roles_refuses_a_bad_choice_with_the_options_message(tmp_path, option, value, message):
    """load_roles (called without Q2Options, e.g. by tests and benches) checks with the same function:
    the same message, before any bundle or model is read."""
    from fscore_lite.q2.roles import load_roles
    from fscore_lite.settings import Settings

    with pytest.raises(FscoreError) as e:
        load_roles(Settings(models_dir=tmp_path / "no-models"), **{option: value})
    assert str(e.value) == message


def test_an_unknown_option_names_the_known_ones(tmp_path):
    with pytest.raises(TypeError, match="unknown option 'verfier'.*verifier"):
        fscore_lite.score(_input(tmp_path), verfier="llm")
    with pytest.raises(TypeError, match="unknown option 'gamma'.*questions"):
        fscore_lite.q2(_input(tmp_path), gamma=3)
