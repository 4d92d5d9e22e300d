"""A small progress bar with ETA on stderr (no dependency; quiet when stderr is not a TTY
unless forced)."""
from __future__ import annotations

import sys
import time


def _fmt(seconds: float) -> str:
    seconds = int(max(0, seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


class Progress:
    def __init__(self, total: int, label: str = "", enabled: bool = True, stream=None):
        self.total = max(total, 0)
        self.label = label
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.start = time.monotonic()
        self.done = 0
        self.skipped = 0
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def skip(self, n: int = 1) -> None:
        """Items already done (resume): they count toward the bar but not the rate."""
        self.skipped += n
        self.done += n

    def advance(self, note: str = "") -> None:
        self.done += 1
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.start
        worked = self.done - self.skipped
        rate = worked / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else 0.0
        pct = 100.0 * self.done / self.total if self.total else 100.0
        width = 24
        filled = int(width * pct / 100)
        bar = "#" * filled + "-" * (width - filled)
        line = (f"{self.label} [{bar}] {self.done}/{self.total} {pct:5.1f}% "
                f"elapsed {_fmt(elapsed)} eta {_fmt(eta)} {note}")
        if self._tty:
            self.stream.write("\r" + line[:200].ljust(100))
            if self.done >= self.total:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
