"""A Produce request's outcome, per batch: completed, retried, split, renumbered.

Role: the sender's half that reads what a broker answered for each batch
(:class:`BatchOutcomes`, a base of :class:`~kpax.producer.sender.Sender`; the
sender's other half drains, sends and times). A success completes the
batch's futures with the base offset; a retriable error (leader moved,
broken connection, request timeout, ...) puts the batch back in its
partition's queue ahead of newer ones, after ``retry_backoff_ms``
(exponential up to ``retry_backoff_max_ms``), until ``retries`` or
``delivery_timeout_ms`` run out; anything else fails the batch. A batch
refused as too large (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE) with several
records is split in two and its parts resent first
(:mod:`kpax.producer.split`); a single record too large fails with an error
naming its size and the limits.

Idempotence: OUT_OF_ORDER_SEQUENCE_NUMBER / UNKNOWN_PRODUCER_ID /
INVALID_PRODUCER_EPOCH on a batch with an earlier batch still
unacknowledged is a consequence of that earlier failure: the batch is simply
retried. On the first unacknowledged batch it means the broker lost the
producer's state: an epoch bump is asked for (the sender does it once nothing
is in flight). A batch the broker refuses for good without writing it
(INVALID_TIMESTAMP, INVALID_RECORD, a record too large...) fails alone and
gives its sequence numbers back (:meth:`BatchOutcomes._give_back`).

Metrics (kpax.metrics): counted once per completed batch in
:meth:`BatchOutcomes.complete` (records sent or failed, batch bytes, per
topic) and per retry; never per record.

Imports: kpax.producer.{accumulator,batch,batch_state,idempotence,sealer,sequences,split,
transactions},
kpax.cluster (cluster, request_path), kpax.broker, kpax.metrics, kpax.proto, the standard library.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from kpax.broker.connection import BrokerConnection
from kpax.cluster.cluster import Cluster
from kpax.cluster.request_path import RetryPolicy
from kpax.producer.accumulator import Accumulator, PartitionQueue
from kpax.producer.batch import ProducerBatch, delivery_error
from kpax.producer.batch_state import BatchEvent, BatchState
from kpax.producer.idempotence import ProducerIdentity
from kpax.producer.sealer import Sealer
from kpax.producer.sequences import seq_add, seq_before
from kpax.producer.split import TOO_LARGE_ERRORS, split_batch, too_large_error
from kpax.producer.transactions import TransactionManager
from kpax.proto.error_codes import DuplicateSequenceNumberError, UnknownServerError
from kpax.proto.error_families import LEADER_OR_TOPIC_ERRORS, SEQUENCE_ERRORS
from kpax.proto.errors import KafkaError, error_for_code
from kpax.proto.produce_wire import PartitionResult
from kpax.proto.records import rewrite_producer_state

# (module names: read per batch, where an Enum class attribute costs ~100 ns)
_CLOSED = BatchState.CLOSED
_OPEN = BatchState.OPEN
_SPLIT = BatchState.SPLIT
_UNENCODABLE = BatchState.UNENCODABLE
_ON_RETRY = BatchEvent.RETRY


log = logging.getLogger("kpax.producer")

#: States of a batch with no bytes yet (not sealed).
_UNSEALED = frozenset({_OPEN, _CLOSED, _UNENCODABLE})

__all__ = ["BatchOutcomes"]


class BatchOutcomes:
    """See the module docstring: what the :class:`~kpax.producer.sender.Sender`
    does with each batch of an answered (or failed) request."""

    cluster: Cluster
    acc: Accumulator
    identity: ProducerIdentity | None
    sealer: Sealer
    txn: TransactionManager | None
    retries: int
    delivery_timeout: float
    retry_policy: RetryPolicy
    retried_batches: int
    split_batches: int
    stopped: bool
    metrics: Any
    m_sent: Any
    m_error: Any
    m_retry: Any
    m_batch: Any
    topic_counts: dict[str, list[int]]
    #: Refresh the metadata soon (the sender's).
    refresh_metadata: Callable[..., None]

    def _handle_response(
        self,
        results: list[PartitionResult],
        batches: list[tuple[PartitionQueue, ProducerBatch]],
        ids: dict[bytes, str],
        conn: BrokerConnection,
    ) -> None:
        by_partition: dict[tuple[str | bytes, int], PartitionResult] = {}
        for r in results:
            topic = r[0]
            if ids and isinstance(topic, bytes):
                topic = ids.get(topic, "")
            by_partition[(topic, r[1])] = r
        refresh = False
        for pq, b in batches:
            found = by_partition.get((pq.topic, pq.partition))
            if found is None:
                self._failed(
                    pq,
                    b,
                    UnknownServerError(
                        f"no response for {pq.topic}-{pq.partition} from {conn.describe()}"
                    ),
                    unknown=True,
                    describe=conn.describe(),
                )
                continue
            _, _, code, base_offset, log_append_time, message = found
            if code == 0:
                pq.acked = True
                self._written(pq, b)
                self._finish(pq, b, base_offset, log_append_time, None)
                continue
            error = error_for_code(code)
            if issubclass(error, DuplicateSequenceNumberError):
                self._written(pq, b)
                self._finish(pq, b, -1, -1, None)  # written before: a retry's duplicate
                continue
            err = error(
                f"producing {b.count} record(s) to {pq.topic}-{pq.partition} on {conn.describe()}",
                error_message=message,
            )
            if isinstance(err, TOO_LARGE_ERRORS) and not b.done:
                if b.count > 1 and self._split(pq, b, err):
                    continue
                if b.count == 1:
                    err = too_large_error(b, err, conn.describe())
            if isinstance(err, LEADER_OR_TOPIC_ERRORS):
                self.cluster.leader_is_down(pq.topic, pq.partition)
                refresh = True
            if self.identity is not None and isinstance(err, SEQUENCE_ERRORS):
                if self.txn is not None and not (b.resequenced or self._earlier_unacked(pq, b)):
                    # A transactional producer never bumps its own epoch: the batch
                    # fails, fencing is fatal and anything else aborts the transaction.
                    with contextlib.suppress(ValueError):
                        pq.in_flight.remove(b)
                    self.txn.batch_failed(err)
                    self.complete(b, -1, -1, self.txn.blocking_error or err)
                    continue
                self._sequence_error(pq, b, err)
                continue
            if (
                not err.retriable
                and self.identity is not None
                and not isinstance(err, UnknownServerError)  # (may have failed after the write)
            ):
                self._give_back(pq, b)
            self._failed(pq, b, err, unknown=False, describe=conn.describe())
        if refresh:
            self.refresh_metadata()

    def _written(self, pq: PartitionQueue, b: ProducerBatch) -> None:
        """The broker wrote ``b`` (or had: a duplicate): its sequence numbers,
        and every one before them, are acknowledged -- if it carries this
        producer's id and epoch (an answer from before an epoch bump is of
        numbers that no longer count)."""
        identity = self.identity
        if (
            identity is not None
            and b.base_sequence >= 0
            and b.producer_id == identity.producer_id
            and b.producer_epoch == identity.producer_epoch
        ):
            pq.sequence.ack(b.base_sequence, b.count)

    def _give_back(self, pq: PartitionQueue, b: ProducerBatch) -> None:
        """The broker refused ``b`` for good without writing it (INVALID_TIMESTAMP,
        INVALID_RECORD, a record too large, not authorized...): ``b`` fails, and
        its sequence numbers go back to the partition -- every later batch of
        ``pq`` in flight or waiting is renumbered ``b.count`` lower, and so is
        the next batch sealed -- as Java's producer does for a failed batch
        (``adjustSequencesDueToFailedBatch``), so the partition goes on with the
        same producer id and epoch instead of an epoch bump (which restarts
        every partition's sequences). The later batches in flight carry the old
        numbers: refused as out of order, they are resent with the new ones
        (``resequenced``). Not done -- the bump stays the way out -- for
        UNKNOWN_SERVER_ERROR (the broker may have failed after the write), nor
        when ``b`` may have been written by an earlier attempt (unknown outcome), was
        sealed under another epoch, a bump is due anyway, or a later batch in
        flight has expired (its outcome unknown)."""
        identity = self.identity
        assert identity is not None
        base, count = b.base_sequence, b.count
        pid, epoch = identity.producer_id, identity.producer_epoch
        if (
            b.done
            or b.maybe_written
            or base < 0
            or count <= 0
            or identity.bump_needed
            or b.producer_id != pid
            or b.producer_epoch != epoch
        ):
            return

        def later(o: ProducerBatch) -> bool:
            return (
                o is not b
                and o.state not in _UNSEALED
                and o.base_sequence >= 0
                and seq_before(base, o.base_sequence)
            )

        flying = [o for o in pq.in_flight if later(o)]
        if any(o.done or o.producer_epoch != epoch for o in flying):
            return
        with self.acc.lock:  # no batch may be sealed meanwhile
            pq.sequence.give_back(base, count)
            waiting = [o for o in pq.ready if later(o)]
            for o in (*flying, *waiting):
                seq = seq_add(o.base_sequence, -count)
                assert o.data is not None
                o.data = rewrite_producer_state(o.data, pid, epoch, seq)
                o.base_sequence = seq
            for o in flying:
                o.resequenced = True
        pq.acked = False  # one batch at a time until the partition answers again
        log.info(
            "%s-%d: a batch of %d record(s) failed unwritten; %d later batch(es) renumbered "
            "from sequence %d (no epoch bump)",
            pq.topic,
            pq.partition,
            count,
            len(flying) + len(waiting),
            base,
        )

    @staticmethod
    def _earlier_unacked(pq: PartitionQueue, b: ProducerBatch) -> bool:
        """Whether a batch of ``pq`` before ``b`` (in sequence) is unacknowledged
        (in flight, or back in the queue: retried or split): a sequence error on
        ``b`` is then that batch's consequence. ("Before" wraps as the numbers
        do: past 2**31 - 1 comes 0.)"""
        seq = b.base_sequence
        return any(o is not b and seq_before(o.base_sequence, seq) for o in pq.in_flight) or any(
            o.state is not _CLOSED and seq_before(o.base_sequence, seq) for o in pq.ready
        )

    def _split(self, pq: PartitionQueue, b: ProducerBatch, err: KafkaError) -> bool:
        """The broker refused ``b`` (several records) as too large: put two parts
        of it (kpax.producer.split) at the head of its queue, in order. Nothing
        of ``b`` was written, so its parts reuse its sequence range and the
        batches after it theirs (refused as out of order meanwhile, they are
        retried behind the parts). False if it cannot be split (then it fails)."""
        with contextlib.suppress(ValueError):
            pq.in_flight.remove(b)
        try:
            parts = split_batch(
                b,
                codec=self.sealer.codec,
                transactional=self.sealer.transactional,
                last_error=err,
            )
        except Exception:
            log.exception("producer: cannot split a batch for %s-%d", pq.topic, pq.partition)
            return False
        log.info(
            "%s-%d: a batch of %d record(s) (%d bytes) is too large for the broker; "
            "resending it as %d and %d record(s)",
            pq.topic,
            pq.partition,
            b.count,
            len(b.data or b""),
            parts[0].count,
            parts[1].count,
        )
        self.split_batches += 1
        pq.acked = False  # one batch at a time again until the partition answers
        with self.acc.lock:
            for part in reversed(parts):  # same serial: each goes before the one after it
                self.acc.requeue(pq, part)
        return True

    def _sequence_error(self, pq: PartitionQueue, b: ProducerBatch, err: KafkaError) -> None:
        with contextlib.suppress(ValueError):
            pq.in_flight.remove(b)
        if b.resequenced:
            # sent before an earlier batch gave its numbers back (_give_back): expected;
            # resent with its new numbers
            b.resequenced = False
            self._retry(pq, b, err, unknown=False, count=False)
            return
        earlier = self._earlier_unacked(pq, b)
        if not earlier:
            assert self.identity is not None
            log.warning("%s: resetting sequences with a new producer epoch", err.message)
            self.identity.bump_needed = True
        self._retry(pq, b, err, unknown=False, count=not earlier)

    # ------------------------------------------------------------ outcomes

    def _finish(
        self,
        pq: PartitionQueue,
        b: ProducerBatch,
        offset: int,
        log_append: int,
        err: BaseException | None,
    ) -> None:
        with contextlib.suppress(ValueError):
            pq.in_flight.remove(b)
        self.complete(b, offset, log_append, err)

    def complete(
        self, b: ProducerBatch, offset: int, log_append: int, err: BaseException | None
    ) -> None:
        """Complete ``b`` (once: a done batch is left as it is) and release its
        memory; a split batch completes once its last part has. Failing a split
        batch (a close that timed out) fails its unfinished parts with ``err``
        first: each record's outcome is its part's."""
        if err is not None and b.state is _SPLIT:
            assert b.parts is not None
            for _, part in b.parts:
                if not part.done:
                    self.complete(part, -1, -1, err)  # (the last one completes b)
        if self.metrics is not None and not b.done and b.state is not _SPLIT:
            self._count(b, err)  # a split batch is counted by its parts
        b.complete(offset, log_append, err)
        self.acc.release(b)
        if err is not None and self.txn is not None and isinstance(err, KafkaError):
            self.txn.batch_failed(err)
        parent = b.parent
        while parent is not None and parent.state is _SPLIT:
            assert parent.parts is not None
            if not all(p.done for _, p in parent.parts):
                break
            # every part of a split batch is done: so is it (records: their part's outcome)
            first = next((p.error for _, p in parent.parts if p.error is not None), None)
            parent.complete(-1, -1, first)
            self.acc.release(parent)
            parent = parent.parent

    def _count(self, b: ProducerBatch, err: BaseException | None) -> None:
        """Count a batch's outcome (once per batch: the per-record path is untouched)."""
        n = b.count or len(b.values)
        nbytes = len(b.data) if b.data is not None else 0
        counts = self.topic_counts.get(b.topic)
        if counts is None:
            counts = self.topic_counts[b.topic] = [0, 0, 0]
        if err is None:
            self.m_sent.record(n)
            self.m_batch.record(nbytes)
            counts[0] += n
            counts[2] += nbytes
        else:
            self.m_error.record(n)
            counts[1] += n

    def _failed(
        self, pq: PartitionQueue, b: ProducerBatch, err: KafkaError, *, unknown: bool, describe: str
    ) -> None:
        with contextlib.suppress(ValueError):
            pq.in_flight.remove(b)
        if not err.retriable or self.stopped:
            self.complete(b, -1, -1, err)
            return
        self._retry(pq, b, err, unknown=unknown)

    def _retry(
        self,
        pq: PartitionQueue,
        b: ProducerBatch,
        err: KafkaError,
        *,
        unknown: bool,
        count: bool = True,
    ) -> None:
        pq.acked = False  # one batch at a time again until the partition answers
        if b.done:  # expired in flight (delivery_timeout_ms): never retried
            return
        b.last_error = err
        if unknown:
            b.maybe_written = True
        if count:
            b.attempts += 1
        else:
            b.attempts = max(b.attempts, 1)
        if b.attempts > self.retries:
            self.complete(b, -1, -1, err)
            return
        delay = self.retry_policy.delay(b.attempts)
        now = time.monotonic()
        # (a retry due after the delivery time fails when that time comes, in the queue)
        if now - b.created >= self.delivery_timeout:
            self.complete(
                b,
                -1,
                -1,
                delivery_error(
                    b,
                    f"not delivered within delivery_timeout_ms={int(self.delivery_timeout * 1000)}",
                ),
            )
            return
        b.retry_at = now + delay
        b.fire(_ON_RETRY)
        self.retried_batches += 1
        if self.metrics is not None:
            self.m_retry.record(b.count)
        with self.acc.lock:
            self.acc.requeue(pq, b)
