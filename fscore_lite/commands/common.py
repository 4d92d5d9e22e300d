"""Small helpers the command modules share."""
from __future__ import annotations

from dataclasses import MISSING, fields


def human_size(n: float) -> str:
    """Bytes as ``123 B``, ``4.5 KB``, ``6.7 MB`` or ``8.9 GB`` (powers of 1000)."""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def default(cls, name: str):
    """The default of field ``name`` of the options dataclass ``cls``: the CLI restates none."""
    (f,) = [f for f in fields(cls) if f.name == name]
    if f.default is MISSING:
        raise TypeError(f"{cls.__name__}.{name} has no plain default")
    return f.default


def one_of(cls, name: str) -> str:
    """``a, b or c``: the choices of option ``name`` of ``cls`` for a help text (checked by ``cls``)."""
    allowed = cls.choices()[name]
    return ", ".join(allowed[:-1]) + " or " + allowed[-1]
