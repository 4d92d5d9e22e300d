"""The one ONNX base of backends/: every ONNX model is an OnnxTextModel, right-padding is pad_rows."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import numpy as np

import fscore_lite.backends as backends
from fscore_lite.backends.onnx_base import OnnxTextModel, pad_rows


def test_pad_rows_right_pads_with_the_pad_id_and_masks_the_padding():
    ids, mask = pad_rows([[5, 6, 7], [8]], pad_id=1)
    assert ids.tolist() == [[5, 6, 7], [8, 1, 1]] and mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    assert ids.dtype == mask.dtype == np.int64
    ids, mask = pad_rows([], pad_id=0)
    assert ids.shape == (0, 1) and mask.shape == (0, 1)


def test_every_class_that_opens_an_onnx_session_is_an_onnx_text_model():
    """A backend class that opens onnxruntime graphs does it through the base (its tokenizer,
    config, identity and cache come with it)."""
    opening = []
    for info in pkgutil.iter_modules(backends.__path__, "fscore_lite.backends."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__:
                continue
            source = inspect.getsource(cls)
            if "make_session(" in source or "open_session(" in source:
                opening.append(cls)
    names = {c.__name__ for c in opening}
    assert {"CrossEncoder", "ExtractiveQA", "Seq2SeqGenerator", "SentenceEmbedder", "MaskedLMEncoder"} <= names
    assert [c.__name__ for c in opening if not issubclass(c, OnnxTextModel)] == []
