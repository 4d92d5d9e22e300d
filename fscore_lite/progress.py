"""The one progress component of every command: counts the work that takes time, with an ETA.

A :class:`Progress` counts items (bios, responses, pages) and, beside them, units of work
(``advance(n, unit="facts verified")``): facts generated, facts verified, questions, passages.
Work is declared with ``add_total(n, unit)`` as soon as it is known — before the run for
precomputed facts, or when an item's facts have been generated — and the time between two
calls is charged to the unit advanced. The ETA is then

    sum over units of (units left) × (seconds per unit so far)  +  items left × (other seconds per item)

where the units left include, for items not yet begun, the mean work per item seen so far
(unless the unit was declared in full before the run). So it is right after the first item,
and it counts facts rather than items: a 30-fact item and a 3-fact item weigh what they cost.

Output goes to ``stream`` (stderr) only: on a terminal one live line drawn by tqdm (a
dependency of nltk, so always installed); elsewhere (a log file, a pipe) a plain line at
most every ``log_every`` seconds and a final one at :meth:`close`. ``enabled=False`` prints
nothing (``--quiet``).
"""
from __future__ import annotations

import contextlib

import sys
import time

try:  # tqdm comes with nltk (a runtime dependency); without it the live line is drawn by hand
    from tqdm import tqdm as _tqdm
except ImportError:  # pragma: no cover - exercised only where nltk's dependencies are incomplete
    _tqdm = None

ITEM = "item"


def _fmt(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(max(0, round(seconds)))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


class _Unit:
    __slots__ = ("name", "done", "total", "seconds", "upfront")

    def __init__(self, name: str, upfront: bool):
        self.name, self.done, self.total, self.seconds, self.upfront = name, 0, 0, 0.0, upfront


class Progress:
    """Items and units of work done, with an ETA, on stderr.

    ``total``: the number of items (``None`` when unknown: counts and rates only).
    ``clock``: a function returning seconds (tests pass a fake one).
    """

    def __init__(self, total: int | None, label: str = "", enabled: bool = True, stream=None, *,
                 item_unit: str = "items", clock=time.monotonic, log_every: float = 10.0,
                 tty: bool | None = None):
        self.total = None if total is None else max(int(total), 0)
        self.label = label
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.item_unit = item_unit
        self.clock = clock
        self.log_every = log_every
        self.start = self._last = self._last_draw = clock()
        self.done = 0  # items, resumed ones included
        self.skipped = 0  # resumed items: they count toward the total but not the rates
        self.item_seconds = 0.0  # time charged to items themselves (not to a unit)
        self.units: dict[str, _Unit] = {}
        self._open = False  # an item has begun (declared or done work) and is not done
        self._drawn = False
        self._closed = False
        if tty is None:
            tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._tty = tty
        self._bar = None

    # -- counting -------------------------------------------------------------------------
    def _unit(self, unit: str, declaring: bool = False) -> _Unit:
        u = self.units.get(unit)
        if u is None:
            # declared before anything began: the whole run's amount is known, nothing to extrapolate
            upfront = declaring and self.done == self.skipped and not self._open
            u = self.units[unit] = _Unit(unit, upfront=upfront)
        return u

    def _charge(self) -> float:
        now = self.clock()
        dt, self._last = now - self._last, now
        return max(dt, 0.0)

    @contextlib.contextmanager
    def uncharged(self):
        """Work inside (loading a model on first use) is charged to no unit or item: it does not
        happen again, so it must not inflate the rates the ETA extrapolates from."""
        self._charge()
        try:
            yield
        finally:
            self._charge()

    def is_upfront(self, unit: str) -> bool:
        """Whether ``unit`` was declared before the first item began (its total is the run's)."""
        u = self.units.get(unit)
        return bool(u and u.upfront)

    def add_total(self, n: int, unit: str) -> None:
        """``n`` more units of ``unit`` are known to come."""
        u = self._unit(unit, declaring=True)
        if not u.upfront:
            self._open = True
        u.total += max(int(n), 0)

    def advance(self, n: int | str = 1, unit: str | None = None, note: str = "") -> None:
        """``n`` units of ``unit`` done (the time since the last call is charged to them); without
        ``unit``, ``n`` items done. ``advance("note")`` is one item with a note (older callers)."""
        if isinstance(n, str):
            n, note = 1, n
        dt = self._charge()
        if unit is None or unit == ITEM:
            self.done += n
            self.item_seconds += dt
            self._open = False
            self._draw(note)
            return
        u = self._unit(unit)
        self._open = True
        u.done += n
        u.seconds += dt
        u.total = max(u.total, u.done)
        self._draw(note)

    def skip(self, n: int = 1) -> None:
        """Items already done (resume): they count toward the bar but not the rates."""
        self._charge()
        self.skipped += n
        self.done += n

    def set_counts(self, unit: str, done: int) -> None:
        """Set a running count (for producers that report totals so far, e.g. passages written)."""
        u = self._unit(unit)
        if done > u.done:
            self.advance(done - u.done, unit)

    # older interface (q2 meta-eval): update() is one item; update(worked=False) a resumed one
    def update(self, n: int = 1, worked: bool = True) -> None:
        if worked:
            self.advance(n)
        else:
            self.skip(n)

    # -- the ETA --------------------------------------------------------------------------
    def elapsed(self) -> float:
        return max(self.clock() - self.start, 0.0)

    def remaining(self, unit: str) -> float | None:
        """Units of ``unit`` still to do, including the mean per item for items not begun."""
        u = self.units[unit]
        left = float(max(u.total - u.done, 0))
        if u.upfront or self.total is None:
            return left
        begun = self.done - self.skipped + (1 if self._open else 0)
        unbegun = max(self.total - self.done - (1 if self._open else 0), 0)
        if unbegun and not begun:
            return None
        return left + (unbegun * u.total / begun if unbegun else 0.0)

    def eta(self) -> float | None:
        """Seconds left, or ``None`` while some remaining work has no measured rate yet. Without an
        item total, only a run whose every unit was declared in full up front has one."""
        units_only = self.total is None
        if units_only and not (self.units and all(u.upfront for u in self.units.values())):
            return None
        worked = self.done - self.skipped
        items_left = 0 if units_only else max(self.total - self.done, 0)
        if not units_only and items_left == 0:
            return 0.0
        secs = 0.0
        for name, u in self.units.items():
            left = self.remaining(name)  # without an item total: the declared units left
            if left is None:
                return None
            if left > 0:
                if not u.done:
                    return None
                secs += left * u.seconds / u.done
        if worked and items_left:
            secs += items_left * self.item_seconds / worked
        elif not self.units:
            return None
        return secs

    def fraction(self) -> float:
        """Share of the run done: by time (elapsed vs ETA) when an ETA exists, else by items."""
        eta = self.eta()
        el = self.elapsed()
        if eta is not None and el + eta > 0:
            return min(el / (el + eta), 1.0)
        if self.total:
            return min(self.done / self.total, 1.0)
        return 0.0

    # -- drawing --------------------------------------------------------------------------
    def line(self, note: str = "") -> str:
        """The progress line (without the bar)."""
        el = self.elapsed()
        parts = [f"{self.done}/{self.total} {self.item_unit}" if self.total is not None
                 else f"{self.done} {self.item_unit}"]
        if self.total is None and not self.done and self.units:
            parts = []  # a run counted in units only
        for name, u in self.units.items():
            left = self.remaining(name)
            known = max(u.total - u.done, 0)
            if left is None or (self.total is None and not u.upfront):
                count = f"{u.done} {name}"
            elif left > known:  # includes the extrapolation to items not begun
                count = f"{u.done}/~{round(u.done + left)} {name}"
            else:
                count = f"{u.done}/{u.total} {name}"
            if u.done and u.seconds > 0:
                count += f" ({u.done / u.seconds:.2f} {name.split()[0]}/s)"
            parts.append(count)
        parts.append(f"elapsed {_fmt(el)}")
        eta = self.eta()
        if self.total is not None or eta is not None:
            parts.append(f"eta {_fmt(eta)}")
        if note:
            parts.append(note)
        return ", ".join(parts)

    def _draw(self, note: str = "", final: bool = False) -> None:
        if not self.enabled or self._closed:
            return
        now = self.clock()
        if not final and self._drawn and now - self._last_draw < (0.2 if self._tty else self.log_every):
            return
        self._last_draw, self._drawn = now, True
        text = self.line(note)
        prefix = f"{self.label}: " if self.label else ""
        prefix_fmt = prefix.replace("{", "{{").replace("}", "}}")
        if not self._tty:
            self.stream.write(prefix + text + "\n")
            self.stream.flush()
            return
        pct = 100.0 * self.fraction()
        if _tqdm is None:
            width = 20
            fill = int(width * pct / 100)
            self.stream.write(f"\r{prefix}{pct:3.0f}% [{'#' * fill}{'-' * (width - fill)}] {text}"[:250] + "\033[K")
            self.stream.flush()
            return
        if self._bar is None:
            self._bar = _tqdm(total=100.0, file=self.stream, leave=True, dynamic_ncols=True, mininterval=0,
                              bar_format=prefix_fmt)
        text = text.replace("{", "{{").replace("}", "}}")  # the line is tqdm's format string
        self._bar.bar_format = prefix_fmt + ("{percentage:3.0f}%|{bar:20}| " if self.total is not None else "") + text
        self._bar.n = pct
        self._bar.refresh()

    def close(self, note: str = "") -> None:
        """The final line (when anything was counted); idempotent."""
        if self._closed:
            return
        if self.enabled and (self.done or self.units):
            self._draw(note, final=True)
        self._closed = True
        if self._bar is not None:
            self._bar.close()
        elif self.enabled and self._tty and self._drawn and _tqdm is None:
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
