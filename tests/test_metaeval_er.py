"""`meta-eval factscore-er`: the pieces, and one small end-to-end run with the 0.5B model."""
import json

import pytest

from fscore_lite.metaeval import factscore_er as er
from fscore_lite.metaeval.labeled import SUBJECTS


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
    from fscore_lite.metaeval.labeled import AnnotatedBio

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


@pytest.mark.llm
def test_er_end_to_end_small(mini_data, settings_1t, tmp_path):
    report = er.run_er(mini_data, settings_1t.with_(home=tmp_path / "home"), mode="shared-context",
                       store=tmp_path / "store", out=tmp_path / "out", context_budget=512, baseline=True,
                       progress=False)
    assert [r["subject"] for r in report["subjects"]] == list(SUBJECTS)
    for r in report["subjects"]:
        assert r["n_bios"] == 1 and 1 <= r["n_facts"] <= 3
        assert 0 <= r["estimated"] <= 100 and 0 <= r["human"] <= 100
        assert r["error_rate"] == pytest.approx(abs(r["estimated"] - r["human"]))
        assert r["baseline_estimated"] is not None
    assert report["ranking_preserved"] in (True, False)
    text = er.format_report(report)
    assert "ER" in text and "InstructGPT" in text
    # a rerun is served from the cache and gives the same report
    again = er.run_er(mini_data, settings_1t.with_(home=tmp_path / "home"), mode="shared-context",
                      store=tmp_path / "store", out=tmp_path / "out2", context_budget=512, progress=False)
    assert [r["estimated"] for r in again["subjects"]] == [r["estimated"] for r in report["subjects"]]
