"""Extractive question answering on onnxruntime (Q²'s QA role; reference: ALBERT-xlarge SQuAD-2).

The QA rule (SPEC Q² step 4) is the reference's: encode ``question`` and ``context`` as a
pair, take ``argmax(start_logits) .. argmax(end_logits)`` over the *whole* sequence and
decode those tokens with the tokenizer's decoder; a span that is exactly the first (CLS)
token means "no answer". A pair longer than the model's positions (the reference would
fail there) is split into overlapping windows of the context; see :meth:`ExtractiveQA.answer`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..errors import ModelIntegrityError
from .onnx_base import OnnxTextModel, pad_rows

DOC_STRIDE = 128  # tokens shared by consecutive context windows (the SQuAD scripts' default)


@dataclass(frozen=True)
class QAResult:
    """One extractive answer.

    ``text`` is the decoded span as the reference produces it (special tokens included);
    ``no_answer`` is true when the span is exactly the CLS token; ``cls_in_span`` when the
    span starts at CLS (the reference then skips the NLI comparison).
    """

    text: str
    no_answer: bool
    cls_in_span: bool
    start: int
    end: int  # exclusive
    window: int = 0

    def to_json(self) -> dict:
        return asdict(self)


class ExtractiveQA(OnnxTextModel):
    """A SQuAD-2 style ``*ForQuestionAnswering`` graph: inputs ids/mask(/types), start and end logits."""

    role = "qa"

    def __init__(self, model_path, tokenizer_path, config=None, *, name, sha256, threads=1, cache=None,
                 doc_stride: int = DOC_STRIDE):
        super().__init__(tokenizer_path, config, name=name, sha256=sha256, threads=threads, cache=cache)
        self.open_session(model_path)
        outs = [o.name for o in self.session.get_outputs()]
        if not {"start_logits", "end_logits"} <= set(outs):
            raise ModelIntegrityError(f"QA model {name} lacks start_logits/end_logits outputs (has {outs})")
        self.doc_stride = int(doc_stride)
        self._window_tokenizer = None  # built on the first input longer than the model

    # -- model ----------------------------------------------------------------------------
    def logits(self, ids: list[int], type_ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Start and end logits for one encoded pair."""
        input_ids = np.asarray([ids], dtype=np.int64)
        feeds = {"input_ids": input_ids, "attention_mask": np.ones_like(input_ids)}
        if "token_type_ids" in self.inputs:
            feeds["token_type_ids"] = np.asarray([type_ids], dtype=np.int64)
        start, end = self.session.run(["start_logits", "end_logits"], feeds)
        return start[0].astype(np.float32), end[0].astype(np.float32)

    def logits_batch(self, rows: list[tuple[list[int], list[int]]]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Start and end logits for several encoded pairs in one onnxruntime call.

        Rows are right-padded to the longest with the pad id (attention mask 0 there); each
        row's logits are cut back to its own length, so the argmax never lands on padding.
        """
        if not rows:
            return []
        if len(rows) == 1:
            return [self.logits(*rows[0])]
        input_ids, mask = pad_rows([ids for ids, _ in rows], int(self.config.get("pad_token_id") or 0))
        types, _ = pad_rows([type_ids for _, type_ids in rows], 0)
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feeds["token_type_ids"] = types
        start, end = self.session.run(["start_logits", "end_logits"], feeds)
        return [(start[r, :len(ids)].astype(np.float32), end[r, :len(ids)].astype(np.float32))
                for r, (ids, _) in enumerate(rows)]

    def _windows(self, question: str, context: str):
        enc = self.tokenizer.encode(question, context)
        limit = self.max_tokens()
        if len(enc.ids) <= limit:
            return [enc]
        tok = self._window_tokenizer or self._make_window_tokenizer(limit)
        first = tok.encode(question, context)
        return [first, *first.overflowing]

    def _make_window_tokenizer(self, limit: int):
        from tokenizers import Tokenizer

        tok = Tokenizer.from_str(self.tokenizer.to_str())
        tok.no_padding()
        tok.enable_truncation(limit, stride=self.doc_stride, strategy="only_second")
        self._window_tokenizer = tok
        return tok

    def _span(self, ids: list[int], type_ids: list[int]) -> tuple[int, int, float]:
        """The reference span rule: argmax start, argmax end + 1; and its start+end logit."""
        return _span_of(*self.logits(ids, type_ids))

    def _result(self, windows, spans) -> dict:
        """The answer from each window's (start, end, score): see :meth:`answer`."""
        best = None
        for w, (enc, (start, end, score)) in enumerate(zip(windows, spans)):
            if len(windows) == 1 or (start > 0 and (best is None or score > best[3])):
                best = (w, start, end, score, enc.ids)
        if best is None:  # every window predicted CLS: no answer
            best = (0, 0, 1, 0.0, windows[0].ids)
        w, start, end, _, ids = best
        text = self.tokens_to_string(self.token_strings(ids[start:end]))
        return QAResult(text=text, no_answer=start == 0 and end == 1, cls_in_span=start == 0 and end >= 1,
                        start=start, end=end, window=w).to_json()

    def answer(self, question: str, context: str) -> QAResult:
        """Answer ``question`` from ``context`` (SPEC Q² step 4: argmax span, CLS = no answer).

        Long inputs: the context is cut into windows of the model's length overlapping by
        ``doc_stride`` tokens; each window gets the reference rule, and the window whose
        span is not CLS and has the highest start+end logit wins (no window with a span:
        no answer). Inputs that fit in one window behave exactly like the reference.
        """
        payload = {"question": question, "context": context, "doc_stride": self.doc_stride}

        def compute():
            windows = self._windows(question, context)
            return self._result(windows, [self._span(enc.ids, enc.type_ids) for enc in windows])

        return QAResult(**self.cached("qa_span", payload, compute))

    def answer_batch(self, pairs: list[tuple[str, str]]) -> list[QAResult]:
        """:meth:`answer` for several (question, context) pairs, every window of every pair in
        one padded onnxruntime call.

        The same rule as :meth:`answer`; the logits equal the one-at-a-time ones up to float
        rounding (fp32; int8 graphs quantize activations with one scale per call, so their
        logits move a little more). The batch is cached as a whole, keyed by all its pairs in
        order: a result depends only on the batch, which the caller fixes by one response's
        content (Q²: the questions of one response), never on what else is being scored. A
        single pair is exactly :meth:`answer` (same cache entry).
        """
        pairs = [(str(q), str(c)) for q, c in pairs]
        if len(pairs) <= 1:
            return [self.answer(q, c) for q, c in pairs]
        payload = {"pairs": [list(p) for p in pairs], "doc_stride": self.doc_stride}

        def compute():
            per_pair = [self._windows(q, c) for q, c in pairs]
            flat = [(enc.ids, enc.type_ids) for windows in per_pair for enc in windows]
            spans = [_span_of(s, e) for s, e in self.logits_batch(flat)]
            out, i = [], 0
            for windows in per_pair:
                out.append(self._result(windows, spans[i:i + len(windows)]))
                i += len(windows)
            return out

        return [QAResult(**r) for r in self.cached("qa_span_batch", payload, compute)]


def _span_of(start_logits: np.ndarray, end_logits: np.ndarray) -> tuple[int, int, float]:
    start = int(np.argmax(start_logits))
    end = int(np.argmax(end_logits)) + 1
    return start, end, float(start_logits[start] + end_logits[end - 1])
