"""Output helpers of the `kpax` command: aligned tables, JSON listings, progress on stderr.

Role: listings print an aligned table for people or, with ``--output json``,
one JSON document for programs; :class:`Progress` draws a one-line progress
indicator on stderr only when stderr is a terminal.

Imports: the standard library only.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import Any


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [["-" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def emit(doc: Any, human: str, fmt: str) -> None:
    """Print *doc* as JSON (``--output json``) or the *human* text."""
    if fmt == "json":
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
    else:
        sys.stdout.write(human + ("\n" if human and not human.endswith("\n") else ""))
    sys.stdout.flush()


def note(msg: str) -> None:
    """A status line on stderr (summaries)."""
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


class Progress:
    """``records ... rate`` on stderr, redrawn at most 4 times a second, TTY only."""

    def __init__(self, verb: str, total: int | None = None, enabled: bool | None = None) -> None:
        self.verb = verb
        self.total = total
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.start = time.monotonic()
        self._next = self.start + 1.0
        self._drawn = False

    def update(self, count: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + 0.25
        rate = count / max(now - self.start, 1e-9)
        if self.total:
            frac = min(count / self.total, 1.0)
            bar = "#" * int(frac * 30)
            text = f"{self.verb} [{bar:<30}] {count}/{self.total} {rate:,.0f}/s"
        else:
            text = f"{self.verb} {count:,} records {rate:,.0f}/s"
        sys.stderr.write("\r" + text + "\x1b[K")
        sys.stderr.flush()
        self._drawn = True

    def done(self) -> None:
        if self._drawn:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def rate_summary(verb: str, records: int, nbytes: int, seconds: float, where: str) -> str:
    secs = max(seconds, 1e-9)
    return (
        f"{verb} {records:,} records ({nbytes:,} bytes) {where} in {seconds:.2f}s "
        f"({records / secs:,.0f} records/s, {nbytes / secs / 1e6:.1f} MB/s)"
    )
