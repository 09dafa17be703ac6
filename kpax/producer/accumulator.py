"""The record accumulator: per-partition batches between ``send`` and the sender.

Role: the thread-safe hand-off point of the producer. Caller threads (the sync
face) or the I/O loop (the asyncio face) :meth:`Accumulator.append` records;
the sender (I/O loop) :meth:`Accumulator.drain_open` closes batches that are
full, lingered long enough, or are being flushed, and takes ready batches off
each :class:`PartitionQueue`. One :class:`threading.Lock` guards all of it and
is held only for a few dict/list operations and a ``BatchBuilder.append``.

Memory (``buffer_memory``): each new batch reserves ``max(batch_size,
record size)`` bytes, like the Java client's buffer pool; once the batch is
encoded (closed) it holds only its encoded bytes (:meth:`Accumulator.shrink`:
with keyed records to many partitions most batches carry a few records), and
the reservation is released when the batch completes. When a new batch does
not fit, ``append`` returns :data:`FULL` and the caller waits (sync:
:meth:`wait_for_memory` blocks up to ``max_block_ms``; asyncio: awaits the
``memory_freed`` hook).

A batch whose linger is over stays open -- it takes records -- until the
sender takes it for a request (:meth:`Accumulator.drain_open` hands its
queue to the sender, :meth:`Accumulator.take_open` closes it), as the Java
client's and librdkafka's do: while a broker has its requests in flight, a
partition's records gather in one batch instead of one batch each. (A
transactional producer's batches, and every batch at a flush, close at
their linger as before.)

Closing a batch (full, flushed, taken) encodes it at once, under the lock,
with its producer id, epoch and sequence numbers (``seal``: the producer's
:class:`~kpax.producer.sealer.Sealer`, given at construction): a full batch
is thus encoded in the thread that filled it, which keeps the I/O thread's
share of the GIL small in the sync face, and a partition's ready batches are
always in sequence order.

What the sender reads costs nothing per idle partition: open batches are
kept in the order they were opened (:attr:`Accumulator.lingering`, which is
their linger deadlines' order), so a round closes the lingered ones from its
head; queues with batches ready are kept in :attr:`Accumulator.ready_queues`.

Waking the sender (librdkafka's rule): the sender sets ``sleeping`` before it
waits, and :attr:`Accumulator.wake_at` to when its timer fires (the linger
deadline of the oldest open batch). An append calls ``wake`` (a thread-safe
callback) only when it closes a full batch that its partition may send now,
or opens a batch whose linger deadline comes before ``wake_at`` -- never
for a batch opened behind an earlier one, so keyed records to 1,000
partitions, which open a batch almost per record, cost no wake-up each
(they did: a round per record, ~200 us at 1,000 partitions). Nor for a full
batch whose partition already has ``in_flight_cap`` batches in flight: the
sender could not send it now, and the answer to one of those requests starts
a round anyway (the sender goes round after every request it hears back
from), which sees it (a fast producer's partitions are at that cap at most
of their batch rollovers).

Imports: kpax.producer.{batch,batch_state,partitioner,fastpath,sequences,weights},
kpax.proto.records, the standard library.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Final

from kpax.producer.batch import ProducerBatch, RecordFuture
from kpax.producer.batch_state import BatchEvent, BatchState
from kpax.producer.fastpath import QueueBase, new_lock
from kpax.producer.partitioner import UniformStickyPartitioner, _StickyState
from kpax.producer.sequences import PartitionSequence
from kpax.producer.weights import (
    RECORD_FRAME_MAX,
    Column,
    Segment,
    fit,
    header_bytes,
    record_weight,
    varint_size,
)
from kpax.proto.records import Header

# (module names: read per batch, where an Enum class attribute costs ~100 ns)
_CLOSED = BatchState.CLOSED
_RETRY_WAIT = BatchState.RETRY_WAIT
_SEALED = BatchState.SEALED
_UNENCODABLE = BatchState.UNENCODABLE
_ON_CLOSE = BatchEvent.CLOSE


__all__ = [
    "FULL",
    "RECORD_FRAME_MAX",
    "Accumulator",
    "Column",
    "PartitionQueue",
    "Segment",
    "fit",
    "header_bytes",
    "record_weight",
    "varint_size",
]

#: ``append`` result when the buffer memory is exhausted.
FULL: Final = None

#: How long a caller opening batches may keep the I/O loop from running when
#: the sender has nothing due (s): the loop also reads the brokers' answers, and
#: a sync caller that never hands it the GIL leaves them unread for seconds
#: (1,000 partitions: requests answered in 7 s instead of 0.1 s).
YIELD_EVERY = 0.001

#: The memory a new batch reserves at first (or ``batch_size`` when smaller):
#: keyed records to many partitions keep many batches open with a few records
#: each, and a large ``batch_size`` reserved by each would fill
#: ``buffer_memory`` with nothing.
FIRST_CHUNK = 16384


class PartitionQueue(QueueBase):
    """One partition's open batch, ready batches (retries first) and sequence
    numbers (:attr:`sequence`, the only code that changes them)."""

    __slots__ = (
        "acked",
        "in_flight",
        "opened",
        "partition",
        "ready",
        "sequence",
        "serial",
        "topic",
    )

    def __init__(
        self, topic: str, partition: int, sequence: PartitionSequence | None = None
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.open: ProducerBatch | None = None
        self.ready: deque[ProducerBatch] = deque()
        #: Batches of this partition in flight, in send order.
        self.in_flight: list[ProducerBatch] = []
        #: The partition's idempotent sequence numbers (a new one, or the one it
        #: had when its queue was dropped: :attr:`Accumulator.saved_sequences`).
        self.sequence = sequence if sequence is not None else PartitionSequence(topic, partition)
        self.serial = 0
        #: When the partition's last batch was opened (time.monotonic()).
        self.opened = 0.0
        #: False until the partition acknowledged a batch (and again after a
        #: retriable failure): until then one batch at a time is in flight, so
        #: a batch that fails (e.g. NOT_LEADER on a partition still loading)
        #: cannot be overtaken by a later one the broker accepts.
        self.acked = False

    def requeue(self, batch: ProducerBatch) -> None:
        """Put a failed batch back for a retry, before newer batches, in creation order."""
        i = 0
        ready = self.ready
        while i < len(ready) and ready[i].state is _RETRY_WAIT and ready[i].serial < batch.serial:
            i += 1
        ready.insert(i, batch)


class Accumulator:
    """Per-partition batches; thread-safe (see the module docstring)."""

    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: int,
        buffer_memory: int,
        partitioner: object,
        wake: Callable[[], None],
        seal: Callable[[PartitionQueue, ProducerBatch], bool] | None = None,
        memory_freed: Callable[[], None] | None = None,
    ) -> None:
        self.lock = new_lock()  # C's when the C send path is built (it takes it too)
        self.batch_size = batch_size
        self.linger = linger_ms / 1000
        self.buffer_memory = buffer_memory
        self.partitioner = partitioner
        self._sticky = partitioner if isinstance(partitioner, UniformStickyPartitioner) else None
        self._sticky_states = self._sticky.sticky_states if self._sticky is not None else {}
        self.sticky_switches = 0
        self.wake = wake
        # a batch's records may reach _cap bytes (header: 61 bytes)
        self._cap = batch_size - 61
        # what a new batch reserves at first (it grows to batch_size as it fills)
        self._chunk = min(batch_size, FIRST_CHUNK)
        # bytes of the largest offset delta a batch can hold (a record is 7 bytes at least)
        self._off = varint_size(self._cap // 7 + 1)
        self.queues: dict[str, dict[int, PartitionQueue]] = {}
        #: (topic, partition) -> the sequence numbers of a partition whose
        #: queue was dropped (:meth:`forget_idle_topics`): an idempotent
        #: producer's sequences go on where they stopped when it sends there
        #: again (the new queue takes this object over).
        self.saved_sequences: dict[tuple[str, int], PartitionSequence] = {}
        self._all_queues: list[PartitionQueue] | None = None  # (all_queues)
        #: Batches not yet completed (open, ready or in flight), for flush.
        self.incomplete: set[ProducerBatch] = set()
        #: Batches that failed before they could be sent, to complete on the I/O loop.
        self.failed: list[ProducerBatch] = []
        self.reserved = 0
        self.sleeping = False
        #: Open batches in the order they were opened -- the order of their
        #: linger deadlines (``(queue, batch)``; an entry whose batch is no
        #: longer its queue's open one was closed full and is skipped):
        #: :meth:`drain_open` closes the lingered ones from its head.
        self.lingering: deque[tuple[PartitionQueue, ProducerBatch]] = deque()
        #: Whether a lingered batch stays open until the sender takes it (set
        #: by the sender: not for a transactional producer, whose batches
        #: close at their linger as they always did).
        self.keep_open = True
        #: Open batches whose linger is over, handed to the sender and still
        #: open (taking records) until it takes them, in that order (an entry
        #: whose batch is no longer open is skipped): a flush closes them.
        self.due_open: deque[tuple[PartitionQueue, ProducerBatch]] = deque()
        #: Queues with batches ready to send (insertion-ordered; the sender
        #: reads only these, and takes out a queue that has nothing to send or
        #: may send nothing more until one of its requests ends).
        self.ready_queues: dict[PartitionQueue, None] = {}
        #: When the sleeping sender runs on its own at the latest (its linger
        #: timer; set by :meth:`drain_open`; infinity: no timer): a batch
        #: opened with a later linger deadline needs no wake-up.
        self.wake_at = float("inf")
        self._yield_at = 0.0  # (sender_due)
        #: Batches a partition may have in flight (the sender's limit, set by the
        #: producer): at that many, the answer to one of them wakes the sender.
        self.in_flight_cap = 1 << 30
        self.flushing = 0
        self.closing = False
        self._memory = threading.Condition(threading.Lock())
        self._memory_waiters = 0
        #: ``seal(pq, batch) -> bool``: encode a closing batch (the producer's
        #: Sealer; it declines while the producer id is unknown or an epoch bump is due).
        self.seal = seal
        #: Called (on the I/O loop) when memory is released; the asyncio face hooks it.
        self.memory_freed = memory_freed

    # ------------------------------------------------------------ caller side

    def append(  # noqa: PLR0917 - the hot path: positional arguments are cheaper
        self,
        topic: str,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | None,
        num_partitions: int,
        weight: int,
    ) -> RecordFuture | None:
        """Append a record of ``weight`` (:func:`record_weight`); ``partition``
        -1 asks the sticky partitioner (under the lock). Returns the record's
        future, or :data:`FULL` when a new batch would exceed ``buffer_memory``.
        The hot path: keep it lean."""
        with self.lock:
            state = None
            if partition < 0:  # keyless: the topic's sticky partition
                state = self._sticky_states.get(topic)
                if state is None or not 0 <= state.partition < num_partitions:
                    state = self._new_sticky(topic, key, value, num_partitions)
                partition = state.partition
            switched = False
            closed = None  # the queue of a batch this call closed, if any
            while True:  # at most twice: once more after a sticky switch
                parts = self.queues.get(topic)
                pq = parts.get(partition) if parts is not None else None
                if pq is None:
                    pq = self._new_queue(topic, partition)
                batch = pq.open
                if batch is not None:
                    # the batch's part of the record: attributes, timestamp and offset deltas
                    delta = timestamp - batch.timestamps[0]
                    total = (
                        batch.size
                        + weight
                        + (2 if -64 <= delta < 64 else 1 + varint_size(delta))
                        + self._off
                    )
                    if total > batch.cap and total <= self._cap:
                        self._grow(batch, total)
                    if total <= batch.cap:
                        batch.size = total
                        values = batch.values
                        index = len(values)
                        values.append(value)
                        batch.keys.append(key)
                        batch.timestamps.append(timestamp)
                        if headers or batch.headers is not None:
                            self._add_headers(batch, index, headers)
                        return RecordFuture(batch, index, timestamp)
                    # full: close (encode) it here, in the caller's thread, hand it over
                    pq.open = None
                    self._close(pq, batch)
                    closed = pq
                # Keyless records fill one batch per sticky partition, then move on
                # (KIP-794's switch after batch_size bytes, without fractional batches).
                if state is None or switched or not state.produced:
                    break
                state.partition = -1
                state = self._new_sticky(topic, key, value, num_partitions)
                switched = True
                if state.partition != partition:
                    partition = state.partition
                    self.sticky_switches += 1
            batch = self._open_batch(pq, weight + RECORD_FRAME_MAX)
            if batch is None:
                return FULL
            batch.size = weight + 2 + self._off  # (timestamp delta 0: one byte)
            batch.values.append(value)
            batch.keys.append(key)
            batch.timestamps.append(timestamp)
            if headers:
                self._add_headers(batch, 0, headers)
            pq.open = batch
            self.lingering.append((pq, batch))
            self.incomplete.add(batch)
            if state is not None:
                state.produced = 1  # this sticky partition has its batch
            if closed is not None:
                batch.rolled = True
            if self.sleeping and self._wake_needed(batch, closed):
                self.sleeping = False
                self.wake()
            return RecordFuture(batch, 0, timestamp)

    def append_many(  # noqa: PLR0917 - one loop, kept together for speed
        self,
        topic: str,
        col: Column,
        timestamp: int,
        headers: Sequence[Header] | None,
        num_partitions: int,
        segments: list[Segment],
    ) -> bool:
        """Append the column's records from ``col.pos`` on, a slice per batch
        (``list.extend``, no per-record object), exactly as many ``append``
        calls would place them: a batch takes records while they fit in
        ``batch_size``, a full batch is closed (encoded) at once, keyless
        records (``col.partition`` -1) move to a new sticky partition after
        filling a batch. Each slice is added to ``segments``. The lock is taken
        per batch. Returns False when ``buffer_memory`` is full (``col.pos``
        says how far it got: call again once memory is released)."""
        values, keys, cum = col.values, col.keys, col.cum
        hi = len(values)
        i = col.pos
        cap = self._cap
        # per record, besides its weight in cum: the batch's part (attributes,
        # timestamp delta, offset delta), as in append
        first = 2 + self._off  # in a batch these records open: delta 0
        while i < hi:
            with self.lock:
                state = None
                partition = col.partition
                if partition < 0:
                    state = self._sticky_states.get(topic)
                    if state is None or not 0 <= state.partition < num_partitions:
                        state = self._new_sticky(topic, None, values[i], num_partitions)
                    partition = state.partition
                switched = False
                closed = None
                while True:  # as in append: at most one sticky switch per new batch
                    parts = self.queues.get(topic)
                    pq = parts.get(partition) if parts is not None else None
                    if pq is None:
                        pq = self._new_queue(topic, partition)
                    batch = pq.open
                    if batch is not None:
                        delta = timestamp - batch.timestamps[0]
                        per = 1 + varint_size(delta) + self._off
                        j = fit(cum, per, i, hi, batch.cap - batch.size)
                        if j < hi and batch.cap < cap:  # more memory: a bigger batch
                            # (as much as the rest needs, at least double, as a single
                            # append grows it: straight to batch_size, keyed calls to
                            # many partitions reserved 1 MB each and filled the buffer)
                            self._grow(batch, batch.size + cum[hi] - cum[i] + per * (hi - i))
                            j = fit(cum, per, i, hi, batch.cap - batch.size)
                        if j > i:
                            self._extend(batch, values, keys, timestamp, headers, i, j)
                            batch.size += cum[j] - cum[i] + per * (j - i)
                            segments.append((batch, len(batch.values) - (j - i), col, i, j))
                            i = j
                            if i == hi:
                                col.pos = i
                                return True
                        pq.open = None  # record i does not fit: the batch is full
                        self._close(pq, batch)
                        closed = pq
                    if state is None or switched or not state.produced:
                        break
                    state.partition = -1
                    state = self._new_sticky(topic, None, values[i], num_partitions)
                    switched = True
                    if state.partition != partition:
                        partition = state.partition
                        self.sticky_switches += 1
                j = max(fit(cum, first, i, hi, cap), i + 1)
                # (its memory for these records; RECORD_FRAME_MAX bounds a lone record's)
                size = max(
                    cum[j] - cum[i] + first * (j - i), cum[i + 1] - cum[i] + RECORD_FRAME_MAX
                )
                batch = self._open_batch(pq, size)
                if batch is None:
                    col.pos = i
                    return False
                self._extend(batch, values, keys, timestamp, headers, i, j)
                batch.size = cum[j] - cum[i] + first * (j - i)
                segments.append((batch, 0, col, i, j))
                i = j
                pq.open = batch
                self.lingering.append((pq, batch))
                self.incomplete.add(batch)
                if state is not None:
                    state.produced = 1
                if closed is not None:
                    batch.rolled = True
                if self.sleeping and self._wake_needed(batch, closed):
                    self.sleeping = False
                    self.wake()
        col.pos = i
        return True

    @staticmethod
    def _extend(  # noqa: PLR0917
        batch: ProducerBatch,
        values: list[bytes | None],
        keys: list[bytes | None] | None,
        timestamp: int,
        headers: Sequence[Header] | None,
        i: int,
        j: int,
    ) -> None:
        n = j - i
        index = len(batch.values)
        if i == 0 and j == len(values):
            batch.values.extend(values)
            batch.keys.extend(keys if keys is not None else repeat(None, n))
        else:
            batch.values.extend(values[i:j])
            batch.keys.extend(keys[i:j] if keys is not None else repeat(None, n))
        batch.timestamps.extend(repeat(timestamp, n))
        if headers or batch.headers is not None:
            if batch.headers is None:
                batch.headers = [None] * index
            batch.headers.extend(repeat(headers, n))

    def _wake_needed(self, batch: ProducerBatch, closed: PartitionQueue | None) -> bool:
        """Whether the sleeping sender must be woken for ``batch``, just opened
        (and for the batch just closed full on ``closed``, if any): when the
        closed batch's partition may send it now (below ``in_flight_cap``
        batches in flight; at the cap, the end of one of those requests starts
        the next round anyway), or when ``batch``'s linger deadline comes
        before the sender's next round (:attr:`wake_at`: its timer, armed for
        the earliest open batch, which a later batch never precedes). So
        opening batches on many partitions costs no wake-up each: librdkafka's
        rule. Lock held."""
        if closed is not None and len(closed.in_flight) < self.in_flight_cap:
            return True
        return batch.created + self.linger < self.wake_at

    def _open_batch(self, pq: PartitionQueue, size: int) -> ProducerBatch | None:
        """A new batch for ``pq`` starting with ``size`` estimated bytes, its
        memory reserved: ``size`` or the first chunk (:data:`FIRST_CHUNK`, at
        most ``batch_size``), whichever is more; it grows as records come
        (:meth:`_grow`). None when ``buffer_memory`` is full (the sender is
        woken to free some). Lock held."""
        need = max(size + 61, self._chunk)
        if self.reserved + need > self.buffer_memory and self.reserved > 0:
            if self.sleeping:
                self.sleeping = False
                self.wake()
            return None
        self.reserved += need
        pq.serial += 1
        pq.opened = now = time.monotonic()
        batch = ProducerBatch(pq.topic, pq.partition, now, need, pq.serial)
        batch.cap = min(need - 61, self._cap)
        return batch

    def _grow(self, batch: ProducerBatch, size: int) -> None:
        """Reserve more memory for an open batch so it holds ``size`` estimated
        bytes (at least double, at most ``batch_size``); left as it is when
        ``buffer_memory`` has not that much free (the batch is then full).
        Lock held."""
        need = min(max(batch.reserved * 2, size + 61), self.batch_size)
        extra = need - batch.reserved
        if extra <= 0 or self.reserved + extra > self.buffer_memory:
            return
        self.reserved += extra
        batch.reserved = need
        batch.cap = min(need - 61, self._cap)

    def _new_sticky(
        self, topic: str, key: bytes | None, value: bytes | None, num_partitions: int
    ) -> _StickyState:
        sticky = self._sticky
        assert sticky is not None
        sticky.partition(topic, key, value, num_partitions)
        return self._sticky_states[topic]

    def _close(self, pq: PartitionQueue, batch: ProducerBatch) -> None:
        """Close a batch (lock held): encode it with its sequence numbers now --
        sealing at close keeps a partition's ready batches in sequence order --
        unless it must wait behind batches that could not be sealed yet (then,
        or when the sealer declines, it is CLOSED: sealed when the sender takes
        it). One transition on the common path: OPEN --seal--> SEALED."""
        seal = self.seal
        if (
            seal is not None
            and (not pq.ready or pq.ready[-1].state is not _CLOSED)
            and seal(pq, batch)
        ):
            if batch.state is _UNENCODABLE:
                assert batch.seal_error is not None
                self.fail_later(batch, batch.seal_error)
                return  # in self.failed: the sender fails it (never sent)
            self.shrink(batch)
        else:
            batch.fire(_ON_CLOSE)
        pq.ready.append(batch)
        self.ready_queues[pq] = None

    def shrink(self, batch: ProducerBatch) -> None:
        """A batch was encoded: from now on it holds its bytes, not the
        ``batch_size`` reserved when it opened (many partitions mean many
        small batches: each would hold a whole ``batch_size`` of
        ``buffer_memory`` until it completes). Lock held."""
        data = batch.data
        if data is not None and batch.parts is None and len(data) < batch.reserved:
            self.reserved -= batch.reserved - len(data)
            batch.reserved = len(data)

    def requeue(self, pq: PartitionQueue, batch: ProducerBatch) -> None:
        """Put a batch back in ``pq`` for a retry (:meth:`PartitionQueue.requeue`)
        and ``pq`` among the queues with something to send. Lock held."""
        pq.requeue(batch)
        self.ready_queues[pq] = None

    def fail_later(self, batch: ProducerBatch, error: BaseException) -> None:
        """A batch that cannot be sent (it could not be encoded): the sender
        completes it with ``error`` on its loop, outside the lock. Lock held."""
        batch.seal_error = error
        self.failed.append(batch)
        if self.sleeping:
            self.sleeping = False
            self.wake()

    def take_failed(self) -> list[ProducerBatch]:
        """The batches given to :meth:`fail_later` since the last call."""
        with self.lock:
            out, self.failed = self.failed, []
        return out

    def _new_queue(self, topic: str, partition: int) -> PartitionQueue:
        parts = self.queues.get(topic)
        if parts is None:
            parts = self.queues[topic] = {}
        saved = self.saved_sequences.pop((topic, partition), None) if self.saved_sequences else None
        pq = parts[partition] = PartitionQueue(topic, partition, saved)
        self._all_queues = None
        return pq

    def forget_idle_topics(self, topics: Sequence[str], opened_before: float) -> list[str]:
        """Drop the per-topic state (partition queues, sticky partition) of each
        of ``topics`` with no batch buffered or in flight and none opened since
        ``opened_before``; return the topics dropped. Their sequence numbers are
        kept (:attr:`saved_sequences`)."""
        out: list[str] = []
        with self.lock:
            busy = {b.topic for b in self.incomplete}
            for topic in topics:
                if topic in busy:
                    continue
                parts = self.queues.get(topic)
                if parts is not None:
                    if any(pq.opened > opened_before for pq in parts.values()):
                        continue
                    del self.queues[topic]
                    for p, pq in parts.items():
                        if pq.sequence.next:
                            self.saved_sequences[(topic, p)] = pq.sequence
                    self._all_queues = None
                self._sticky_states.pop(topic, None)
                out.append(topic)
        return out

    @staticmethod
    def _add_headers(batch: ProducerBatch, index: int, headers: Sequence[Header] | None) -> None:
        if batch.headers is None:
            batch.headers = [None] * index
        batch.headers.append(headers)

    def sender_due(self, batch: ProducerBatch) -> bool:
        """Whether the I/O loop should run now, after an append opened
        ``batch``: the sender was woken (a batch to send), ``batch`` follows a
        full batch, its linger timer is due, or the loop has not run for
        :data:`YIELD_EVERY` (answers may be waiting in its sockets). The faces
        yield to the loop then -- not at every batch opened: keyed records to
        many partitions open one almost per record."""
        if batch.rolled or not self.sleeping:
            return True
        now = time.monotonic()
        if now >= self.wake_at or now >= self._yield_at:
            self._yield_at = now + YIELD_EVERY
            return True
        return False

    def wait_for_memory(self, timeout: float) -> bool:
        """Block until some memory is released (or ``timeout``); True if it was."""
        with self._memory:
            self._memory_waiters += 1
            try:
                return self._memory.wait(timeout)
            finally:
                self._memory_waiters -= 1

    # ------------------------------------------------------------ sender side (I/O loop)

    def release(self, batch: ProducerBatch) -> None:
        """A batch completed: forget it and release its memory."""
        with self.lock:
            self.incomplete.discard(batch)
            self.reserved -= batch.reserved
            batch.reserved = 0
        if self._memory_waiters:
            with self._memory:
                self._memory.notify_all()
        if self.memory_freed is not None:
            self.memory_freed()

    def drain_open(self, now: float) -> float | None:
        """Hand the sender the open batches whose linger expired (or all, when
        flushing or closing): each one's queue joins :attr:`ready_queues`,
        the batch itself stays open -- it takes records until the sender takes
        it (:meth:`take_open`), as the Java client's and librdkafka's do. Marks
        the sender as about to sleep, and returns the earliest linger deadline
        of the batches still lingering (None if there is none): the lingered
        batches are the head of :attr:`lingering`, so a round costs nothing
        per partition that has no batch due.

        (Closing a lingered batch here, when its partition or broker could
        not send it yet, left it at the few records it had: with keyed
        records to 1,000 partitions and 5 requests in flight, every request
        carried ~1,000 batches of one record each, which the broker appends
        one by one -- ~0.3 ms each -- so requests took seconds and the producer
        ~10,000 records/s.)"""
        deadline: float | None = None
        linger = self.linger
        with self.lock:
            self.sleeping = True
            force = self.flushing > 0 or self.closing
            fifo = self.lingering
            ready_queues = self.ready_queues
            due_open = self.due_open
            if force:
                for pq, b in due_open:
                    if pq.open is b:
                        pq.open = None
                        self._close(pq, b)
                due_open.clear()
            else:
                while due_open and due_open[0][0].open is not due_open[0][1]:
                    due_open.popleft()  # (taken since)
                if len(due_open) > 2 * len(ready_queues) + 64:
                    self.due_open = due_open = deque(e for e in due_open if e[0].open is e[1])
            while fifo:
                pq, b = fifo[0]
                if pq.open is not b:  # closed full (or aborted) since
                    fifo.popleft()
                    continue
                due = b.created + linger
                if not force and due > now:
                    deadline = due
                    break
                fifo.popleft()
                if force or not self.keep_open:  # (a flush: what was sent before it)
                    pq.open = None
                    self._close(pq, b)
                else:
                    ready_queues[pq] = None  # its open batch may go
                    due_open.append((pq, b))
            self.wake_at = deadline if deadline is not None else float("inf")
        return deadline

    def open_due(self, pq: PartitionQueue, now: float) -> ProducerBatch | None:
        """``pq``'s open batch if the sender may take it (its linger is over,
        or the producer is flushing or closing), else None. Read without the
        lock: :meth:`take_open` checks it is still open."""
        b = pq.open
        if b is None:
            return None
        if b.created + self.linger <= now:
            return b
        return None

    def take_open(self, pq: PartitionQueue, b: ProducerBatch) -> None:
        """The sender takes ``b`` to send it: closed if it is still ``pq``'s
        open batch, else (closed full meanwhile) taken off ``pq.ready``. Lock
        held. An open batch taken stays OPEN: the caller seals it (OPEN --seal-->
        SEALED) or fails it at once, under the lock."""
        if pq.open is b:
            pq.open = None
            return
        ready = pq.ready
        if ready and ready[0] is b:
            ready.popleft()
        else:
            ready.remove(b)

    def all_queues(self) -> list[PartitionQueue]:
        """Every partition queue (a list kept until a queue is added: the sender
        reads it every round; do not change it)."""
        queues = self._all_queues
        if queues is None:
            with self.lock:
                queues = self._all_queues = [
                    pq for parts in self.queues.values() for pq in parts.values()
                ]
        return queues

    def has_unsent(self) -> bool:
        with self.lock:
            return any(
                pq.open is not None or pq.ready
                for parts in self.queues.values()
                for pq in parts.values()
            )

    def abort_all(self) -> list[ProducerBatch]:
        """Take every batch not yet in flight out of the queues (for close/fatal errors)."""
        out: list[ProducerBatch] = []
        with self.lock:
            for parts in self.queues.values():
                for pq in parts.values():
                    if pq.open is not None:
                        out.append(pq.open)
                        pq.open = None
                    # Batches sealed (given sequence numbers) but never sent give
                    # their numbers back: the partition's next batch must not leave
                    # a gap (an aborted transaction that never reached the broker
                    # bumps no epoch, so sequences continue).
                    sealed = [b for b in pq.ready if b.state is not _CLOSED]
                    if (
                        sealed
                        and sealed[0].base_sequence >= 0
                        and all(b.state is _SEALED for b in sealed)
                    ):
                        pq.sequence.rewind_to(sealed[0].base_sequence)
                    out.extend(pq.ready)
                    pq.ready.clear()
            self.lingering.clear()
            self.due_open.clear()
            self.ready_queues.clear()
        return out
