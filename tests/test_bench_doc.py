"""`make bench` rewrites its own sections of docs/BENCHMARKS.md and keeps the measurements taken by hand."""
from __future__ import annotations

from .conftest import REPO


def test_rewrite_keeps_hand_measurements_and_other_sections(tmp_path):
    from bench.__main__ import BEGIN, END, HAND, assemble
    from bench.common import machine_info

    doc = tmp_path / "BENCHMARKS.md"
    hand = f"{HAND}\n# Measured by hand\n\n| a | b |\n|---|---|\n| 1.5 s | `cmd --x` |\n"
    doc.write_text(f"# old header\n\n{BEGIN.format('store')}\nold store\n{END.format('store')}\n\n"
                   f"{BEGIN.format('dist')}\nold dist\n{END.format('dist')}\n\n{hand}", encoding="utf-8")
    text = assemble(doc, {"dist": "new dist"}, machine_info(), "python -m bench --only dist")
    assert text.endswith(hand)
    assert "new dist" in text and "old dist" not in text
    assert f"{BEGIN.format('store')}\nold store\n{END.format('store')}" in text
    assert text.index("old store") < text.index("new dist") < text.index(HAND)


def test_committed_benchmarks_keep_their_hand_part():
    from bench.__main__ import HAND, assemble
    from bench.common import machine_info

    doc = REPO / "docs" / "BENCHMARKS.md"
    committed = doc.read_text(encoding="utf-8")
    assert HAND in committed
    text = assemble(doc, {}, machine_info(), "python -m bench")
    assert text[text.index(HAND):] == committed[committed.index(HAND):]
