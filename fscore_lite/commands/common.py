"""Small helpers the command modules share."""
from __future__ import annotations


def human_size(n: float) -> str:
    """Bytes as ``123 B``, ``4.5 KB``, ``6.7 MB`` or ``8.9 GB`` (powers of 1000)."""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"
