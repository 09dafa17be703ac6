"""The asyncio producer (``kpax.aio.Producer``): the core both faces run.

Role: owns the producer's :class:`~kpax.cluster.Cluster` (one connection per
broker), :class:`~kpax.producer.accumulator.Accumulator` and
:class:`~kpax.producer.sender.Sender` task, and turns ``send`` calls into
appends: serialize key and value, find the topic's partition count (waiting
up to ``max_block_ms`` for metadata of a new topic), choose the partition
(explicit, murmur2 of the key as Java does, sticky for keyless records, or a
custom partitioner), and append. ``send`` appends at the call, on every path,
and returns an awaitable (:mod:`kpax.producer.sent`) of the record's
:class:`~kpax.producer.batch.RecordFuture`; ``await`` that for the
:class:`~kpax.structs.RecordMetadata`. A send that must wait (metadata,
memory) goes on in a task started at the call, the topic's later sends behind it.

The sync face (``kpax.Producer``, kpax.producer.sync) runs this object on a
:class:`~kpax.loop_thread.LoopThread` and calls its non-blocking public API
from its own thread: :meth:`AsyncProducer._try_append` (``send``),
:meth:`~AsyncProducer._plan_many` / :meth:`~AsyncProducer._try_fill`
(``send_many``) and :func:`kpax.producer.deferred.memory_full_error`; everything they
touch is thread-safe. Where the C send path is built (kpax.producer.fastpath),
the common record skips ``try_append``: :meth:`_new_appender` gives each face a
C appender doing the same in C, and everything else still goes through
``try_append``.

Lifecycle: a producer belongs to the event loop that started it (a call
from another loop is refused: kpax.event_loops); it is unusable in a child
of fork() (kpax.forks); at exit, one still open is closed if its loop still
runs, else the records it holds are counted in a loud report
(kpax.producer.exit_flush); one collected unclosed emits a ResourceWarning.

The per-record path (``send``, ``_try_append``) lives here; the rest is in one
module per job, which this class calls: kpax.producer.deferred (sends that
wait for metadata or memory), kpax.producer.bulk_sends (``send_many``),
kpax.producer.closing (``flush``, ``close``), kpax.producer.topic_counts
(partition counts, ``wait_topic``), kpax.producer.transaction_calls,
kpax.producer.java_metrics (``metrics``), kpax.producer.context_sends
(serializers that take a SerializationContext).

Imports: kpax.producer.*, kpax.cluster, kpax.config, kpax.metrics, kpax.broker.options, kpax.proto,
kpax.structs, kpax.forks, kpax.event_loops, kpax.user_callbacks, kpax.peer_methods.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import warnings
from collections.abc import Callable, Coroutine, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from kpax.cluster.cluster import Cluster
from kpax.config import given_options
from kpax.event_loops import DONE, Done
from kpax.forks import forked_error
from kpax.forks import track as track_fork
from kpax.metrics import ConnectionMetrics, Metrics, metrics_enabled, report_stats
from kpax.peer_methods import PRODUCER, PeerHints
from kpax.producer import bulk_sends, closing, context_sends, exit_flush, transaction_calls
from kpax.producer.accumulator import RECORD_FRAME_MAX, Accumulator, record_weight
from kpax.producer.batch import BulkFuture, Callback, RecordFuture, bad_callback
from kpax.producer.deferred import defer, memory_full_error, send_later
from kpax.producer.fastpath import in_callbacks, sendpath
from kpax.producer.idempotence import ProducerIdentity
from kpax.producer.java_metrics import producer_metrics
from kpax.producer.options import ProducerConfig, ProducerSettings, resolve_producer_config
from kpax.producer.partitioner import (
    DefaultPartitioner,
    _murmur2_unsigned,
    as_partitioner,
)
from kpax.producer.planning import (
    BulkPlan,
    PartitionNotInMetadata,
    Planner,
    check_headers,
    check_partition,
    check_timestamp,
    plan_many,
)
from kpax.producer.sealer import Sealer
from kpax.producer.sender import Sender
from kpax.producer.sent import Sent
from kpax.producer.serializers import (
    as_bytes,
    get_serializer,
    wants_context,
)
from kpax.producer.topic_counts import TopicCounts
from kpax.producer.transactions import (
    TransactionManager,
    TxnState,
)
from kpax.proto.error_codes import MessageTooLargeError
from kpax.proto.errors import (
    ClientClosedError,
    PurgedError,
)
from kpax.proto.topic_names import check_topic
from kpax.structs import ConsumerGroupMetadata, OffsetAndMetadata, RecordMetadata
from kpax.user_callbacks import call_user

if TYPE_CHECKING:
    from typing_extensions import Unpack  # (typing's from Python 3.11)

__all__ = ["AsyncProducer", "check_timestamp"]  # (check_timestamp: kpax.producer.planning)

log = logging.getLogger("kpax.producer")

T = TypeVar("T")

_BATCH_OVERHEAD = 61  # a v2 batch header
_MAX_TIMESTAMP = 2**63 - 1  # (the C send path's bound too: kpax.producer.planning)

#: Kafka's murmur2 of a bytes key (unsigned): C's when the C send path is built
#: (~0.1 us against ~2 us in Python for a short key; a new batch's keyed record
#: takes the Python path).
_c_murmur2: Callable[[bytes], int] = sendpath.murmur2 if sendpath is not None else _murmur2_unsigned


def _ctx_call(ser: Any) -> Any:
    """A serializer as a callable ``(obj, ctx)`` (None stays None)."""
    if ser is None or wants_context(ser):
        return ser
    return lambda obj, _ctx: ser(obj)


class AsyncProducer(PeerHints):
    """``async with kpax.aio.Producer("host:9092") as p: await p.send("t", b"v")``."""

    _peer_methods = PRODUCER

    _client_name = "kpax.aio.Producer"
    #: Set on a producer inherited through fork() (kpax.forks).
    _forked = False

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | Mapping[str, Any] | None = None,
        /,
        **config: Unpack[ProducerConfig],
    ) -> None:
        cfg = self.config = resolve_producer_config(given_options(bootstrap_servers, config))
        #: Counters behind :meth:`metrics` (None when switched off: kpax.metrics._ENABLED).
        self._metrics = Metrics() if metrics_enabled() else None
        self._conn_metrics = ConnectionMetrics(self._metrics) if self._metrics else None
        self.cluster = Cluster.from_config(cfg, self._conn_metrics)
        self.cluster.client_name = self._client_name
        self.cluster.on_unhealthy = cfg["error_callback"]
        #: The options, typed (read by the parts below instead of ``config``).
        settings = self.settings = ProducerSettings.from_config(cfg)
        custom = settings.partitioner
        self.partitioner: Any = (
            DefaultPartitioner(settings.batch_size) if custom is None else as_partitioner(custom)
        )
        self._default_partitioner = type(self.partitioner) is DefaultPartitioner
        self._key_ser = get_serializer(settings.key_serializer, "key_serializer")
        self._value_ser = get_serializer(settings.value_serializer, "value_serializer")
        #: Serializers that take the record's topic and headers (a
        #: SerializationContext: kpax.producer.serializers), as ``(key, value)``
        #: callables ``(obj, ctx)``; None when neither does. They run in
        #: kpax.producer.context_sends, which hand the plain path
        #: bytes: a producer without them pays nothing per record.
        self._ctx_sers: tuple[Any, Any] | None = None
        if wants_context(self._key_ser) or wants_context(self._value_ser):
            self._ctx_sers = (_ctx_call(self._key_ser), _ctx_call(self._value_ser))
            self._key_ser = self._value_ser = None
        self._max_record = min(settings.max_request_size, settings.buffer_memory) - _BATCH_OVERHEAD
        self._planner = Planner(
            value_serializer=self._value_ser,
            key_serializer=self._key_ser,
            custom_partitioner=None if self._default_partitioner else self.partitioner,
            max_record=self._max_record,
            max_request_size=settings.max_request_size,
            buffer_memory=settings.buffer_memory,
        )
        self._max_block = settings.max_block_ms / 1000
        self.identity = (
            ProducerIdentity(
                self.cluster,
                retry_backoff_ms=settings.retry_backoff_ms,
                retry_backoff_max_ms=settings.retry_backoff_max_ms,
            )
            if settings.enable_idempotence
            else None
        )
        # Every part gets what it calls at construction; the calls that need the
        # event loop (a wake-up, memory freed) check for it when they run.
        sealer = Sealer(
            self.identity,
            settings.compression_type,
            transactional=settings.transactional_id is not None,
        )
        self.accumulator = Accumulator(
            batch_size=settings.batch_size,
            linger_ms=settings.linger_ms,
            buffer_memory=settings.buffer_memory,
            partitioner=self.partitioner,
            wake=self._threadsafe_wake,
            seal=sealer.seal,
            memory_freed=self._memory_freed,
        )
        self.txn: TransactionManager | None = None
        if settings.transactional_id is not None:
            assert self.identity is not None
            self.txn = TransactionManager(
                self.cluster,
                self.identity,
                settings.transactional_id,
                transaction_timeout_ms=settings.transaction_timeout_ms,
                request_timeout_ms=settings.request_timeout_ms,
                retry_backoff_ms=settings.retry_backoff_ms,
                retry_backoff_max_ms=settings.retry_backoff_max_ms,
                wake_sender=self._wake_sender,
                on_new_epoch=partial(transaction_calls.restart_sequences, self.accumulator),
            )
        self.sender = Sender(
            settings,
            self.cluster,
            self.accumulator,
            self.identity,
            self._metrics,
            sealer=sealer,
            txn=self.txn,
        )
        # (at this many batches in flight on a partition, appends need not wake the sender)
        self.accumulator.in_flight_cap = self.sender.per_partition
        #: The topics' partition counts, and the sends waiting for a topic's metadata.
        self._topics = TopicCounts(
            self.cluster, self.accumulator, settings, lambda: self._started and not self.closed
        )
        #: topic -> partition count (read by caller threads without a lock).
        self.num_partitions = self._topics.counts
        self._waits = self._topics.waits
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake_scheduled = False  # a cross-thread wake-up is on its way (_threadsafe_wake)
        self._memory_event: asyncio.Event | None = None
        self.closed = False
        self._started = False
        #: The C send path's appenders (kpax.producer.fastpath), disabled at close.
        self._appenders: list[Any] = []
        #: topic -> the last of its sends that could not be buffered at the call
        #: and go on in a task (``_defer``); later sends to the topic wait behind it.
        self._deferred: dict[str, asyncio.Task[Any]] = {}
        self._starting: asyncio.Future[None] | None = None
        self._stats_task: asyncio.Future[None] | None = None
        if self._ctx_sers is not None:
            self.__dict__["_try_append"] = partial(context_sends.try_append_ctx, self)
            self.__dict__["_plan_many"] = partial(context_sends.plan_many_ctx, self)
        fast = self._aio_appender = self._new_appender(AsyncProducer.send.__get__(self))
        self._fast_append: Callable[..., RecordFuture | None] | None = (
            fast.try_append if fast is not None else None
        )
        if fast is not None:
            # This instance's ``send`` is the C appender's ``asend``: the common
            # record is appended at the call and a finished awaitable returned
            # (no Python frame per record); every other case goes to the Python
            # ``send`` below, same arguments.
            self.__dict__["send"] = fast.asend
        track_fork(self)

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> AsyncProducer:
        """Connect to the cluster and start the sender; ``async with`` and the first ``send`` call
        it. Returns the producer.
        """
        if self._started:
            return self
        if self._starting is not None:  # (sends deferred at once to two new topics)
            await asyncio.shield(self._starting)
            return self
        starting = self._starting = asyncio.get_running_loop().create_future()
        try:
            self._memory_event = asyncio.Event()
            self._loop = asyncio.get_running_loop()
            await self.cluster.start()
            self._task = asyncio.ensure_future(self.sender.run())
            self._task.add_done_callback(self._sender_ended)
            settings = self.settings
            if settings.stats_callback is not None and settings.statistics_interval_ms > 0:
                self._stats_task = asyncio.ensure_future(
                    report_stats(
                        self.metrics,
                        settings.stats_callback,
                        settings.statistics_interval_ms / 1000,
                        self._client_name,
                    )
                )
            self._started = True
            exit_flush.track(self)
        except Exception as exc:
            starting.set_exception(exc)
            starting.exception()  # (retrieved here: a waiter re-raises it)
            raise
        finally:
            self._starting = None
            if not starting.done():
                if self._started:
                    starting.set_result(None)
                else:
                    starting.cancel()  # (the start was cancelled)
        return self

    def _after_fork(self) -> None:
        """In a child of fork() (kpax.forks): closed for every path (a method bound
        before the fork included), the C send path off, the cluster unusable."""
        self.closed = True
        self._disable_appenders()
        self.cluster.unusable = forked_error(self, "a call")

    def _closed_error(self, what: str) -> ClientClosedError:
        if self._forked:
            return forked_error(self, what)
        return ClientClosedError(f"{what} on a closed producer")

    def __del__(self) -> None:
        if self.__dict__.get("_started") and not self.closed and not self._forked:
            try:  # (no lock taken in a finalizer)
                held = str(sum(b.count or len(b.values) for b in list(self.accumulator.incomplete)))
            except Exception:
                held = "the"
            warnings.warn(
                f"unclosed {self._client_name}: {held} record(s) it held were never sent; "
                "await producer.close() (or use `async with`) before its event loop ends",
                ResourceWarning,
                stacklevel=1,
                source=self,
            )

    def _new_appender(self, slow: Callable[..., Any] | None) -> Any:
        """A C appender for this producer's per-record path (``slow``: the Python
        ``send`` it hands other cases to), or None where the C path is not built
        or does not apply: serializers, a custom partitioner, transactions (those
        records take the Python path, with the same results)."""
        if (
            sendpath is None
            or self._key_ser is not None
            or self._value_ser is not None
            or self._ctx_sers is not None
            or not self._default_partitioner
            or self.txn is not None
        ):
            return None
        appender = sendpath.Appender(
            self.accumulator, self.num_partitions, RecordFuture, self._max_record, slow
        )
        appender.enabled = not self.closed
        self._appenders.append(appender)
        return appender

    def _disable_appenders(self) -> None:
        for a in self._appenders:
            a.enabled = False

    def _sender_ended(self, task: asyncio.Task[None]) -> None:
        """The sender task ended. Only ``close`` ends it normally; if anything
        else did, the producer fails closed: every pending record fails with
        the reason and later sends raise it (never a silent hang)."""
        if task.cancelled() or self.sender.stopped:
            return
        exc = task.exception()
        log.error("the producer's sender stopped unexpectedly: %r", exc)
        err = ClientClosedError(f"the producer's sender stopped unexpectedly: {exc!r}")
        err.__cause__ = exc
        err.outcome_unknown = True  # some may have been in flight
        self.closed = True
        self._disable_appenders()
        self.sender.stopped = True
        with self.accumulator.lock:
            left = list(self.accumulator.incomplete)
        for b in left:
            self.sender.complete(b, -1, -1, err)
        callback = self.settings.error_callback
        if callback is not None:
            call_user(callback, err, "error_callback", log)

    def _wake_sender(self) -> None:
        self.sender.wake()

    def _memory_freed(self) -> None:
        """Buffer memory was released (on the I/O loop): wake asyncio senders
        waiting for it (the sync face waits on the accumulator's condition)."""
        if self._memory_event is not None:
            self._memory_event.set()
        self._waits.memory_freed()

    def _threadsafe_wake(self) -> None:
        """Wake the sender from any thread (nothing to wake before start).

        From another thread, at most one wake-up is on its way to the loop at a
        time, and none is sent while the sender's wake event is set: either way
        a round of the sender starts after this call and sees what the caller
        appended before it (a write to the loop's self-pipe saved per batch)."""
        loop = self._loop
        if loop is None:
            return
        if self._in_loop():
            self.sender.wake()
            return
        if self._wake_scheduled or self.sender.wake_pending():
            return
        self._wake_scheduled = True
        try:
            loop.call_soon_threadsafe(self._scheduled_wake)
        except BaseException:
            self._wake_scheduled = False
            raise

    def _scheduled_wake(self) -> None:
        self._wake_scheduled = False
        self.sender.wake()

    def _in_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    async def __aenter__(self) -> AsyncProducer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered now -- and the sends made before that are
        still waiting to be buffered (a new topic's metadata, buffer memory) --
        and wait for the outcome (KafkaTimeoutError after ``timeout`` seconds)."""
        await closing.flush(self, timeout)

    async def close(self, timeout: float | None = None) -> None:
        """Send what is buffered (waiting at most ``timeout`` seconds; None: until
        each record is delivered or fails), then fail whatever is left with
        ClientClosedError and close the connections. ``timeout=0`` fails
        buffered records at once. On the event loop that started the producer
        only (IllegalStateError from another loop)."""
        await closing.close(self, timeout)

    def __len__(self) -> int:
        """The records buffered or in flight, not yet acknowledged
        (confluent-kafka's ``len(producer)``); 0 once everything sent has its
        outcome. Safe from any thread; a producer is true even when empty."""
        acc = self.accumulator
        with acc.lock:
            batches = list(acc.incomplete)
        return sum(b.count or len(b.values) for b in batches)

    def __bool__(self) -> bool:
        return True  # (``if producer:`` is not about its records: __len__)

    async def purge(self) -> int:
        """Drop every record buffered and not sent yet (confluent-kafka's
        ``purge()``): their futures and callbacks fail with PurgedError; records
        in flight keep their outcome. Returns how many were dropped. In a
        transaction, abort it instead (``abort_transaction`` drops them too)."""
        if self.closed:
            raise self._closed_error("purge()")
        before = len(self)
        self.sender._fail_unsent(
            PurgedError("the record was purged (producer.purge()) before it was sent")
        )
        return max(before - len(self), 0)

    async def list_topics(
        self, topic: str | None = None, *, timeout: float | None = None
    ) -> dict[str, list[int]]:
        """confluent-kafka's ``list_topics``: ``{topic: partition ids}`` of every
        topic of the cluster (internal ones left out), or of ``topic`` alone
        (waits for its metadata, at most ``max_block_ms``)."""
        if self.closed:
            raise self._closed_error("list_topics()")
        if not self._started:
            await self.start()
        limit = self._max_block if timeout is None else timeout
        return await self.cluster.list_topics(topic, limit)

    # ------------------------------------------------------------ metrics

    def metrics(self) -> dict[str, float]:
        """The Java producer's metrics that apply, as ``{name: value}`` (see
        docs/observability.md): client-wide names (``record-send-total``,
        ``request-latency-avg``, ``buffer-available-bytes``...) and per-topic
        variants tagged like Java's (``record-send-total{topic=orders}``).
        Counted per batch and per request; safe to call from any thread."""
        return producer_metrics(self.accumulator, self.sender, self._metrics, self._conn_metrics)

    # ------------------------------------------------------------ metadata

    async def wait_topic(self, topic: str, timeout: float | None = None) -> int:
        """The partition count of ``topic``, waiting up to ``timeout`` (default
        ``max_block_ms``) for its metadata; KafkaTimeoutError names the topic,
        InvalidTopicError a name Kafka would refuse (at once)."""
        return await self._topics.wait_topic(topic, timeout)

    async def partitions_for(self, topic: str) -> list[int]:
        """The partition ids of ``topic`` (waits for its metadata, at most ``max_block_ms``)."""
        await self.wait_topic(topic)
        return sorted(self.cluster.snapshot.topics[topic].partitions)

    # ------------------------------------------------------------ sending

    def _try_append(  # noqa: PLR0917 - the hot path: positional arguments are cheaper
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp: int | None,
        headers: Any,
        n: int,
    ) -> RecordFuture | None:
        """Serialize, partition and append (thread-safe, never blocks); None when
        buffer memory is full (wait for memory and call again, at most
        ``max_block_ms`` in all, then raise
        :func:`~kpax.producer.deferred.memory_full_error`). ``n``: the topic's
        partition count (``num_partitions[topic]`` or :meth:`wait_topic`)."""
        if self.closed:
            raise self._closed_error("send()")
        txn = self.txn
        if txn is not None and txn.state is not TxnState.IN_TRANSACTION:
            txn.check_send()
        ks, vs = self._key_ser, self._value_ser
        if ks is not None:
            key = ks(key)
        elif key is not None and type(key) is not bytes:
            key = as_bytes(key, "key")
        if vs is not None:
            value = vs(value)
        elif value is not None and type(value) is not bytes:
            value = as_bytes(value, "value")
        kl = 0 if key is None else len(key)
        vl = 0 if value is None else len(value)
        if headers or kl + vl >= 8000:
            headers = check_headers(headers) if headers else None
            weight = record_weight(key, value, headers)
        else:
            # record_weight's common case inline (the pure-Python hot path): a length
            # varint takes one byte under 64, two under 8192 (None and b"": one)
            headers = None
            weight = kl + vl + 3 + (kl >= 64) + (vl >= 64)
            weight += 1 + (weight >= 64 - RECORD_FRAME_MAX)
        if weight + RECORD_FRAME_MAX > self._max_record:
            raise MessageTooLargeError(
                f"a record of about {weight + RECORD_FRAME_MAX + 61} bytes for topic {topic!r} "
                "is larger than "
                f"max_request_size={self.config['max_request_size']} / "
                f"buffer_memory={self.config['buffer_memory']}"
            )
        if partition is None:
            if self._default_partitioner:
                if key is not None:
                    h = _c_murmur2(key) if type(key) is bytes else _murmur2_unsigned(key)
                    partition = (h & 0x7FFFFFFF) % n
                elif n == 1:
                    partition = 0
                else:
                    partition = -1  # sticky, chosen under the accumulator lock
            else:
                partition = self.partitioner.partition(topic, key, value, n)
                if not 0 <= partition < n:
                    raise ValueError(
                        f"partitioner returned partition {partition} for {topic!r} "
                        f"with {n} partitions"
                    )
        elif type(partition) is not int or not 0 <= partition < n:
            partition = check_partition(topic, partition, n)
        if timestamp is None:
            timestamp = time.time_ns() // 1_000_000
        elif type(timestamp) is not int or timestamp < 0 or timestamp > _MAX_TIMESTAMP:
            timestamp = check_timestamp(timestamp)
        return self.accumulator.append(topic, partition, timestamp, key, value, headers, n, weight)

    def _sender_due(self, fut: RecordFuture) -> bool:
        """Whether a send that opened a new batch (``fut.batch_index == 0``)
        should let the I/O loop run now: the sender was woken (a batch to
        send), the batch follows a full one, or the linger timer is due
        (:meth:`Accumulator.sender_due`). Keyed records to many partitions
        open a batch almost per record: yielding at each would cost a loop
        iteration (the sync face: a GIL hand-over) per record."""
        return self.accumulator.sender_due(fut._batch)

    def _plan_many(  # noqa: PLR0917 - the arguments of send_many
        self,
        topic: str,
        values: Sequence[Any],
        keys: Sequence[Any] | None,
        partition: int | None,
        timestamp: int | None,
        headers: Any,
        n: int,
    ) -> BulkPlan:
        """Serialize, check and partition a ``send_many`` (thread-safe, appends
        nothing; :func:`kpax.producer.planning._plan_many`); :meth:`_try_fill`
        appends the plan."""
        if self.closed:
            raise self._closed_error("send_many()")
        txn = self.txn
        if txn is not None and txn.state is not TxnState.IN_TRANSACTION:
            txn.check_send()
        return plan_many(
            topic,
            values,
            keys,
            partition,
            timestamp,
            headers,
            n,
            self._planner,
        )

    def _try_fill(self, plan: BulkPlan, n: int) -> bool:
        """Append the plan's records (thread-safe); False when buffer memory is full
        (call again: it resumes where it stopped)."""
        if self.closed:
            raise self._closed_error("send_many()")
        append = self.accumulator.append_many
        columns = plan.columns
        while plan.next < len(columns):
            if not append(
                plan.topic, columns[plan.next], plan.timestamp, plan.headers, n, plan.segments
            ):
                return False
            plan.next += 1
        return True

    def send_many(
        self,
        topic: str,
        values: Sequence[Any],
        keys: Sequence[Any] | None = None,
        *,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Any = None,
        callback: Callback | None = None,
    ) -> Coroutine[Any, Any, BulkFuture]:
        """Buffer many records at once, as ``send`` would one by one (same
        partitioning, batching, memory bound, transactions), without a Python
        object per record: ``values`` (and ``keys``, None or parallel) as
        sequences, one ``timestamp`` and one ``headers`` list for all.
        Buffered at the call, as ``send`` is; ``await`` the result for one
        :class:`~kpax.producer.batch.BulkFuture` (``await`` that for the count
        delivered). Waits (up to ``max_block_ms``) only for a new topic's
        metadata or for buffer memory, and then in a task started at the call
        (see :meth:`send`)."""
        return bulk_sends.send_many(
            self, topic, values, keys, partition, timestamp, headers, callback
        )

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        *,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Any = None,
        callback: Callback | None = None,
    ) -> Coroutine[Any, Any, RecordFuture]:
        """Buffer a record, at the call; ``await`` the result for the record's
        :class:`~kpax.producer.batch.RecordFuture` (``await`` that for its
        RecordMetadata): ``fut = await p.send(...)``.

        Every path (the C send path, this Python one, ``KPAX_PURE_PYTHON=1``)
        buffers the record before ``send`` returns, as the sync face does, so a
        forgotten ``await`` does not lose it; a send never awaited warns
        (RuntimeWarning: nothing sees its outcome), except one made in a
        delivery callback. Errors in the arguments (types, sizes, a non-callable
        ``callback``, a closed producer) raise at the call. A send that must
        wait -- for a new topic's metadata or for buffer memory, up to
        ``max_block_ms`` -- goes on in a task started at the call; awaiting the
        result waits for it, and the records of one topic are buffered in call
        order all the same (later sends to that topic wait behind it).
        Cancelling that await cancels the send. In a delivery callback, a send
        that would wait for buffer memory raises at once instead.

        What ``send`` returns is a coroutine to asyncio (``create_task``,
        ``gather``). Where the C send path is built, an instance's ``send`` is
        its C appender's ``asend``: it takes the common record itself and
        returns a finished ``_sendpath.Sent``; this method takes the rest."""
        if callback is not None and not callable(callback):
            raise bad_callback(callback)
        fast = self._fast_append
        fut: RecordFuture | None
        if fast is not None:
            fut = fast(topic, value, key, partition, timestamp, headers)
            if fut is not None:
                if callback is not None:
                    fut.add_callback(callback)
                return Sent(fut, False, not in_callbacks(), topic)
        if topic not in self._deferred:
            n = self.num_partitions.get(topic)
            fut = None
            if n is None:
                check_topic(topic)  # (at the call: a name Kafka would refuse never waits)
            else:
                try:
                    fut = self._try_append(topic, value, key, partition, timestamp, headers, n)
                except PartitionNotInMetadata:  # added since? (deferred: a refresh first)
                    n = None
            if n is not None:
                if fut is not None:
                    if callback is not None:
                        fut.add_callback(callback)
                    # A new batch: awaiting it lets the loop run once, so the
                    # sender sends the batch just closed while the caller fills
                    # the next one. A loop of sends that never yields would fill
                    # buffer_memory before anything went out.
                    return Sent(
                        fut,
                        fut.batch_index == 0 and self._sender_due(fut),
                        not in_callbacks(),
                        topic,
                    )
                if in_callbacks():
                    raise memory_full_error(self, topic, in_callback=True)
        elif in_callbacks() and topic in self.num_partitions:
            # behind earlier sends waiting for buffer memory: a callback may not wait
            raise memory_full_error(self, topic, in_callback=True)
        return defer(
            self,
            topic,
            "send",
            send_later,
            topic,
            value,
            key,
            partition,
            timestamp,
            headers,
            callback,
        )

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Register ``transactional_id`` with its coordinator: fences older producers
        with the same id and aborts their open transaction. Call once, first."""
        await transaction_calls.init(self, timeout)

    def begin_transaction(self) -> Done:
        """Start a transaction (sends are allowed only inside one). A plain method
        (no I/O: the broker learns of the transaction with its first send); the
        result may be awaited, as aiokafka's and confluent-kafka's asyncio
        producers are: ``await producer.begin_transaction()`` works.
        IllegalStateError without ``transactional_id``, before
        :meth:`init_transactions` or inside a transaction."""
        transaction_calls.manager(self, "begin a transaction").begin()
        return DONE

    def transaction(
        self, timeout: float | None = None
    ) -> contextlib.AbstractAsyncContextManager[AsyncProducer]:
        """``async with producer.transaction(): ...``: begin a transaction, commit it
        when the block ends, abort it when an exception leaves the block (the
        exception goes on). A commit that fails is followed by an abort (when the
        producer can still abort) and its error raised. ``timeout``: of the
        commit or abort (``max_block_ms`` when None)::

            await producer.init_transactions()
            async with producer.transaction():
                await producer.send("orders", b"v")
                await producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
        """
        return transaction_calls.transaction(self, timeout)

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[Any, int | OffsetAndMetadata],
        group_metadata: ConsumerGroupMetadata | str,
        timeout: float | None = None,
    ) -> None:
        """Commit a consumer group's offsets (the next offset to read, per
        partition) as part of the transaction: consume-transform-produce."""
        await transaction_calls.send_offsets(self, offsets, group_metadata, timeout)

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Send what is buffered, then commit: every record of the transaction
        becomes visible to read_committed consumers, or none does."""
        await transaction_calls.commit(self, timeout)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop unsent records (their futures fail), wait for those in flight, abort."""
        await transaction_calls.abort(self, timeout)

    async def send_and_wait(
        self, topic: str, value: Any = None, key: Any = None, **kw: Any
    ) -> RecordMetadata:
        """``send`` and wait for the record's metadata."""
        fut = await self.send(topic, value, key, **kw)
        return await fut
