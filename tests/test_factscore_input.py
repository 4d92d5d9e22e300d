"""Bad input to `fscore-lite score` fails early with file:line, no traceback, no output."""
import json
import os
import subprocess
import sys

import pytest

from fscore_lite.errors import InputError
from fscore_lite.factscore.pipeline import load_items

CASES = {
    "malformed": (b'{"topic": "A", "output": "x"}\n{"topic": "B", "output": \n', ":2: malformed JSON"),
    "missing_topic": (b'{"topic": "A", "output": "x"}\n\n{"output": "y"}\n', ":3: missing required field 'topic'"),
    "missing_output": (b'{"topic": "A"}\n', ":1: missing required field 'output'"),
    "non_utf8": (b'{"topic": "A", "output": "x"}\n{"topic": "B", "output": "caf\xe9"}\n', ":2: not valid UTF-8"),
    "not_object": (b'["topic"]\n', ":1: expected a JSON object"),
    "bad_facts": (b'{"topic": "A", "facts": "one fact"}\n', ":1: field 'facts' must be a list of strings"),
    "empty_file": (b"\n\n", "no input items"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_load_items_names_file_and_line(tmp_path, case):
    data, expected = CASES[case]
    p = tmp_path / "in.jsonl"
    p.write_bytes(data)
    with pytest.raises(InputError) as e:
        load_items(p)
    assert str(p) in str(e.value) and expected in str(e.value)


@pytest.mark.parametrize("case", ["malformed", "non_utf8", "missing_topic"])
def test_cli_bad_input_exit_2_without_traceback_or_output(tmp_path, case):
    data, expected = CASES[case]
    p = tmp_path / "in.jsonl"
    p.write_bytes(data)
    out = tmp_path / "out.jsonl"
    env = dict(os.environ, FSCORE_LITE_HOME=str(tmp_path / "home"))
    proc = subprocess.run([sys.executable, "-m", "fscore_lite", "score", str(p), "-o", str(out)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and expected in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists() and not (tmp_path / "out.jsonl.partial").exists()


def test_empty_and_oversized_outputs_become_item_statuses(tmp_path):
    p = tmp_path / "in.jsonl"
    p.write_text(json.dumps({"topic": "A", "output": "  "}) + "\n" + json.dumps({"topic": "B", "output": "x" * 2_000_000}) + "\n")
    items = load_items(p)
    assert [i.problem[0] for i in items] == ["empty_output", "output_too_long"]
    assert f"{p}:2" in items[1].problem[1]


def test_facts_field_skips_output(tmp_path):
    p = tmp_path / "in.jsonl"
    p.write_text(json.dumps({"topic": "A", "facts": ["A is a b.", " "]}) + "\n")
    (item,) = load_items(p)
    assert item.facts == ["A is a b.", " "] and item.problem is None


def test_given_facts_have_a_length_limit(tmp_path):
    """A single fact over MAX_FACT_CHARS, or facts longer in all than --max-output-chars, are not
    scored (status output_too_long, naming the line); facts within both limits are kept."""
    from fscore_lite.factscore.items import MAX_FACT_CHARS, load_items

    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in [
        {"topic": "A", "facts": ["x" * (MAX_FACT_CHARS + 1)]},
        {"topic": "B", "facts": ["y" * 600, "z" * 600]},
        {"topic": "C", "facts": ["short fact."]},
    ]) + "\n")
    a, b, c = load_items(path, max_output_chars=1000)
    assert a.problem[0] == "output_too_long" and f"in.jsonl:1: fact 1 has {MAX_FACT_CHARS + 1:,}" in a.problem[1]
    assert b.problem[0] == "output_too_long" and "1,200 characters in all" in b.problem[1]
    assert c.problem is None and c.facts == ["short fact."]
