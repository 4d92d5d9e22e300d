"""bench.q2_compare: the dev/held-out split of q2-wow runs and the paired comparison of two runs."""
from __future__ import annotations

import json

from bench.q2_compare import compare, dev_keys, load_run

FILES = ("dodeca_consistent", "dodeca_inconsistent", "memnet_consistent", "memnet_inconsistent")


def _write_run(root, score_of):
    d = root / "q2-wow"
    d.mkdir(parents=True)
    for stem in FILES:
        rows = []
        for i in range(6):
            rec = {"response": f"{stem} response {i}", "knowledge": f"knowledge {i}", "no_valid_question": i == 0,
                   "questions": [{"knowledge_no_answer": i == 1, "f1": 1.0 if i == 3 else 0.0,
                                  "nli_label": "entailment" if i == 5 else "neutral"}]}
            consistent = "inconsistent" not in stem
            for m in ("Q2", "Q2_no_nli", "e2e_nli", "overlap"):
                rec[m] = score_of(consistent, i, m)
            rows.append(json.dumps(rec))
        (d / f"{stem}.q2.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return root


def test_the_dev_split_is_the_limit_sample_of_each_file_and_pairs_favour_the_better_run(tmp_path):
    # run A is right on half the responses, run B on all but one of each file
    a = _write_run(tmp_path / "a", lambda c, i, m: (0.9 if c else 0.1) if i % 2 else (0.1 if c else 0.9))
    b = _write_run(tmp_path / "b", lambda c, i, m: (0.9 if c else 0.1) if i else (0.1 if c else 0.9))
    run = load_run(a)
    assert len(run) == 24
    dev = dev_keys(sorted(run), 2)
    assert len(dev) == 8 and {k[0] for k in dev} == set(FILES)
    report = compare([a, b], dev_limit=2)
    assert report["all"]["runs"][0]["n"] == 24
    assert len(report["dev"]["runs"][0]) and report["dev"]["runs"][0]["n"] == 8
    assert report["held_out"]["runs"][0]["n"] == 16
    assert report["all"]["runs"][0]["Q2"]["accuracy"] == 0.5
    assert abs(report["all"]["runs"][1]["Q2"]["accuracy"] - 20 / 24) < 1e-9
    diff = report["all"]["b_minus_a"]["Q2"]
    assert abs(diff["accuracy"]["mean"] - (20 / 24 - 0.5)) < 1e-9 and diff["auc"] > 0
    assert report["all"]["runs"][0]["no_valid_question"] == 4 / 24
    # run A is wrong on responses 0, 2 and 4 of each file: 0 has no valid question; 2 and 4 by their questions
    errors = report["all"]["runs"][0]["Q2_errors"]
    assert sum(errors.values()) == 12 and errors["no valid question (end-to-end NLI fallback)"] == 4
    assert errors["consistent: the answers differ"] == 4 and errors["inconsistent: other"] == 4
    assert report["all"]["runs"][1]["Q2_errors"] == {"no valid question (end-to-end NLI fallback)": 4}
