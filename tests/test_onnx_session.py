"""The onnxruntime session every backend opens: bounded spinning with workers, none without."""
from __future__ import annotations

import numpy as np
import pytest

from fscore_lite.backends.onnx_session import DEFAULT_SPIN_US, SPIN_ENV, session_options, session_spin
from fscore_lite.errors import FscoreError


def _entries(opts) -> tuple[str, str]:
    """(allow_spinning, spin_duration_us or "" when unset) of a SessionOptions."""
    try:
        duration = opts.get_session_config_entry("session.intra_op.spin_duration_us")
    except RuntimeError:  # onnxruntime raises for a key that was never set
        duration = ""
    return opts.get_session_config_entry("session.intra_op.allow_spinning"), duration


def test_workers_spin_briefly_and_a_single_thread_never(monkeypatch):
    monkeypatch.delenv(SPIN_ENV, raising=False)
    assert _entries(session_options(2)) == ("1", str(DEFAULT_SPIN_US))
    assert session_options(2).intra_op_num_threads == 2
    assert _entries(session_options(1)) == ("0", "")
    assert session_spin(1) == 0 and session_spin(4) == DEFAULT_SPIN_US


def test_the_environment_sets_or_turns_off_spinning(monkeypatch):
    monkeypatch.setenv(SPIN_ENV, "0")
    assert _entries(session_options(2)) == ("0", "")
    monkeypatch.setenv(SPIN_ENV, "200")
    assert _entries(session_options(2)) == ("1", "200")
    for bad in ("fast", "-5", "1.5"):
        monkeypatch.setenv(SPIN_ENV, bad)
        with pytest.raises(FscoreError, match=SPIN_ENV):
            session_options(2)


def test_spinning_changes_no_output_byte(monkeypatch, minilm_bundle_dir):
    """Two threads with and without spinning embed texts of several lengths to the same bytes."""
    from fscore_lite.backends.embed import SentenceEmbedder
    from fscore_lite.manifest import Bundle
    from fscore_lite.settings import DEFAULT_EMBED

    texts = ["Marie Curie was born in Warsaw.", "short", " ".join(["a long passage about physics"] * 30)]
    vectors = {}
    for spin in ("0", "50"):
        monkeypatch.setenv(SPIN_ENV, spin)
        emb = SentenceEmbedder.from_bundle(Bundle(minilm_bundle_dir), DEFAULT_EMBED, threads=2)
        assert _entries(emb.session.get_session_options())[0] == ("1" if spin != "0" else "0")
        vectors[spin] = [emb.encode([t])[0].tobytes() for t in texts] + [emb.encode(texts).tobytes()]
    assert vectors["0"] == vectors["50"]
    assert np.frombuffer(vectors["0"][0], dtype=np.float32).shape == (emb.dim,)
