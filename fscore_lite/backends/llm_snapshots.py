"""Kept prefixes of :class:`fscore_lite.backends.llm.LlamaRunner` and their saved KV states.

A prefix named with :meth:`PrefixSnapshots.keep_prefix` (the fixed demos of the atomic-fact
prompt) is saved as a sequence-state snapshot the first time an evaluation reaches its end at
a segment end, and restored into the cleared context — cells 0..n-1 again, the bytes a cold
evaluation writes — when a later prompt starts with it on the same schedule and the context
holds something else. This changes cost only, never a result. Only public ``llama_cpp``
functions are used (``llama_state_seq_get_size/get_data/set_data``, ``llama_memory_*``).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass


@dataclass
class Snapshot:
    """The saved state of the working sequence holding exactly ``tokens`` (segment ends ``ends``)."""

    tokens: list[int]
    ends: list[int]
    data: object  # ctypes uint8 array filled by llama_state_seq_get_data
    size: int


class PrefixSnapshots:
    """Mixed into :class:`~fscore_lite.backends.llm.LlamaRunner`: uses its ``_llm``, ``_mem``,
    ``_tokens``, ``_ends``, ``_keep``, ``stats``, ``SEQ`` and ``_forget``."""

    MAX_EVICTABLE = 6  # saved states of prefixes kept with evictable=True (each a few tens of MB)

    def keep_prefix(self, text: str, evictable: bool = False) -> None:
        """Keep the KV state of ``text``, a prefix many prompts start with (the fixed demos of the
        atomic-fact prompt): it is saved the first time a prompt's evaluation reaches its end
        (when that is a segment end), and restored instead of re-evaluated afterwards, whatever
        ran in between. This changes cost only, never a result. Of the ``evictable`` ones (the
        fixed demos with one more demo) at most :attr:`MAX_EVICTABLE` states are held, the least
        recently used dropped first (saved again when next evaluated)."""
        head, _ = self.split_template(text)
        toks = tuple(self._llm.tokenize(head.encode("utf-8"), add_bos=True, special=self.chat_template))
        self._keep.setdefault(toks, None)
        if evictable:
            self.__dict__.setdefault("_evictable", {})[toks] = 0

    def _touch(self, key: tuple[int, ...]) -> None:
        """Mark an evictable state as just used; drop the least recently used past the bound."""
        lru = self.__dict__.get("_evictable")
        if not lru or key not in lru:
            return
        self.__dict__["_clock"] = lru[key] = self.__dict__.get("_clock", 0) + 1
        held = sorted((t, k) for k, t in lru.items() if self._keep.get(k) is not None)
        for _, k in held[:max(0, len(held) - self.MAX_EVICTABLE)]:
            self._keep[k] = None

    def _save_snapshot(self, key: tuple[int, ...]) -> None:
        import llama_cpp

        ctx = self._llm.ctx
        size = llama_cpp.llama_state_seq_get_size(ctx, self.SEQ)
        buf = (ctypes.c_uint8 * size)()
        n = llama_cpp.llama_state_seq_get_data(ctx, buf, size, self.SEQ)
        if n:
            self._keep[key] = Snapshot(list(self._tokens), list(self._ends), buf, n)
            self.stats.extra["snapshots_saved"] += 1
            self._touch(key)

    def _restore(self, snap: Snapshot) -> bool:
        """Clear the context and load ``snap`` into it: cells 0..n-1, as a cold evaluation leaves them."""
        import llama_cpp

        llama_cpp.llama_memory_clear(self._mem, False)
        self._tokens, self._ends = [], []
        self._llm.n_tokens = 0
        ok = llama_cpp.llama_state_seq_set_data(self._llm.ctx, snap.data, snap.size, self.SEQ) == snap.size
        if not ok or llama_cpp.llama_memory_seq_pos_max(self._mem, self.SEQ) != len(snap.tokens) - 1:
            self._forget()
            self._keep[tuple(snap.tokens)] = None  # saved again the next time it is evaluated
            return False
        self._tokens, self._ends = list(snap.tokens), list(snap.ends)
        self._llm.n_tokens = len(snap.tokens)
        self.stats.extra["snapshots_restored"] += 1
        self._touch(tuple(snap.tokens))
        return True

    def _save_if_kept(self, end: int) -> None:
        """After a segment ending at ``end``: save the state if a kept, unsaved prefix ends there."""
        if self._keep and any(len(k) == end for k in self._keep):
            key = tuple(self._tokens)
            if key in self._keep and self._keep[key] is None:
                self._save_snapshot(key)

    def _snapshot_for(self, tokens: list[int], ends: list[int], held: int) -> Snapshot | None:
        """The longest saved prefix of ``tokens`` (longer than ``held``, shorter than all of it)
        decoded on the same schedule ``ends``, if any."""
        n = len(tokens)
        snaps = [s for s in self._keep.values() if s is not None and held < len(s.tokens) < n]
        for snap in sorted(snaps, key=lambda s: -len(s.tokens)):
            if snap.ends == ends[:len(snap.ends)] and tokens[:len(snap.tokens)] == snap.tokens:
                return snap
        return None
