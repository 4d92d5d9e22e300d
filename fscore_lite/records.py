"""Output records shared by ``score``, ``q2``, ``report`` and meta-evaluation.

An output line is the input's fields carried through, then the result: :class:`ItemRecord`
is that line before serialisation, and :meth:`ItemRecord.to_json` the one serialiser. A result
field the input also has is replaced (and moves after the input's fields), so a rescored output
file gives the same lines as its input did.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

# Items that count toward FActScore's respond_ratio: scored, abstained, or left without facts
# (as in the reference); items with input problems or unknown topics are counted apart.
RESPONSE_STATUSES = ("ok", "abstained", "no_facts", "empty_output")


@dataclass(frozen=True)
class ItemRecord:
    """One output line: ``data`` (the input row) and ``result`` (``status`` and the result
    fields, in output order). ``result_keys`` names every field the pipeline can write."""

    data: Mapping[str, Any]
    result: Mapping[str, Any]
    result_keys: tuple[str, ...] = field(default=(), repr=False)

    @property
    def status(self) -> str:
        return self.result["status"]

    def to_json(self) -> dict:
        drop = set(self.result_keys) | set(self.result)
        return {**{k: v for k, v in self.data.items() if k not in drop}, **self.result}



def status_counts(records: Iterable[Mapping]) -> dict[str, int]:
    """How many records have each ``status`` (``?`` when missing), sorted by status."""
    counts: dict[str, int] = {}
    for r in records:
        s = r.get("status", "?")
        counts[s] = counts.get(s, 0) + 1
    return dict(sorted(counts.items()))
