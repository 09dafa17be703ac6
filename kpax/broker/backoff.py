"""Exponential backoff with jitter, as the Java client's reconnect.backoff.ms.

Role: how long to wait before the n-th retry: ``base * 2**n`` capped at
``maximum``, times a random factor in [0.8, 1.2] so that many clients do not
reconnect in lockstep. The factor comes from the module-level ``random``
generator unless a ``rand`` is given, so a simulation that seeds it
(kpax.testing.sim) replays the same delays.

Imports: the standard library only.
"""

from __future__ import annotations

import random


class Backoff:
    """Tracks consecutive failures of one thing (a broker connection, a request)."""

    __slots__ = ("_base", "_failures", "_max", "_rand")

    def __init__(self, base_ms: float, max_ms: float, *, rand: random.Random | None = None) -> None:
        self._base = max(base_ms, 0.0) / 1000.0
        self._max = max(max_ms, base_ms) / 1000.0
        self._failures = 0
        self._rand: random.Random | None = rand

    @property
    def failures(self) -> int:
        return self._failures

    def next_delay(self) -> float:
        """Seconds to wait now; counts one more failure."""
        delay = self.delay(self._failures)
        self._failures += 1
        return delay

    def delay(self, failures: int) -> float:
        """Seconds to wait after ``failures`` earlier failures (0: the first
        retry), without counting one."""
        if self._base == 0:
            return 0.0
        delay = min(self._base * (2 ** min(failures, 32)), self._max)
        factor = random.uniform(0.8, 1.2) if self._rand is None else self._rand.uniform(0.8, 1.2)
        return float(delay * factor)

    def reset(self) -> None:
        self._failures = 0
