"""Which record may start next, under each ordering (sans-I/O).

Role: a :class:`Work` is one record in a parallel consumer, from the moment
it is taken from the consumer until it is done; a queue decides which works
may start now. Pure data structures: no I/O, no clock (a retry's time is
given by the caller and compared with the ``now`` it passes in).

- :class:`UnitQueue` (orderings ``"key"`` and ``"partition"``): works are
  grouped in *units* -- a key of one partition, or a partition -- and a unit
  runs one work at a time, in the order the works were added (offset order).
  A unit whose work waits for a retry stays busy, so the works behind it
  wait too; other units go on. Units take turns (round robin), so a unit
  with many records does not starve the others.
- :class:`FifoQueue` (``"unordered"``): any work may start; first in, first out.

In both, a work whose retry time has come goes before works never tried.

Imports: the standard library only.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["DONE", "DROPPED", "QUEUED", "RUNNING", "WAITING", "FifoQueue", "UnitQueue", "Work"]

#: A work's states: waiting for its turn, running, waiting for a retry, done,
#: dropped (its partition was revoked before it ran).
QUEUED, RUNNING, WAITING, DONE, DROPPED = range(5)


class Work:
    """One record and its progress. ``part`` is the partition's tracker (its
    identity tells works of an earlier assignment of the partition apart);
    ``unit`` what it is ordered by; ``size`` the bytes it counts for."""

    __slots__ = (
        "attempts",
        "epoch",
        "offset",
        "part",
        "ready_at",
        "received",
        "record",
        "size",
        "state",
        "unit",
    )

    def __init__(  # noqa: PLR0917 - one slot each
        self,
        record: Any,
        part: Any,
        offset: int,
        unit: Hashable,
        size: int,
        epoch: int,
        received: float,
    ) -> None:
        self.record = record
        self.part = part
        self.offset = offset
        self.unit = unit
        self.size = size
        self.epoch = epoch
        self.received = received
        self.attempts = 0
        self.ready_at = 0.0
        self.state = QUEUED

    def __repr__(self) -> str:
        return f"<Work offset={self.offset} state={self.state} attempts={self.attempts}>"


class _Retries:
    """Works waiting for their retry time, earliest first."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Work]] = []
        self._seq = itertools.count()

    def add(self, work: Work, when: float) -> None:
        work.ready_at = when
        work.state = WAITING
        heapq.heappush(self._heap, (when, next(self._seq), work))

    def due(self, now: float) -> list[Work]:
        """The works whose time has come (dropped ones are skipped)."""
        heap = self._heap
        out = []
        while heap and heap[0][0] <= now:
            work = heapq.heappop(heap)[2]
            if work.state == WAITING:
                work.state = QUEUED
                out.append(work)
        return out

    def next_time(self) -> float | None:
        heap = self._heap
        while heap and heap[0][2].state != WAITING:
            heapq.heappop(heap)
        return heap[0][0] if heap else None


class UnitQueue:
    """Works by unit (a key or a partition): one running per unit, in order."""

    def __init__(self) -> None:
        #: unit -> its works, the first running (or waiting for a retry) unless
        #: the unit is in ``_ready``; a unit without works is deleted.
        self._units: dict[Hashable, deque[Work]] = {}
        #: Units whose first work may start (each at most once).
        self._ready: deque[Hashable] = deque()
        self._retries = _Retries()

    def push(self, work: Work) -> None:
        """Add ``work`` behind the works of its unit (raises TypeError if the
        unit is not hashable)."""
        unit = work.unit
        q = self._units.get(unit)
        if q is None:
            self._units[unit] = deque((work,))
            self._ready.append(unit)
        else:
            q.append(work)  # behind a work that is queued, running or waiting

    def pop(self, now: float, n: int) -> list[Work]:
        """Up to ``n`` works that may start now (marked RUNNING by the caller)."""
        ready = self._ready
        for work in self._retries.due(now):
            ready.appendleft(work.unit)
        out: list[Work] = []
        units = self._units
        while ready and len(out) < n:
            out.append(units[ready.popleft()][0])
        return out

    def finished(self, work: Work) -> None:
        """``work`` (running) is done: the next work of its unit may start."""
        unit = work.unit
        q = self._units.get(unit)
        if not q or q[0] is not work:
            return  # its partition was dropped meanwhile
        q.popleft()
        if q:
            self._ready.append(unit)
        else:
            del self._units[unit]

    def retry(self, work: Work, when: float) -> None:
        """``work`` (running) failed: it starts again at ``when``; its unit waits."""
        self._retries.add(work, when)

    def next_retry(self) -> float | None:
        return self._retries.next_time()

    def drop(self, dropped: Callable[[Work], bool]) -> None:
        """Forget the units whose works ``dropped(work)`` says go (the works of
        one unit are of one partition). The caller marks their works DROPPED
        (a dropped work waiting for a retry is then skipped)."""
        units = self._units
        for unit, q in list(units.items()):
            if dropped(q[0]):
                del units[unit]
        self._ready = deque(u for u in self._ready if u in units)

    def __len__(self) -> int:
        return sum(len(q) for q in self._units.values())


class FifoQueue:
    """Works in arrival order, any number of them running at once."""

    def __init__(self) -> None:
        self._ready: deque[Work] = deque()
        self._retries = _Retries()

    def push(self, work: Work) -> None:
        self._ready.append(work)

    def pop(self, now: float, n: int) -> list[Work]:
        ready = self._ready
        ready.extendleft(reversed(self._retries.due(now)))
        if n >= len(ready):
            out = list(ready)
            ready.clear()
            return out
        return [ready.popleft() for _ in range(n)]

    def finished(self, work: Work) -> None:
        pass

    def retry(self, work: Work, when: float) -> None:
        self._retries.add(work, when)

    def next_retry(self) -> float | None:
        return self._retries.next_time()

    def drop(self, dropped: Callable[[Work], bool]) -> None:
        """Forget the works ``dropped(work)`` says go (see :meth:`UnitQueue.drop`)."""
        if any(dropped(w) for w in self._ready):
            self._ready = deque(w for w in self._ready if not dropped(w))

    def __len__(self) -> int:
        return len(self._ready)
