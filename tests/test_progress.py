"""The progress component: ETA arithmetic (fake clock) and what reaches the stream."""
import io
import json

import pytest

from fscore_lite.progress import Progress


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t

    def tick(self, s):
        self.t += s


def test_eta_is_right_after_the_first_item_when_work_is_declared_per_item():
    clock, out = Clock(), io.StringIO()
    p = Progress(4, "t", stream=out, clock=clock, tty=False)
    assert p.eta() is None  # nothing measured yet
    # item 1: 10 facts generated in 20 s, then verified in 5 s, 1 s of item overhead
    clock.tick(20)
    p.advance(10, unit="facts generated")
    p.add_total(10, "facts verified")
    assert p.eta() is None  # verification has no rate yet
    clock.tick(5)
    p.advance(10, unit="facts verified")
    clock.tick(1)
    p.advance()
    # 3 items left, each expected to cost what the first did: 3 * 26 s
    assert p.eta() == pytest.approx(78.0)
    assert p.remaining("facts verified") == pytest.approx(30.0)
    # item 2 is bigger: 30 facts generated in 60 s; 30 to verify at 0.5 s/fact
    clock.tick(60)
    p.advance(30, unit="facts generated")
    p.add_total(30, "facts verified")
    # items begun: 2 (one open); per-item means: 20 facts generated, 20 verified
    # left: verified 30 (open item) + 2 * 20; generated 2 * 20; overhead 3 items * 1 s
    gen_spu, ver_spu = 80 / 40, 5 / 10
    assert p.eta() == pytest.approx((30 + 40) * ver_spu + 40 * gen_spu + 3 * 1.0)
    assert "10/~80 facts verified" in p.line() and "40/~80 facts generated" in p.line()


def test_upfront_totals_are_not_extrapolated_and_resumed_items_do_not_count():
    clock = Clock()
    p = Progress(5, stream=io.StringIO(), clock=clock, tty=False)
    p.skip(2)  # resumed: no time, no work
    p.add_total(3, "facts verified")  # the whole run's facts, known before the first item
    p.add_total(12, "facts verified")
    assert p.is_upfront("facts verified")
    clock.tick(6)
    p.advance(3, unit="facts verified")  # 2 s per fact
    clock.tick(0)
    p.advance()
    # 12 facts left at 2 s each, no extrapolation over the 2 items not begun; overhead 0
    assert p.remaining("facts verified") == 12
    assert p.eta() == pytest.approx(24.0)
    assert p.fraction() == pytest.approx(6 / 30)


def test_plain_lines_are_throttled_and_the_final_line_has_the_counts():
    clock, out = Clock(), io.StringIO()
    p = Progress(3, "factscore", stream=out, clock=clock, tty=False, log_every=10)
    for _ in range(3):
        p.add_total(2, "facts verified")
        clock.tick(1)
        p.advance(2, unit="facts verified")
        p.advance()
    p.close()
    p.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2  # the first update, then (within 10 s) only the final one
    assert lines[-1].startswith("factscore: 3/3 items, 6/6 facts verified (2.00 facts/s)")
    assert "eta 0m00s" in lines[-1]


def test_disabled_prints_nothing():
    out = io.StringIO()
    p = Progress(2, stream=out, enabled=False, tty=False)
    p.add_total(3, "questions")
    p.advance(3, unit="questions")
    p.advance()
    p.close()
    assert out.getvalue() == ""


def test_unknown_total_counts_and_rates():
    clock, out = Clock(), io.StringIO()
    p = Progress(None, "kb build", stream=out, clock=clock, tty=False, item_unit="pages")
    clock.tick(2)
    p.set_counts("passages", 50)
    p.advance(4)
    assert p.eta() is None
    p.close()
    assert out.getvalue().splitlines()[-1].startswith("kb build: 4 pages, 50 passages (25.00 passages/s)")


def test_a_run_counted_in_units_declared_up_front_has_an_eta():
    clock, out = Clock(), io.StringIO()
    p = Progress(None, "margins", stream=out, clock=clock, tty=False)
    p.add_total(10, "facts")
    assert p.eta() is None  # no rate yet
    clock.tick(4)
    p.advance(2, unit="facts")
    assert p.eta() == pytest.approx(16.0)  # 8 facts left at 2 s each
    assert p.line() == "2/10 facts (0.50 facts/s), elapsed 0m04s, eta 0m16s"
    p.add_total(5, "more")  # declared while the run is under way: its total is not the run's
    assert p.eta() is None


FACT_ITEMS = [{"topic": "Travis Oliphant", "facts": ["Travis Oliphant created NumPy.",
                                                     "Travis Oliphant is a data scientist.",
                                                     "Travis Oliphant was born on the Moon."]},
              {"topic": "Ben Lummis", "facts": ["Ben Lummis is a singer.", "Ben Lummis won New Zealand Idol."]}]


class _JudgeLLM:
    """Stands in for the LLM judge's model only: a fact with an even number of words is True."""

    name, sha256, chat_template = "judge", "j" * 64, False

    def __init__(self):
        from fscore_lite.backends.llm import LLMStats

        self.stats = LLMStats()

    def next_token_logprobs(self, prompt: str, words: list[str]) -> dict[str, float]:
        fact = prompt.rpartition("\n\nInput: ")[2].split(" True or False?")[0]
        m = 1.0 if len(fact.split()) % 2 == 0 else -1.0
        return {w: (m if "True" in w else -m) - 1.0 for w in words}


def test_score_with_given_facts_counts_facts_on_stderr_and_output_is_unchanged(tmp_path, example_store,
                                                                               minilm_embedder, minilm_bundle_dir,
                                                                               capsys):
    from fscore_lite.factscore.pipeline import FactScorer, ScoreOptions, score_file
    from fscore_lite.settings import Settings

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(i) + "\n" for i in FACT_ITEMS))
    settings = Settings(home=tmp_path / "home", models_dir=minilm_bundle_dir, threads=1, use_cache=False,
                        store=example_store.path)
    outputs = {}
    for shown in (True, False):
        options = ScoreOptions(verifier="llm", progress=shown)
        scorer = FactScorer(settings, options, llm=_JudgeLLM(), store=example_store, embedder=minilm_embedder)
        out = tmp_path / f"out-{shown}.jsonl"
        summary = score_file(src, out, settings, options, scorer=scorer)
        assert summary["status_counts"] == {"ok": 2}
        decisions = [d for x in out.read_text().splitlines() for d in json.loads(x)["decisions"]]
        assert [d["is_supported"] for d in decisions] == [len(d["atom"].split()) % 2 == 0 for d in decisions]
        outputs[shown] = out.read_bytes()
        err = capsys.readouterr().err
        if shown:
            lines = [x for x in err.splitlines() if x.startswith("factscore: ")]
            assert lines, err
            assert lines[-1].startswith("factscore: 2/2 items, 5/5 facts verified"), lines[-1]
            assert "eta 0m00s" in lines[-1]
        else:
            assert "factscore" not in err and "facts verified" not in err  # --quiet
    assert outputs[True] == outputs[False]  # progress changes nothing in the output


def _fake_q2():
    """Q2Scorer without models: each response gets one question per word (the rest is Q2Scorer's)."""
    from fscore_lite.cache import CallCache
    from fscore_lite.q2.pipeline import RESULT_KEYS, Q2Scorer
    from fscore_lite.q2.score import StageTimer
    from fscore_lite.records import ItemRecord
    from fscore_lite.settings import Settings

    class FakeQ2(Q2Scorer):
        def __init__(self):  # no roles, no spaCy
            self.settings, self.cache, self.timer = Settings(threads=1), CallCache(None), StageTimer()

        def describe(self):
            return {"backends": {}}

        def identity(self):
            return {}

        def record(self, data):
            qs = [{"question": w} for w in data["response"].split()]
            return ItemRecord(data, {"status": "ok", "Q2": 1.0, "Q2_no_nli": 1.0, "no_valid_question": False,
                                     "questions": qs}, RESULT_KEYS)

    return FakeQ2()


def test_q2_counts_questions_on_stderr(tmp_path, capsys):
    from fscore_lite.q2.pipeline import run_q2

    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"response": "a b c", "knowledge": "k"}) + "\n"
                   + json.dumps({"response": "d e", "knowledge": "k"}) + "\n")
    run_q2(src, tmp_path / "out.jsonl", scorer=_fake_q2())
    last = [x for x in capsys.readouterr().err.splitlines() if x.startswith("q2: ")][-1]
    assert last.startswith("q2: 2/2 responses, 5/5 questions"), last


def test_work_done_uncharged_is_left_out_of_the_rates():
    clock = Clock()
    p = Progress(4, "t", stream=io.StringIO(), clock=clock, tty=False)
    with p.uncharged():
        clock.tick(600)  # a model loading on first use
    clock.tick(20)
    p.advance(10, unit="facts generated")
    p.add_total(10, "facts verified")
    clock.tick(5)
    p.advance(10, unit="facts verified")
    p.advance()
    assert p.eta() == pytest.approx(3 * 25.0)  # the 600 s are not extrapolated to the 3 items left
    assert p.elapsed() == pytest.approx(625.0)  # but they are elapsed
