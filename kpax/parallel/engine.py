"""The parallel consumer's state machine: records in, what to run, what to commit (sans-I/O).

Role: :class:`Engine` holds everything a parallel consumer decides, with no
I/O, no threads and no clock of its own (every call that depends on time
takes ``now``, in seconds). The asyncio driver (:mod:`kpax.parallel.driver`)
feeds it records and handler outcomes and does what it says:

- **ordering**: :meth:`Engine.take` gives the records that may start now
  (at most ``max_concurrency`` running), by the ordering's rule
  (:mod:`kpax.parallel.schedule`);
- **retries**: a failed attempt is retried after a delay that doubles from
  ``retry_delay`` up to ``retry_delay_max``, up to ``max_attempts`` attempts
  (None: forever); then :meth:`Engine.failed` says "give up" and the driver
  hands the record to the dead-letter topic or the error callback;
- **offsets**: per partition, the committed point and the done records
  beyond it (:mod:`kpax.parallel.offsets`, :mod:`kpax.parallel.codec`);
  :meth:`Engine.snapshot` says what to commit, :meth:`Engine.committed` what
  the group accepted;
- **back-pressure**: the *window* is the records taken from the consumer whose
  completion is not yet committed (incomplete, or done but not yet in an
  accepted commit), and their bytes. :meth:`Engine.room` is how many more may
  be taken; the driver pauses fetching when there is none. Since a crash
  redoes at most the window, ``max_records`` bounds the duplicates a crash
  can cause.

Imports: kpax.parallel.{codec,offsets,schedule}, kpax.structs.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kpax.parallel.codec import decode
from kpax.parallel.offsets import NEW, SKIP, PartitionOffsets
from kpax.parallel.schedule import (
    DONE,
    DROPPED,
    QUEUED,
    RUNNING,
    WAITING,
    FifoQueue,
    UnitQueue,
    Work,
)
from kpax.structs import OffsetAndMetadata, TopicPartition

__all__ = ["DROP", "GIVE_UP", "RETRY", "Engine", "EngineSettings", "Snapshot"]

#: What :meth:`Engine.failed` says to do with a failed record.
RETRY, GIVE_UP, DROP = "retry", "give up", "drop"

_BYTES = (bytes, bytearray, memoryview)


@dataclass(frozen=True)
class EngineSettings:
    ordering: str = "key"
    max_concurrency: int = 16
    max_records: int = 1000
    max_bytes: int = 64 * 1024 * 1024
    max_attempts: int | None = 3
    retry_delay: float = 0.1
    retry_delay_max: float = 10.0
    max_metadata_bytes: int = 4096


class Snapshot:
    """What to commit (``offsets``) and, per partition, what it records."""

    __slots__ = ("_entries", "offsets")

    def __init__(self) -> None:
        self.offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        #: (tracker, point, metadata, covered, the pending works it takes)
        self._entries: list[tuple[PartitionOffsets, int, str, int, list[Work]]] = []

    def __bool__(self) -> bool:
        return bool(self.offsets)


def _size(value: Any) -> int:
    return len(value) if isinstance(value, _BYTES) else 0


class Engine:
    """See the module docstring."""

    def __init__(self, settings: EngineSettings) -> None:
        if settings.ordering not in ("key", "partition", "unordered"):
            raise ValueError(
                f"ordering must be 'key', 'partition' or 'unordered', not {settings.ordering!r}"
            )
        self.settings = settings
        self.ordering = settings.ordering
        self.queue: UnitQueue | FifoQueue = (
            FifoQueue() if settings.ordering == "unordered" else UnitQueue()
        )
        self.parts: dict[TopicPartition, PartitionOffsets] = {}
        #: Handlers running (of any partition, revoked ones included).
        self.running = 0
        #: The window: records (and bytes) taken and not yet committed done.
        self.window_records = 0
        self.window_bytes = 0
        #: Done records not yet in a commit (those of commits under way excluded).
        self.done_pending = 0
        #: The metadata budget (lowered when the broker refuses metadata as too large).
        self.max_metadata = settings.max_metadata_bytes
        #: Counters: records processed, skipped (done before a restart), failed
        #: attempts, retries scheduled, records given up.
        self.processed = 0
        self.skipped = 0
        self.failures = 0
        self.retries = 0
        self.given_up = 0

    # ------------------------------------------------------------ partitions

    def assign(self, tp: TopicPartition, committed: OffsetAndMetadata | None) -> bool:
        """Start following ``tp`` from its committed offset (if any), skipping
        the records its metadata says are done. False: the metadata is a map of
        this kind that cannot be used (another version, damaged, or written for
        another offset): nothing is skipped."""
        old = self.parts.get(tp)
        if old is not None:
            self._forget(old)
        usable = True
        if committed is None:
            part = PartitionOffsets(tp)
        else:
            seed = decode(committed.metadata, committed.offset)
            usable = seed is not None
            part = PartitionOffsets(tp, committed.offset, committed.metadata, seed)
        self.parts[tp] = part
        return usable

    def revoke(self, tps: Iterable[TopicPartition]) -> None:
        """No record of ``tps`` starts from now on: the queued ones and those
        waiting for a retry are dropped (they stay incomplete: not committed);
        the running ones finish (see :meth:`running_in`)."""
        self._revoke({self.parts[tp] for tp in tps if tp in self.parts})

    def _revoke(self, parts: set[PartitionOffsets]) -> None:
        if not parts:
            return
        for part in parts:
            part.revoked = True
            for work in part.incomplete.values():
                if work.state in (QUEUED, WAITING):
                    work.state = DROPPED
        self.queue.drop(lambda w: w.part in parts)

    def remove(self, tps: Iterable[TopicPartition]) -> None:
        """Forget ``tps`` (after their last commit, or when they are lost)."""
        for tp in list(tps):
            part = self.parts.pop(tp, None)
            if part is not None:
                self._forget(part)

    def _forget(self, part: PartitionOffsets) -> None:
        if not part.revoked:
            self._revoke({part})
        part.removed = True
        self.window_records -= part.records
        self.window_bytes -= part.bytes
        self.done_pending -= len(part.pending)
        part.records = part.bytes = 0
        part.pending = []

    def running_in(self, tps: Iterable[TopicPartition]) -> int:
        return sum(self.parts[tp].running for tp in tps if tp in self.parts)

    # ------------------------------------------------------------ records in

    def room(self) -> int:
        """How many more records may be taken from the consumer now."""
        s = self.settings
        if self.window_bytes >= s.max_bytes:
            return 0
        return max(0, s.max_records - self.window_records)

    def add(self, records: Sequence[Any], now: float) -> int:
        """Take ``records`` (consumer records: topic, partition, offset, key,
        value, leader_epoch) in; returns how many are to be processed (the
        others were done before a restart, or seen already)."""
        parts = self.parts
        queue = self.queue
        ordering = self.ordering
        added = 0
        last: tuple[str, int] | None = None
        part: PartitionOffsets | None = None
        for rec in records:
            if last is None or rec.partition != last[1] or rec.topic != last[0]:
                last = (rec.topic, rec.partition)
                tp = TopicPartition(rec.topic, rec.partition)
                part = parts.get(tp)
                if part is None:
                    part = parts[tp] = PartitionOffsets(tp)
            assert part is not None
            if part.revoked:
                continue
            status = part.receive(rec.offset, rec.leader_epoch)
            if status != NEW:
                if status == SKIP:
                    self.skipped += 1
                continue
            size = _size(rec.key) + _size(rec.value)
            unit: Hashable
            if ordering == "key":
                unit = (part, rec.key)
            elif ordering == "partition":
                unit = part
            else:
                unit = None
            work = Work(rec, part, rec.offset, unit, size, rec.leader_epoch, now)
            try:
                queue.push(work)
            except TypeError:  # an unhashable (deserialized) key: ordered by its repr
                work.unit = (part, "repr", repr(rec.key))
                queue.push(work)
            part.incomplete[rec.offset] = work
            part.records += 1
            part.bytes += size
            added += 1
            self.window_bytes += size
        self.window_records += added
        return added

    # ------------------------------------------------------------ running

    def take(self, now: float, limit: int | None = None) -> list[Work]:
        """The records that may start now (marked running), at most ``limit``
        and at most what ``max_concurrency`` leaves."""
        free = self.settings.max_concurrency - self.running
        if limit is not None:
            free = min(free, limit)
        if free <= 0:
            return []
        works = self.queue.pop(now, free)
        for work in works:
            work.state = RUNNING
            work.attempts += 1
            work.part.running += 1
        self.running += len(works)
        return works

    def _stop_running(self, work: Work) -> PartitionOffsets | None:
        """``work`` stopped running; its tracker, unless it was forgotten."""
        self.running -= 1
        part: PartitionOffsets = work.part
        if part.removed:
            return None
        part.running -= 1
        return part

    def succeeded(self, work: Work, now: float) -> None:
        """``work`` is done (its handler succeeded, or it was given up and
        handed to the dead-letter topic or the error callback)."""
        part = self._stop_running(work)
        work.state = DONE
        self.processed += 1
        if part is None:
            return
        del part.incomplete[work.offset]
        part.pending.append(work)
        self.done_pending += 1
        self.queue.finished(work)

    def failed(self, work: Work, now: float) -> str:
        """An attempt of ``work`` failed: RETRY (it runs again at ``work.ready_at``:
        see :meth:`next_retry`), GIVE_UP (attempts exhausted: it stays running
        until the driver calls :meth:`succeeded` or :meth:`abandon`) or DROP
        (its partition was revoked: it is left incomplete)."""
        self.failures += 1
        part: PartitionOffsets = work.part
        if part.revoked or part.removed:
            self._stop_running(work)
            work.state = DROPPED
            return DROP
        limit = self.settings.max_attempts
        if limit is not None and work.attempts >= limit:
            self.given_up += 1
            return GIVE_UP
        self._stop_running(work)
        s = self.settings
        delay = min(s.retry_delay * 2 ** (work.attempts - 1), s.retry_delay_max)
        self.queue.retry(work, now + delay)
        self.retries += 1
        return RETRY

    def abandon(self, work: Work) -> None:
        """A given-up ``work`` could not be disposed of: it stops running and
        stays incomplete (its unit stays blocked: the consumer is stopping)."""
        self._stop_running(work)
        work.state = DROPPED

    def next_retry(self) -> float | None:
        """When the earliest retry is due (None: none waits)."""
        return self.queue.next_retry()

    # ------------------------------------------------------------ commits

    def snapshot(self, tps: Iterable[TopicPartition] | None = None) -> Snapshot:
        """What to commit now, for ``tps`` (default: every partition): each
        partition whose committed point or metadata changed. Pass the result to
        :meth:`committed` or :meth:`commit_failed` once the commit is answered."""
        snap = Snapshot()
        parts = (
            list(self.parts.values())
            if tps is None
            else [self.parts[tp] for tp in tps if tp in self.parts]
        )
        for part in parts:
            state = part.commit_state(self.max_metadata)
            if state is None:
                continue
            point, encoded = state
            if part.committed == (point, encoded.metadata):
                continue
            taken, part.pending = part.pending, []
            self.done_pending -= len(taken)
            snap.offsets[part.tp] = OffsetAndMetadata(point, encoded.metadata, part.epoch_at(point))
            snap._entries.append((part, point, encoded.metadata, encoded.covered, taken))
        return snap

    def committed(self, snap: Snapshot) -> None:
        """The group accepted ``snap``: the done records it records leave the window."""
        for part, point, metadata, covered, taken in snap._entries:
            if part.removed:
                continue
            released = records = 0
            for work in taken:
                if work.offset < covered:
                    records += 1
                    released += work.size
                else:
                    part.pending.append(work)
                    self.done_pending += 1
            part.records -= records
            part.bytes -= released
            self.window_records -= records
            self.window_bytes -= released
            last = part.committed
            if last is None or point >= last[0]:
                part.committed = (point, metadata)

    def commit_failed(self, snap: Snapshot) -> None:
        """``snap`` was not committed: its records wait for the next commit."""
        for part, _point, _metadata, _covered, taken in snap._entries:
            if not part.removed:
                part.pending.extend(taken)
                self.done_pending += len(taken)

    def shrink_metadata(self, refused: int) -> int:
        """The broker refused metadata of ``refused`` bytes as too large: lower
        the budget below it, at least by half (under 64 bytes: none, commit the
        points only); returns the new budget."""
        self.max_metadata = min(self.max_metadata // 2, refused - 1)
        if self.max_metadata < 64:
            self.max_metadata = 0
        return self.max_metadata

    # ------------------------------------------------------------ observing

    def queued(self, part: PartitionOffsets) -> int:
        """Records of ``part`` taken and not running: waiting for their turn or a retry."""
        return len(part.incomplete) - part.running

    def oldest_age(self, part: PartitionOffsets, now: float) -> float | None:
        """Seconds since the oldest incomplete record of ``part`` was taken in."""
        work = part.oldest()
        return None if work is None else now - work.received
