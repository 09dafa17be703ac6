"""The sender: drains ready batches and produces them to partition leaders.

Role: the producer's I/O engine on the producer's loop. Each round hands
itself the lingered batches (:meth:`Accumulator.drain_open`; they stay open,
taking records, until taken), then takes at most one batch per partition
per request, groups them by leader and sends Produce requests -- up to
``max_in_flight_requests_per_connection`` per broker, pipelined on the
broker's one connection, when their batches are full enough to be worth it
(thin ones wait for the request in flight: :meth:`Sender._worth_pipelining`).
A round is a plain callback: it runs
when woken (a full batch, a batch whose linger ends before the timer, a
response, flush, close: one ``call_soon`` however many wake-ups come before
it) or when the timer of the next linger/retry deadline fires (kept while it
is still the earliest); the ``run()`` task only waits for ``stop()``. (Rounds
used to be a task awaiting an event, with a new timer each round: three loop
callbacks and a new future per round, at about one round per Produce request.)

A round's cost does not grow with partitions that have nothing to send: it
reads only the accumulator's lingering batches due and its queues with
batches ready; a queue that may send nothing more until one of its requests
ends (its in-flight limit) leaves those until that request ends, the scan
stops once every broker has ``max_in_flight`` requests out, and the delivery
deadlines are read across every queue only when the earliest of them has come
(:meth:`Sender._expire`). (Before, every round read every partition queue,
~100 ns each, and a round ran per batch opened: at 1,000 partitions with keyed
records, ~200 us per record.)

Outcomes -- completed, retried, split, renumbered -- are read per batch by
:class:`~kpax.producer.outcomes.BatchOutcomes`, the sender's base class.

``delivery_timeout_ms`` is kept to the letter: batches that outlive it --
waiting, waiting for a retry, or in flight (their request's late answer is
then ignored) -- fail with KafkaTimeoutError naming the partition when it
runs out (the sender wakes for it), and each Produce request's timeout is
capped by the delivery time its oldest batch has left (at least
``MIN_REQUEST_TIMEOUT``). A dead cluster ends in errors, never a hang.

Idempotence (on by default): a batch gets its partition's next sequence
numbers when it is sealed (``PartitionQueue.sequence``, kpax.producer.sequences:
the only code that changes them), and a retry resends the very same bytes, so the
broker drops duplicates. At most 5 batches per partition are in flight, and a
retried batch goes out only when no batch of its partition is in flight, so
retries never reorder a partition. When the broker lost the producer's
state (a sequence error on a partition's first unacknowledged batch), once
nothing is in flight the epoch is bumped
(:class:`~kpax.producer.idempotence.ProducerIdentity`) and every unsent batch is
re-sequenced from 0 with ``rewrite_producer_state`` (KIP-360). Limitation: a
batch whose previous attempt had an unknown outcome (connection cut after
sending) and that is re-sequenced by such a bump could be written twice; the
common cases (broker restart, connection cut, leader change) are retried with
the same epoch and sequence and are exactly-once.

Produce versions: v3 to v13. v13 names topics by id (KIP-516); the id comes
from the cluster metadata, and responses are mapped back by id. A request is
encoded by :mod:`kpax.proto.produce_wire` straight from the batches' bytes and
handed to the open connection with ``submit`` -- no task, no message objects;
its outcome arrives in :meth:`Sender._on_response` (only a request that must
wait for a connection goes through a task first).

Metrics (kpax.metrics): per request here (records per request), per
completed batch and per retry in :mod:`kpax.producer.outcomes`; never per record.

Imports: kpax.producer.{accumulator,batch,batch_state,idempotence,options,outcomes,sealer,
transactions},
kpax.cluster (cluster, request_path), kpax.metrics, kpax.broker, kpax.proto,
kpax.structs, the standard library.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import Coroutine
from typing import Any

from kpax.broker.connection import BrokerConnection, describe_broker
from kpax.cluster.cluster import Cluster
from kpax.cluster.request_path import RetryPolicy
from kpax.metrics import Metrics
from kpax.producer.accumulator import Accumulator, PartitionQueue
from kpax.producer.batch import ProducerBatch, delivery_error
from kpax.producer.batch_state import BatchEvent, BatchState
from kpax.producer.idempotence import ProducerIdentity
from kpax.producer.options import ProducerSettings
from kpax.producer.outcomes import BatchOutcomes
from kpax.producer.sealer import Sealer
from kpax.producer.transactions import TransactionManager
from kpax.proto.error_codes import UnknownTopicIdError
from kpax.proto.errors import KafkaConnectionError, KafkaError
from kpax.proto.messages import ProduceRequest
from kpax.proto.produce_wire import MAX_VERSION as PRODUCE_MAX_VERSION
from kpax.proto.produce_wire import decode_produce_response, encode_produce
from kpax.proto.records import rewrite_producer_state
from kpax.structs import TopicPartition

# (module names: read per batch, where an Enum class attribute costs ~100 ns)
_CLOSED = BatchState.CLOSED
_OPEN = BatchState.OPEN
_RETRY_WAIT = BatchState.RETRY_WAIT
_SEALED = BatchState.SEALED
_UNENCODABLE = BatchState.UNENCODABLE
_ON_SEND = BatchEvent.SEND


log = logging.getLogger("kpax.producer")

__all__ = ["Sender"]

#: The shortest timeout a Produce request gets when little delivery time is left (s).
MIN_REQUEST_TIMEOUT = 0.2

#: A Produce request goes to a broker that is still working on an earlier one of
#: this producer only if its batches hold at least this many bytes on average (or
#: half ``batch_size``, when that is less); thinner ones wait for that answer,
#: taking records meanwhile (see :meth:`Sender._worth_pipelining`).
PIPELINE_MIN_BATCH_BYTES = 16384


class Sender(BatchOutcomes):
    """See the module docstring. ``run()`` is the task; ``wake()`` nudges it."""

    def __init__(
        self,
        settings: ProducerSettings,
        cluster: Cluster,
        accumulator: Accumulator,
        identity: ProducerIdentity | None,
        metrics: Metrics | None = None,
        *,
        sealer: Sealer,
        txn: TransactionManager | None = None,
    ) -> None:
        self.cluster = cluster
        self.acc = accumulator
        # (a transaction's batches close at their linger, not when taken: kept
        # as they were, the transaction's ordering with offsets and markers untested otherwise)
        accumulator.keep_open = txn is None
        self.identity = identity
        #: Encodes closing batches (shared with the accumulator).
        self.sealer = sealer
        #: The transaction manager of a transactional producer.
        self.txn = txn
        self.acks = settings.acks
        self.request_timeout_ms = settings.request_timeout_ms
        self.delivery_timeout = settings.delivery_timeout_ms / 1000
        self.retries = settings.retries
        self.max_in_flight = settings.max_in_flight_requests_per_connection
        self.max_request_size = settings.max_request_size
        self.backoff_ms = (settings.retry_backoff_ms, settings.retry_backoff_max_ms)
        #: The clients' one retry policy (kpax.cluster.request_path): a batch's backoff.
        self.retry_policy = RetryPolicy(*self.backoff_ms)
        self.per_partition = (
            min(self.max_in_flight, 5) if identity is not None else self.max_in_flight
        )
        #: :data:`PIPELINE_MIN_BATCH_BYTES`, or half ``batch_size`` when that is less
        #: (a full batch is always worth it); tests of several requests in flight set 0.
        self.pipeline_min_batch_bytes = min(PIPELINE_MIN_BATCH_BYTES, settings.batch_size // 2)
        self._loop: asyncio.AbstractEventLoop | None = None
        #: A round is scheduled (``wake``) and has not started yet.
        self._round_due = False
        #: The linger/retry timer and the time it fires at.
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        #: What the sender waits for instead of running rounds: getting a
        #: producer id, an epoch bump (tasks), a backoff after an unexpected error.
        self._busy: asyncio.Task[None] | asyncio.TimerHandle | None = None
        #: ``run()`` waits for it; ``stop()`` resolves it.
        self._ended: asyncio.Future[None] | None = None
        self._broker_in_flight: dict[int, int] = {}
        self._connecting: dict[int, int] = {}  # requests waiting for a connection, per broker
        self._versions: dict[int, int] = {}
        self._id_bytes: dict[uuid.UUID, bytes] = {}  # topic id -> its 16 bytes
        self._tasks: set[asyncio.Task[None]] = set()
        self._refresh_task: asyncio.Task[None] | None = None
        #: Topics of batches waiting for a leader, for the next metadata refresh.
        self._refresh_topics: set[str] = set()
        self.in_flight = 0
        #: The earliest time a batch may run out of delivery time (``_expire``
        #: reads every queue then, and not before).
        self._expiry_at = 0.0
        self.stopped = False
        #: Batches put back for a retry so far (a metric; tests read it).
        self.retried_batches = 0
        #: Batches split because the broker refused them as too large (tests read it).
        self.split_batches = 0
        #: Per-batch counters (kpax.metrics; None: not counted). Per topic:
        #: [records sent, records failed, bytes sent].
        self.metrics = metrics
        if metrics is not None:
            self.m_sent = metrics.sensor("record-send")
            self.m_error = metrics.sensor("record-error")
            self.m_retry = metrics.sensor("record-retry")
            self.m_batch = metrics.sensor("batch-size")
            self.m_per_request = metrics.sensor("records-per-request")
            self.m_throttle = metrics.sensor("produce-throttle-time")
            self.m_queue = metrics.sensor("record-queue-time")
        self.topic_counts: dict[str, list[int]] = {}

    def wake(self) -> None:
        """Have a round run soon (on the loop; once however often it is called
        before that round starts)."""
        if not self._round_due:
            self._round_due = True
            if self._loop is not None and not self.stopped:
                self._loop.call_soon(self._run_round)

    def wake_pending(self) -> bool:
        """Whether a round is due to start (read from any thread: the round
        clears it before it looks at the queues)."""
        return self._round_due

    # ------------------------------------------------------------ main loop

    async def run(self) -> None:
        """The sender task: it starts the first round and waits for
        :meth:`stop`. Rounds are plain callbacks on the loop, run when woken
        (``wake``: an append, an answer, a flush) or at the next linger or
        retry time -- no coroutine step, event or new timer per round. An
        unexpected exception in a round is logged and fails the batches it
        concerns (every unsent batch, when that cannot be known): no record's
        future is ever left pending by a bug or a bad input."""
        loop = self._loop = asyncio.get_running_loop()
        self._ended = loop.create_future()
        self._round_due = True
        loop.call_soon(self._run_round)
        try:
            await self._ended
        finally:
            self._ended = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._busy is not None:
                self._busy.cancel()

    def _run_round(self) -> None:
        self._round_due = False
        if self.stopped or self._busy is not None:
            return  # (a round follows the end of what keeps it busy)
        try:
            self._round()
        except Exception as exc:
            self._round_failed(exc)
        except BaseException as exc:  # ends the sender (the producer fails what is left)
            self._end(exc)
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise  # (as a task would)

    def _round_failed(self, exc: Exception) -> None:
        log.exception("producer sender: unexpected error; failing unsent batches", exc_info=exc)
        err = KafkaError(f"the producer's sender failed: {exc!r}")
        err.__cause__ = exc
        self._fail_unsent(err)
        self._complete_failed()
        # no busy loop on a repeat: the next round after the backoff
        assert self._loop is not None
        self._busy = self._loop.call_later(self.backoff_ms[0] / 1000, self._resume)

    def _end(self, exc: BaseException) -> None:
        if self._ended is not None and not self._ended.done():
            self._ended.set_exception(exc)

    def _resume(self) -> None:
        """The backoff after an unexpected error is over: the next round."""
        self._busy = None
        self.wake()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` (getting a producer id, an epoch bump): rounds are
        skipped until it ends, then one runs."""
        task = asyncio.ensure_future(coro)
        self._busy = task
        task.add_done_callback(self._spawned_done)

    def _spawned_done(self, task: asyncio.Task[None]) -> None:
        if self._busy is task:
            self._busy = None
        if task.cancelled():
            return  # stopping
        exc = task.exception()
        if exc is None:
            self.wake()
        elif isinstance(exc, Exception):
            self._round_failed(exc)
        else:
            self._end(exc)

    def _complete_failed(self) -> None:
        for b in self.acc.take_failed():
            assert b.state is _UNENCODABLE and b.seal_error is not None
            self.complete(b, -1, -1, b.seal_error)

    def _round(self) -> None:
        """One round: close lingered batches, send what may go, and arm the timer
        for the next linger or retry time."""
        now = time.monotonic()
        deadline = self.acc.drain_open(now)
        identity = self.identity
        if self.acc.failed:
            self._complete_failed()
        if identity is not None and self.txn is None:
            if not identity.ready and self.acc.incomplete:
                self._spawn(self._init_identity())
                return
            if identity.bump_needed and self.in_flight == 0:
                self._spawn(self._bump())
                return
        retry_at = self._send_ready(now)
        if self.acc.failed:
            self._complete_failed()
        if retry_at is not None and (deadline is None or retry_at < deadline):
            deadline = retry_at
        if deadline is None or self._round_due:
            return  # (woken meanwhile: the round already due runs after other callbacks)
        timer = self._timer
        if timer is not None:
            if self._timer_at <= deadline:
                return  # it fires first; the round it starts arms the next one
            timer.cancel()
        assert self._loop is not None
        self._timer_at = deadline
        self._timer = self._loop.call_later(max(deadline - now, 0.0), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.wake()

    async def _init_identity(self) -> None:
        assert self.identity is not None
        try:
            await self.identity.ensure(self.delivery_timeout)
        except KafkaError as exc:
            log.warning("cannot get a producer id: %s", exc)
            self._fail_unsent(exc)
            await asyncio.sleep(self.backoff_ms[0] / 1000)

    async def _bump(self) -> None:
        assert self.identity is not None
        try:
            await self.identity.bump(self.delivery_timeout)
        except KafkaError as exc:
            log.warning("cannot bump the producer epoch: %s", exc)
            self._fail_unsent(exc)
            self.identity.bump_needed = False
            return
        pid, epoch = self.identity.producer_id, self.identity.producer_epoch
        queues = self.acc.all_queues()
        with self.acc.lock:  # no batch may be sealed while sequences restart
            self.acc.saved_sequences.clear()  # (a new epoch: every partition from 0)
            for pq in queues:
                sequence = pq.sequence
                sequence.reset()
                for b in pq.ready:  # (the sealed ones come first, in sequence order)
                    if b.state is not _CLOSED:
                        assert b.data is not None
                        seq = sequence.assign(b.count)
                        b.data = rewrite_producer_state(b.data, pid, epoch, seq)
                        b.producer_id, b.producer_epoch, b.base_sequence = pid, epoch, seq
                        b.maybe_written = False

    def _fail_unsent(self, exc: KafkaError) -> None:
        for b in self.acc.abort_all():
            self.complete(b, -1, -1, exc)

    # ------------------------------------------------------------ draining

    def _send_ready(self, now: float) -> float | None:
        """Send what may be sent now; return the earliest retry time of a
        waiting batch (or delivery deadline, :meth:`_expire`).

        Only the queues with batches ready are read (the accumulator's
        ``ready_queues``); a queue that may send nothing more until one of its
        requests ends (at most ``per_partition`` in flight, one until the
        partition acknowledged, a retry alone) leaves them until that request
        ends (:meth:`_request_done`), and the scan stops once every broker has
        ``max_in_flight`` requests out: a round costs nothing per partition
        that has nothing it may send."""
        retry_at = self._expire(now)
        snapshot = self.cluster.snapshot
        acc = self.acc
        idempotent = self.identity is not None
        bumping = idempotent and self.identity.bump_needed  # type: ignore[union-attr]
        need_refresh: set[str] = set()
        brokers = len(snapshot.brokers)
        in_flight_of = self._broker_in_flight
        progress = True
        while progress:
            progress = False
            with acc.lock:
                queues = list(acc.ready_queues)
            if not queues or bumping:
                break
            taken: dict[int, list[tuple[PartitionQueue, ProducerBatch]]] = {}
            full: set[int] = set()
            idle: list[PartitionQueue] = []  # nothing ready, or must wait for a request
            for pq in queues:
                ready = pq.ready
                if ready:
                    b = ready[0]
                else:  # its open batch, once lingered: it takes records until taken
                    open_b = acc.open_due(pq, now)
                    if open_b is None:
                        idle.append(pq)
                        continue
                    b = open_b
                if b.retry_at > now:
                    if retry_at is None or b.retry_at < retry_at:
                        retry_at = b.retry_at
                    continue
                if pq.in_flight and (
                    len(pq.in_flight) >= self.per_partition
                    or (idempotent and b.state is _RETRY_WAIT)
                    or not pq.acked
                ):
                    idle.append(pq)  # back when one of its requests ends
                    continue
                if self.txn is not None and not self.txn.may_send(
                    TopicPartition(pq.topic, pq.partition)
                ):
                    failure = self.txn.blocking_error
                    if failure is not None:  # the transaction failed: so do its batches
                        with acc.lock:
                            acc.take_open(pq, b)
                        self.complete(b, -1, -1, failure)
                        progress = True
                    continue  # added to the transaction first; the manager wakes us
                info = snapshot.topics.get(pq.topic)
                p = info.partitions.get(pq.partition) if info is not None else None
                leader = p.leader if p is not None else -1
                if leader < 0 or leader not in snapshot.brokers:
                    need_refresh.add(pq.topic)
                    continue
                busy = in_flight_of.get(leader, 0)
                if busy >= self.max_in_flight or (busy and leader not in self._versions):
                    # (one request only while the Produce version is being negotiated:
                    # requests launched together could otherwise reach the wire in any
                    # order after that wait -- a later sequence before an earlier one)
                    full.add(leader)
                    if len(full) >= brokers:
                        break  # every broker is busy: the next answer starts a round
                    continue
                group = taken.get(leader)
                if group is None:
                    group = taken[leader] = []
                group.append((pq, b))
            if idle:
                with acc.lock:
                    ready_queues = acc.ready_queues
                    for pq in idle:
                        if pq.in_flight or not (pq.ready or acc.open_due(pq, now)):
                            ready_queues.pop(pq, None)
            for leader, group in taken.items():
                if in_flight_of.get(leader, 0) and not self._worth_pipelining(group):
                    continue  # its queues stay ready: the answer starts a round
                size = 0
                batch_list: list[tuple[PartitionQueue, ProducerBatch]] = []
                for pq, b in group:
                    if not self._take(pq, b):
                        continue  # could not be encoded: failed, never sent
                    assert b.data is not None
                    if batch_list and size + len(b.data) > self.max_request_size:
                        with acc.lock:
                            pq.ready.appendleft(b)  # next request
                            acc.ready_queues[pq] = None
                        continue
                    size += len(b.data)
                    batch_list.append((pq, b))
                    pq.in_flight.append(b)
                    b.fire(_ON_SEND)
                if batch_list:
                    self._launch(leader, batch_list)
                progress = True
        if need_refresh:
            self.refresh_metadata(need_refresh)
        return retry_at

    def _worth_pipelining(self, group: list[tuple[PartitionQueue, ProducerBatch]]) -> bool:
        """May ``group`` go to its leader while an earlier request is still there?

        A broker works on one request of a connection at a time, and each
        partition of a Produce request costs it a fixed amount (its log's lock,
        append, index, the answer) whatever the records. A request whose batches
        are thin -- keyed records to many partitions: a few records each -- costs
        the broker about as much as a full one, so pipelining them multiplies
        that cost: at 1,000 partitions five such requests in flight made every
        request carry ~2 records per partition (and one in flight instead
        nearly doubled the producer's rate in an ad hoc run). Held instead, the
        batches keep taking records until the earlier request is answered, and
        go in one request (as franz-go, which keeps one request in flight per
        broker, does always). Full batches -- one partition's fast stream, large
        records -- are pipelined up to ``max_in_flight_requests_per_connection``
        as before, where pipelining keeps the broker busy; and so is a group
        with a batch that can take no more records (full, flushed, a retry):
        waiting would not make it fuller (the thin ones go with it, so none
        waits behind a busy partition's stream)."""
        total = 0
        for _, b in group:
            if b.state is not _OPEN:
                return True
            total += b.size
        return total >= self.pipeline_min_batch_bytes * len(group)

    def _expire(self, now: float) -> float | None:
        """Fail the batches whose delivery time has passed: waiting at the head
        of their queue, or in flight (their request may never be answered:
        ``delivery_timeout_ms`` is kept to the letter, as Java's producer does;
        they stay in flight until their request ends, and its outcome is then
        ignored). Every queue is read only when the earliest such deadline has
        come (:attr:`_expiry_at`): a batch made later runs out later. Returns
        that deadline (None when nothing is buffered or in flight)."""
        at = self._expiry_at
        if now < at:
            return at
        acc = self.acc
        if not self.in_flight and not acc.incomplete:
            self._expiry_at = 0.0  # (every queue is read once batches come)
            return None
        limit = self.delivery_timeout
        ms = int(limit * 1000)
        nxt = now + limit  # no batch made from now on runs out earlier
        if acc.lingering:  # (its oldest open batch: no later than its head)
            nxt = min(nxt, acc.lingering[0][1].created + limit)
        for pq in acc.all_queues():
            for b in pq.in_flight:
                if b.done:
                    continue
                due = b.created + limit
                if due <= now:
                    self.complete(
                        b,
                        -1,
                        -1,
                        delivery_error(
                            b,
                            f"not acknowledged within delivery_timeout_ms={ms} (its Produce "
                            f"request to {self._leader_text(pq)} still unanswered)",
                        ),
                    )
                elif due < nxt:
                    nxt = due
            ready = pq.ready
            while True:
                # its waiting batches, then its open one (it stays open, taking
                # records, until the sender can take it)
                head = ready[0] if ready else pq.open
                if head is None:
                    break
                b = head
                due = b.created + limit
                if due > now:
                    nxt = min(nxt, due)
                    break
                with acc.lock:
                    acc.take_open(pq, b)
                self.complete(
                    b,
                    -1,
                    -1,
                    delivery_error(
                        b,
                        f"not delivered within delivery_timeout_ms={ms}"
                        if b.state is _RETRY_WAIT
                        else f"expired before they could be sent (delivery_timeout_ms={ms})",
                    ),
                )
        self._expiry_at = nxt
        return nxt

    def _leader_text(self, pq: PartitionQueue) -> str:
        """``broker 1 (host:port)``: the leader of ``pq`` as the metadata has it."""
        snapshot = self.cluster.snapshot
        info = snapshot.topics.get(pq.topic)
        p = info.partitions.get(pq.partition) if info is not None else None
        node = snapshot.brokers.get(p.leader) if p is not None else None
        if node is None:
            return "its leader"
        return describe_broker(node.node_id, f"{node.host}:{node.port}")

    def _take(self, pq: PartitionQueue, b: ProducerBatch) -> bool:
        """Take the head batch off its queue, sealing it if it was closed before
        it could be (atomically: no batch closed meanwhile may get an earlier
        sequence). False if it could not be encoded (it is then failed)."""
        b.resequenced = False  # (this attempt carries its current numbers)
        with self.acc.lock:
            self.acc.take_open(pq, b)
            if b.state is _OPEN or b.state is _CLOSED:  # (taken open, or closed unsealed)
                if not self.sealer.seal(pq, b):
                    raise AssertionError("sealing a batch without a producer id")
                self.acc.shrink(b)
            if b.state is _UNENCODABLE:
                assert b.seal_error is not None
                self.acc.fail_later(b, b.seal_error)
                return False
        if self.metrics is not None and b.state is _SEALED:
            self.m_queue.record((time.monotonic() - b.created) * 1000.0)
        return True

    def _launch(self, leader: int, batches: list[tuple[PartitionQueue, ProducerBatch]]) -> None:
        """Send one Produce request to ``leader``: at once, without a task, when
        its connection is open and the Produce version known (the common
        case); else from a task that connects first."""
        self._broker_in_flight[leader] = self._broker_in_flight.get(leader, 0) + 1
        self.in_flight += 1
        if self.metrics is not None:
            self.m_per_request.record(sum(b.count for _, b in batches))
        broker = self.cluster.broker(leader)
        conn = broker.open_connection
        version = self._versions.get(leader)
        if conn is not None and version is not None and not self._connecting.get(leader):
            self._submit(leader, conn, version, batches)
            return
        # (while one request waits for the connection, later ones to that broker
        # wait behind it: requests must reach the wire in the order they were made)
        self._connecting[leader] = self._connecting.get(leader, 0) + 1
        task = asyncio.ensure_future(self._connect_and_submit(leader, batches))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _connect_and_submit(
        self, leader: int, batches: list[tuple[PartitionQueue, ProducerBatch]]
    ) -> None:
        try:
            try:
                broker = self.cluster.broker(leader)
                conn = await broker.connection()
                version = self._versions.get(leader)
                if version is None:
                    version = self._versions[leader] = conn.pick_version(
                        ProduceRequest, PRODUCE_MAX_VERSION
                    )
            except asyncio.CancelledError:
                cancelling = getattr(asyncio.current_task(), "cancelling", None)  # 3.11+
                if self.stopped or (cancelling is not None and cancelling()):
                    self._request_failed(leader, batches, KafkaError("the producer stopped"))
                    raise
                # Not this task: the broker handle was closed while it connected (a
                # rebootstrap or a moved node drops it); the batches go out again.
                self._request_failed(leader, batches, self._handle_closed(leader))
                return
            except BaseException as exc:
                self._request_failed(leader, batches, exc)
                return
            self._submit(leader, conn, version, batches)
        finally:
            self._connecting[leader] -= 1

    def _submit(
        self,
        leader: int,
        conn: BrokerConnection,
        version: int,
        batches: list[tuple[PartitionQueue, ProducerBatch]],
    ) -> None:
        """Queue the request on ``conn``; :meth:`_on_response` takes its outcome."""
        ids: dict[bytes, str] = {}
        try:
            topics: dict[str, list[tuple[int, bytes | None]]] = {}
            oldest = batches[0][1].created
            for pq, b in batches:
                oldest = min(oldest, b.created)
                parts = topics.get(pq.topic)
                if parts is None:
                    parts = topics[pq.topic] = []
                parts.append((pq.partition, b.data))
            keyed: list[tuple[str | uuid.UUID, list[tuple[int, bytes | None]]]] = []
            if version >= 13:
                for name, parts in topics.items():
                    info = self.cluster.snapshot.topics.get(name)
                    if info is None or info.topic_id is None:
                        raise UnknownTopicIdError(f"no topic id known for {name!r}")
                    tid = info.topic_id
                    raw = self._id_bytes.get(tid)
                    if raw is None:  # (UUID.bytes is computed on each call)
                        raw = self._id_bytes[tid] = tid.bytes
                    ids[raw] = name
                    keyed.append((tid, parts))
            else:
                keyed.extend(topics.items())
            txn_id = self.txn.transactional_id if self.txn else None
            # No request outlives the delivery time left to its oldest batch.
            left = oldest + self.delivery_timeout - time.monotonic()
            timeout = max(min(self.request_timeout_ms / 1000, left), MIN_REQUEST_TIMEOUT)
            acks, timeout_ms, client_id = self.acks, int(timeout * 1000), conn.options.client_id

            def encode(correlation_id: int) -> bytes:
                return encode_produce(
                    version, correlation_id, client_id, txn_id, acks, timeout_ms, keyed
                )

            fut = conn.submit(
                None,
                request_cls=ProduceRequest,
                version=version,
                timeout=timeout,
                encode=encode,
                decode=functools.partial(decode_produce_response, version=version),
                expect_response=acks != 0,
            )
        except BaseException as exc:
            self._request_failed(leader, batches, exc)
            return
        fut.add_done_callback(functools.partial(self._on_response, leader, batches, ids, conn))

    def _on_response(
        self,
        leader: int,
        batches: list[tuple[PartitionQueue, ProducerBatch]],
        ids: dict[bytes, str],
        conn: BrokerConnection,
        fut: asyncio.Future[Any],
    ) -> None:
        if fut.cancelled():
            stopped = KafkaError("the producer stopped")
            self._request_failed(
                leader, batches, stopped if self.stopped else self._handle_closed(leader)
            )
            return
        exc = fut.exception()
        if exc is not None:
            self._request_failed(leader, batches, exc)
            return
        try:
            if self.acks == 0:
                for pq, b in batches:
                    self._finish(pq, b, -1, -1, None)
                return
            throttle_ms, results = fut.result()
            if self.metrics is not None:
                self.m_throttle.record(throttle_ms)
            self._handle_response(results, batches, ids, conn)
        except Exception as exc:  # a bug must not leave these futures pending
            log.exception("producer: handling a Produce response from broker %d", leader)
            err = KafkaError(f"handling the Produce response of broker {leader}: {exc!r}")
            for pq, b in batches:
                if not b.done:
                    self._finish(pq, b, -1, -1, err)
        finally:
            self._request_done(leader, batches)

    @staticmethod
    def _handle_closed(leader: int) -> KafkaError:
        return KafkaConnectionError(
            f"the connection to broker {leader} was closed by the client (its address "
            "changed in the metadata)"
        )

    def _request_failed(
        self, leader: int, batches: list[tuple[PartitionQueue, ProducerBatch]], exc: BaseException
    ) -> None:
        """The request failed as a whole (no connection, broken connection,
        timeout, unsupported version, a bug): retry what may be retried."""
        try:
            if isinstance(exc, KafkaError):
                for pq, b in batches:
                    self._failed(pq, b, exc, unknown=True, describe=f"broker {leader}")
                self.refresh_metadata()
            else:
                err = KafkaError(f"producing to broker {leader} failed: {exc!r}")
                err.__cause__ = exc
                for pq, b in batches:
                    self._finish(pq, b, -1, -1, err)
        finally:
            self._request_done(leader, batches)

    def _request_done(
        self, leader: int, batches: list[tuple[PartitionQueue, ProducerBatch]]
    ) -> None:
        """A request ended: its partitions may send again (back among the
        queues the rounds read), and a round runs."""
        self._broker_in_flight[leader] -= 1
        self.in_flight -= 1
        acc = self.acc
        with acc.lock:
            for pq, _ in batches:
                if pq.ready or pq.open is not None:  # (an open one not due leaves again)
                    acc.ready_queues[pq] = None
        self.wake()

    # ------------------------------------------------------------ metadata

    def refresh_metadata(self, topics: set[str] | None = None) -> None:
        """Refresh the metadata soon (after ``retry_backoff_ms``), asking for
        ``topics`` too: the topics of batches waiting for a leader, which the
        producer may have forgotten meanwhile (``metadata_max_idle_ms``)."""
        if topics:
            self._refresh_topics.update(topics)
        if self._refresh_task is not None and not self._refresh_task.done():
            return
        self._refresh_task = asyncio.ensure_future(self._refresh())

    async def _refresh(self) -> None:
        await asyncio.sleep(self.backoff_ms[0] / 1000)
        topics, self._refresh_topics = self._refresh_topics, set()
        try:
            await self.cluster.refresh(topics)
        except KafkaError as exc:
            log.debug("metadata refresh failed: %s", exc)
        except asyncio.CancelledError:
            raise
        self.wake()

    async def stop(self) -> None:
        self.stopped = True
        if self._ended is not None and not self._ended.done():
            self._ended.set_result(None)
        for t in [*self._tasks, self._refresh_task]:
            if t is not None and not t.done():
                t.cancel()
