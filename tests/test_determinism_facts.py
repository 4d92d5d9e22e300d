"""Atomic-fact clean-up gives the same facts in every process, whatever PYTHONHASHSEED is.

The reference collects dates and numbers in Python sets of strings and picks "the first"
matching one, so its output depends on the string hash seed of the process. These cases are
built so that set order changes the result: a number that is a prefix of two numbers of the
sentence (which one replaces it?), and two numbers where one contains the other (is the short
one kept?). A fake spaCy pipeline keeps the test free of models.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = r'''
import json, re, sys
from fscore_lite.factscore import atomic_facts as af

class Ent:
    def __init__(self, text):
        self.text, self.label_ = text, "CARDINAL"

class DigitsAreEntities:
    def __call__(self, text):
        return type("Doc", (), {"ents": [Ent(m) for m in re.findall(r"\d+", text)]})()

class NoEntities:
    def __call__(self, text):
        return type("Doc", (), {"ents": []})()

pairs = [("She lived in 1950 and in 1955 and in 1957.",
          ["She lived somewhere in 19.", "She lived in 1950 and in 1955 and in 1957."]),
         ("He moved in 1821, 1822, 1823 and 1824.",
          ["He moved in 18.", "He moved in 1821, 1822, 1823 and 1824."])]
out = {
    "postprocess": af.postprocess(pairs, [], nlp=DigitsAreEntities()),
    "numbers": af.detect_entities("From 19 to 1950, then 195 and 1.", NoEntities()),
    "numbers_reversed": af.detect_entities("From 1950 to 19, then 1 and 195.", NoEntities()),
}
print(json.dumps(out))
'''

SEEDS = ["0", "1", "2", "3", "4", "5", "6", "7"]


def _run(seed: str) -> dict:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120,
                          cwd=Path(__file__).resolve().parent.parent)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_cleanup_is_identical_across_hash_seeds():
    results = {seed: _run(seed) for seed in SEEDS}
    first = results[SEEDS[0]]
    for seed, got in results.items():
        assert got == first, f"PYTHONHASHSEED={seed} gave {got}, PYTHONHASHSEED={SEEDS[0]} gave {first}"
    # and the choice is the documented one: entities in the order they are found
    (s1, f1), (s2, f2) = first["postprocess"]
    assert f1 == ["She lived somewhere in 1950.", "She lived in 1950 and in 1955 and in 1957."]
    assert f2 == ["He moved in 1821.", "He moved in 1821, 1822, 1823 and 1824."]
    # numbers in text order; one contained in an earlier number is not added again
    assert first["numbers"] == ["19", "1950"]
    assert first["numbers_reversed"] == ["1950"]


def test_detect_entities_returns_an_ordered_list():
    from fscore_lite.factscore import atomic_facts as af

    class NoEntities:
        def __call__(self, text):
            return type("Doc", (), {"ents": []})()

    got = af.detect_entities("In 2001 and 1999 and 2001 again.", NoEntities())
    assert got == ["2001", "1999"] and isinstance(got, list)
