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
(``send_many``) and :meth:`~AsyncProducer._memory_full_error`; everything they
touch is thread-safe. Where the C send path is built (kpax.producer.fastpath),
the common record skips ``try_append``: :meth:`_new_appender` gives each face a
C appender doing the same in C, and everything else still goes through
``try_append``.

Lifecycle: a producer belongs to the event loop that started it (a call
from another loop is refused: kpax.event_loops); it is unusable in a child
of fork() (kpax.forks); at exit, one still open is closed if its loop still
runs, else the records it holds are counted in a loud report
(kpax.producer.exit_flush); one collected unclosed emits a ResourceWarning.

Imports: kpax.producer.*, kpax.cluster, kpax.config, kpax.metrics, kpax.broker.options, kpax.proto,
kpax.structs, kpax.forks, kpax.event_loops, kpax.user_callbacks, kpax.peer_methods.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import warnings
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from kpax.cluster.cluster import Cluster
from kpax.config import given_options
from kpax.event_loops import DONE, Done, check_loop
from kpax.forks import forked_error
from kpax.forks import track as track_fork
from kpax.metrics import ConnectionMetrics, Metrics, metrics_enabled, report_stats, tagged
from kpax.peer_methods import PRODUCER, PeerHints
from kpax.producer import exit_flush
from kpax.producer.accumulator import RECORD_FRAME_MAX, Accumulator, record_weight
from kpax.producer.batch import BulkFuture, Callback, ProducerBatch, RecordFuture, bad_callback
from kpax.producer.fastpath import in_callbacks, sendpath
from kpax.producer.idempotence import ProducerIdentity
from kpax.producer.options import ProducerSettings, resolve_producer_config
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
    explicit_partition,
    plan_many,
)
from kpax.producer.sealer import Sealer
from kpax.producer.sender import Sender
from kpax.producer.sent import Deferred, ManyDeferred, ManySent, Sent
from kpax.producer.serializers import (
    SerializationContext,
    as_bytes,
    get_serializer,
    wants_context,
)
from kpax.producer.transactions import (
    TransactionAbortedError,
    TransactionManager,
    TxnState,
)
from kpax.producer.waiting import TopicWaits
from kpax.proto.error_codes import MessageTooLargeError, UnknownTopicOrPartitionError
from kpax.proto.errors import (
    ClientClosedError,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    PurgedError,
)
from kpax.proto.topic_names import check_topic
from kpax.structs import ConsumerGroupMetadata, OffsetAndMetadata, RecordMetadata, TopicPartition
from kpax.user_callbacks import call_user

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
        **config: Any,
    ) -> None:
        config = given_options(bootstrap_servers, config)
        cfg = self.config = resolve_producer_config(config)
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
        #: ``_try_append_ctx`` / ``_plan_many_ctx``, which hand the plain path
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
                on_new_epoch=self._restart_sequences,
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
        #: topic -> partition count (read by caller threads without a lock).
        #: A topic enters once its metadata is known and no send to it waits
        #: (kpax.producer.waiting); every metadata update changes its count.
        self.num_partitions: dict[str, int] = {}
        #: Sends waiting for their topic's metadata, in call order per topic.
        self._waits = TopicWaits(
            self.cluster,
            self._publish,
            max_block_ms=settings.max_block_ms,
            retry_backoff_ms=settings.retry_backoff_ms,
            retry_backoff_max_ms=settings.retry_backoff_max_ms,
        )
        #: topic -> when its partition count was published (its first use, or
        #: the first after it was forgotten): with its batches' opening times,
        #: what ``metadata_max_idle_ms`` is measured from.
        self._published_at: dict[str, float] = {}
        self._max_idle = settings.metadata_max_idle_ms / 1000 + settings.linger_ms / 1000
        self.cluster.add_listener(self._on_metadata)
        self.cluster.before_refresh = self._forget_idle
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
            self.__dict__["_try_append"] = self._try_append_ctx
            self.__dict__["_plan_many"] = self._plan_many_ctx
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
        if self._forked:
            raise forked_error(self, "flush()")
        check_loop(self._loop, "flush()", self._client_name)
        acc = self.accumulator
        with acc.lock:
            pending = list(acc.incomplete)
            acc.flushing += 1
        self.sender.wake()
        try:
            if self._deferred:
                started = time.monotonic()
                await self._settle_deferred(timeout, "flush")
                with acc.lock:
                    pending = list(acc.incomplete)
                self.sender.wake()
                if timeout is not None:
                    timeout = max(timeout - (time.monotonic() - started), 0.0)
            await self._wait_batches(pending, timeout, "flush")
        finally:
            with acc.lock:
                acc.flushing -= 1

    async def _settle_deferred(self, timeout: float | None, what: str) -> None:
        """Wait for the sends made so far that are not buffered yet (``_defer``:
        each topic's last one ends after those before it) to be buffered or to
        fail; KafkaTimeoutError after ``timeout`` seconds."""
        tasks = list(self._deferred.values())
        if not tasks:
            return
        if timeout is not None and timeout <= 0:
            pending = {t for t in tasks if not t.done()}
        else:
            _, pending = await asyncio.wait(tasks, timeout=timeout)
        if pending:
            raise KafkaTimeoutError(
                f"{what}: sends to {len(pending)} topic(s) still waiting to be buffered (for "
                f"metadata or buffer memory) after {timeout:g}s"
            )

    async def _wait_batches(
        self, batches: list[ProducerBatch], timeout: float | None, what: str
    ) -> None:
        waiters = []
        loop = asyncio.get_running_loop()
        for b in batches:
            fut: asyncio.Future[None] = loop.create_future()
            if b.add_waiter(fut):
                waiters.append(fut)
        if not waiters:
            return
        _, pending = await asyncio.wait(waiters, timeout=timeout)
        if pending:
            for f in pending:
                f.cancel()
            raise KafkaTimeoutError(
                f"{what}: {len(pending)} batch(es) still unacknowledged after {timeout:g}s"
            )

    def _why_unsent(self) -> str:
        """What kept batches from being sent, when the producer knows it."""
        identity = self.sender.identity
        if identity is not None and identity.producer_id < 0:
            on = ""
            if identity.asking is not None:
                failed = identity.asking_error
                how = f"failed: {failed.message}" if failed is not None else "no answer yet"
                on = f"; asked of {identity.asking.describe()}: {how}"
            return f" (no producer id yet: InitProducerId had not succeeded{on})"
        return ""

    async def close(self, timeout: float | None = None) -> None:
        """Send what is buffered (waiting at most ``timeout`` seconds; None: until
        each record is delivered or fails), then fail whatever is left with
        ClientClosedError and close the connections. ``timeout=0`` fails
        buffered records at once. On the event loop that started the producer
        only (IllegalStateError from another loop)."""
        if self._forked:
            raise forked_error(self, "close()")
        if self.closed:
            return
        check_loop(self._loop, "close()", self._client_name)
        if self._deferred and (timeout is None or timeout > 0):
            # sends made before close that still wait to be buffered go first
            started = time.monotonic()
            try:
                await self._settle_deferred(timeout, "close")
            except KafkaTimeoutError:
                pass  # (they fail with ClientClosedError)
            if timeout is not None:
                timeout = max(timeout - (time.monotonic() - started), 0.0)
            if self.closed:
                return
        self.closed = True
        self._disable_appenders()
        if self._stats_task is not None:
            self._stats_task.cancel()
        self._waits.close(
            ClientClosedError(
                "the producer was closed while this send waited for its topic's metadata "
                "(it was never sent)"
            )
        )
        acc = self.accumulator
        if self._started:
            with acc.lock:
                acc.closing = True
                pending = list(acc.incomplete)
            self.sender.wake()
            if timeout is None or timeout > 0:
                try:
                    await self._wait_batches(pending, timeout, "close")
                except KafkaTimeoutError:
                    pass
        await self.sender.stop()
        with acc.lock:
            left = list(acc.incomplete)
        if left:
            sent = {id(b) for pq in acc.all_queues() for b in pq.in_flight}
            unknown = [b for b in left if id(b) in sent or b.attempts > 0]
            unsent = [b for b in left if not (id(b) in sent or b.attempts > 0)]
            limit = (
                f"close timeout {round(timeout, 2):g}s"
                if timeout is not None
                else "no close timeout"
            )
            for group, what in (
                (
                    unknown,
                    "were sent but not acknowledged: their outcome is unknown (they may "
                    "have been written)",
                ),
                (unsent, "were never sent" + self._why_unsent()),
            ):
                if not group:
                    continue
                n = sum((b.count or len(b.values)) for b in group)
                err = ClientClosedError(
                    f"the producer was closed ({limit}) before {n} record(s) were "
                    f"acknowledged; they {what}"
                )
                err.outcome_unknown = group is unknown
                for b in group:
                    self.sender.complete(b, -1, -1, err)
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        await self.cluster.close()

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
        acc, sender = self.accumulator, self.sender
        out: dict[str, float] = {
            "buffer-total-bytes": acc.buffer_memory,
            "buffer-available-bytes": max(acc.buffer_memory - acc.reserved, 0),
            "requests-in-flight": sender.in_flight,
        }
        m, conn = self._metrics, self._conn_metrics
        if m is None or conn is None:
            return out
        now = m.clock()
        for name, sensor in (
            ("record-send", sender.m_sent),
            ("record-error", sender.m_error),
            ("record-retry", sender.m_retry),
        ):
            out[f"{name}-total"] = sensor.total
            out[f"{name}-rate"] = sensor.rate(now)
        out["batch-size-avg"] = sender.m_batch.avg(now)
        out["batch-size-max"] = sender.m_batch.max(now)
        out["records-per-request-avg"] = sender.m_per_request.avg(now)
        out["record-queue-time-avg"] = sender.m_queue.avg(now)
        out["record-queue-time-max"] = sender.m_queue.max(now)
        out["produce-throttle-time-avg"] = sender.m_throttle.avg(now)
        out["produce-throttle-time-max"] = sender.m_throttle.max(now)
        conn.snapshot(out, now)
        # list() copies at once (the I/O thread may add a topic meanwhile).
        topics = [(t, list(c)) for t, c in list(sender.topic_counts.items())]
        for topic, (sent, failed, nbytes) in topics:
            out[tagged("record-send-total", topic=topic)] = sent
            out[tagged("record-error-total", topic=topic)] = failed
            out[tagged("byte-total", topic=topic)] = nbytes
        return out

    # ------------------------------------------------------------ metadata

    def _publish(self, topic: str, n: int) -> None:
        """``topic`` has ``n`` partitions and no send to it waits: from now on
        sends append directly (kpax.producer.waiting calls it once the topic's
        waiting sends are appended)."""
        if topic not in self.num_partitions:
            self._published_at[topic] = time.monotonic()
        self.num_partitions[topic] = n

    def _on_metadata(self) -> None:
        """After every metadata update (periodic or not; the cluster's listener):
        each known topic's partition count follows the metadata, as the Java
        producer's does -- partitions added to a topic take keyed records
        (murmur2 modulo the new count) and keyless ones at once -- and sends
        waiting for a topic's metadata are appended (in call order) before its
        count changes."""
        topics = self.cluster.snapshot.topics
        waits = self._waits
        counts = self.num_partitions
        for name, n in list(counts.items()):
            info = topics.get(name)
            if (
                info is not None
                and info.partitions
                and len(info.partitions) != n
                and name not in waits
            ):
                counts[name] = len(info.partitions)
        for name in waits.topics():
            waits.drain(name)

    def _forget_idle(self) -> None:
        """Before each metadata refresh: forget the topics not sent to for
        ``metadata_max_idle_ms`` (Java's rule) with nothing of them buffered or
        in flight -- the refresh no longer names them (so auto-creation does
        not re-create a deleted one) and their per-topic state goes; a later
        send looks the topic up again."""
        if not self._started or self.closed:
            return
        now = time.monotonic()
        limit = self._max_idle
        cluster = self.cluster
        published = self._published_at
        candidates = [
            t
            for t in cluster.interest
            if now - max(published.get(t, 0.0), cluster.asked_at(t)) >= limit
            and t not in self._waits
        ]
        if not candidates:
            return
        forgotten = self.accumulator.forget_idle_topics(candidates, now - limit)
        for t in forgotten:
            self.num_partitions.pop(t, None)
            self._published_at.pop(t, None)
        if forgotten:
            cluster.forget(forgotten)
            log.debug("forgot %d topic(s) idle for metadata_max_idle_ms", len(forgotten))

    async def wait_topic(self, topic: str, timeout: float | None = None) -> int:
        """The partition count of ``topic``, waiting up to ``timeout`` (default
        ``max_block_ms``) for its metadata; KafkaTimeoutError names the topic,
        InvalidTopicError a name Kafka would refuse (at once)."""
        n = self.num_partitions.get(topic)
        if n is not None:
            return n
        check_topic(topic)
        limit = self._max_block if timeout is None else timeout
        deadline = time.monotonic() + limit
        while True:
            try:
                info = await self.cluster.topic(
                    topic, timeout=max(deadline - time.monotonic(), 0.01)
                )
                break
            except KafkaError as exc:
                if not (exc.retriable or isinstance(exc, UnknownTopicOrPartitionError)):
                    raise  # e.g. an invalid topic name: waiting cannot help
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise KafkaTimeoutError(
                        f"topic {topic!r} not present in metadata after {limit * 1000:.0f} ms "
                        f"(max_block_ms): {exc.message}"
                    ) from exc
                await asyncio.sleep(min(remaining, self.settings.retry_backoff_ms / 1000))
        n = len(info.partitions)
        if topic not in self._waits:  # (else its waiting sends go first: they publish it)
            self._publish(topic, n)
        return n

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
        ``max_block_ms`` in all, then raise :meth:`_memory_full_error`). ``n``: the
        topic's partition count (``num_partitions[topic]`` or :meth:`wait_topic`)."""
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

    def _try_append_ctx(  # noqa: PLR0917 - try_append's arguments
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp: int | None,
        headers: Any,
        n: int,
    ) -> RecordFuture | None:
        """``try_append`` with serializers that take a SerializationContext (this
        instance's ``try_append``, set at construction)."""
        assert self._ctx_sers is not None
        kser, vser = self._ctx_sers
        if kser is not None:
            key = kser(key, SerializationContext(topic, "key", headers))
        if vser is not None:
            value = vser(value, SerializationContext(topic, "value", headers))
        return AsyncProducer._try_append(self, topic, value, key, partition, timestamp, headers, n)

    def _plan_many_ctx(  # noqa: PLR0917 - plan_many's arguments
        self,
        topic: str,
        values: Sequence[Any],
        keys: Sequence[Any] | None,
        partition: int | None,
        timestamp: int | None,
        headers: Any,
        n: int,
    ) -> BulkPlan:
        """``plan_many`` with serializers that take a SerializationContext."""
        assert self._ctx_sers is not None
        kser, vser = self._ctx_sers
        if vser is not None:
            ctx = SerializationContext(topic, "value", headers)
            values = [vser(v, ctx) for v in values]
        if kser is not None and keys is not None:
            ctx = SerializationContext(topic, "key", headers)
            keys = [kser(k, ctx) for k in keys]
        return AsyncProducer._plan_many(self, topic, values, keys, partition, timestamp, headers, n)

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

    def _memory_full_error(
        self, topic: str, plan: BulkPlan | None = None, *, in_callback: bool = False
    ) -> KafkaTimeoutError:
        """The error of a send that waited ``max_block_ms`` for buffer memory, or
        (``in_callback``) of one that may not wait: made on the producer's I/O
        thread, in a delivery callback, where waiting would stop the very
        deliveries that free memory (confluent-kafka raises BufferError there);
        that one is not retriable where it was made. For a ``send_many`` that
        buffered some of its records first, ``err.partial`` is the BulkFuture
        of those (they are sent; the others are not)."""
        if in_callback:
            err = KafkaTimeoutError(
                f"buffer memory full (buffer_memory={self.config['buffer_memory']}) and send() "
                "called from the producer's I/O thread (a delivery callback), which would "
                f"block delivery; the record for topic {topic!r} was not buffered: send it "
                "from another thread or task, or raise buffer_memory",
                retriable=False,
            )
        else:
            err = KafkaTimeoutError(
                f"buffer_memory={self.config['buffer_memory']} full for {self._max_block:g}s "
                f"(max_block_ms): cannot buffer a record for topic {topic!r}"
            )
        err.partial = None  # type: ignore[attr-defined]
        if plan is not None and plan.segments:
            count = sum(hi - lo for _, _, _, lo, hi in plan.segments)
            err.partial = BulkFuture(topic, count, plan.timestamp, plan.segments)  # type: ignore[attr-defined]
            err.message += (
                f"; {count} record(s) of this send_many were buffered before and will be "
                "sent: err.partial is their BulkFuture, the rest were not sent"
            )
        return err

    def _filled(self, plan: BulkPlan, n: int) -> bool | None:
        """``try_fill`` as a ``_wait_memory`` attempt: True when done, None to wait more."""
        return True if self._try_fill(plan, n) else None

    async def _wait_memory(
        self,
        topic: str,
        plan: BulkPlan | None,
        attempt: Callable[..., T | None],
        *args: Any,
        deadline: float | None = None,
    ) -> T:
        """The asyncio buffer-memory wait of ``send`` and ``send_many``:
        ``attempt(*args)`` each time memory is freed until it returns something
        other than None; after ``max_block_ms`` (or at ``deadline``, a
        ``time.monotonic()``) raise :meth:`_memory_full_error`.
        (The sync face waits on the accumulator's condition instead, with
        ``SyncFace._wait_until``.)"""
        if deadline is None:
            deadline = time.monotonic() + self._max_block
        event = self._memory_event
        assert event is not None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._memory_full_error(topic, plan)
            event.clear()
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except asyncio.TimeoutError:
                pass
            result = attempt(*args)
            if result is not None:
                return result

    async def _wait_and_append(  # noqa: PLR0917 - the arguments of send
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp: int | None,
        headers: Any,
        deadline: float | None = None,
    ) -> RecordFuture:
        """``send`` of a record whose topic has no partition count yet (or whose
        explicit partition is beyond it): the record waits for the topic's
        metadata behind the topic's earlier waiting sends and is appended in
        call order (kpax.producer.waiting), within ``max_block_ms``. A topic
        name Kafka would refuse raises InvalidTopicError at once. (The sync
        face runs it on the I/O loop.)"""
        check_topic(topic)
        if self.closed:
            raise ClientClosedError("send() on a closed producer")
        if not self._started:
            await self.start()
        explicit = explicit_partition(partition)
        n = self.num_partitions.get(topic)

        def attempt(count: int) -> RecordFuture | None:
            return self._try_append(topic, value, key, partition, timestamp, headers, count)

        if n is not None and (explicit is None or explicit < n):  # known meanwhile
            fut = attempt(n)
            if fut is None:
                fut = await self._wait_memory(topic, None, attempt, n, deadline=deadline)
            return fut
        waited: RecordFuture = await self._waits.wait(
            topic, attempt, explicit, lambda: self._memory_full_error(topic), deadline
        )
        return waited

    async def _wait_and_fill(  # noqa: PLR0917 - the arguments of send_many
        self,
        topic: str,
        values: Sequence[Any],
        keys: Sequence[Any] | None,
        partition: int | None,
        timestamp: int | None,
        headers: Any,
        deadline: float | None = None,
    ) -> BulkFuture:
        """``send_many`` to a topic without a partition count yet (or to an
        explicit partition beyond it): as :meth:`_wait_and_append`, for the
        whole call (its records stay together, in order)."""
        check_topic(topic)
        if self.closed:
            raise ClientClosedError("send_many() on a closed producer")
        if not self._started:
            await self.start()
        explicit = explicit_partition(partition)
        n = self.num_partitions.get(topic)
        if n is not None and (explicit is None or explicit < n):  # known meanwhile
            plan = self._plan_many(topic, values, keys, partition, timestamp, headers, n)
            if not self._try_fill(plan, n):
                await self._wait_memory(topic, plan, self._filled, plan, n, deadline=deadline)
            return BulkFuture(topic, len(values), plan.timestamp, plan.segments)
        planned: list[tuple[BulkPlan, int]] = []  # (the plan, the count it was made with)

        def attempt(count: int) -> BulkFuture | None:
            if not planned:
                plan = self._plan_many(topic, values, keys, partition, timestamp, headers, count)
                planned.append((plan, count))
            plan, count = planned[0]
            if not self._try_fill(plan, count):
                return None  # resumes where it stopped once memory is freed
            return BulkFuture(topic, len(values), plan.timestamp, plan.segments)

        def full() -> KafkaTimeoutError:
            return self._memory_full_error(topic, planned[0][0] if planned else None)

        fut: BulkFuture = await self._waits.wait(topic, attempt, explicit, full, deadline)
        return fut

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
        if callback is not None and not callable(callback):
            raise bad_callback(callback)
        if topic not in self._deferred:
            n = self.num_partitions.get(topic)
            plan: BulkPlan | None = None
            if n is not None:
                try:
                    plan = self._plan_many(topic, values, keys, partition, timestamp, headers, n)
                except PartitionNotInMetadata:  # added since? (deferred: a refresh first)
                    plan = None
            else:
                check_topic(topic)  # (at the call: a name Kafka would refuse never waits)
            if plan is not None:
                assert n is not None
                if self._try_fill(plan, n):
                    fut = BulkFuture(topic, len(values), plan.timestamp, plan.segments)
                    if callback is not None:
                        fut.add_callback(callback)
                    # (pause: the sender's turn once awaited, as in send)
                    return ManySent(fut, True, not in_callbacks(), topic)
                if in_callbacks():
                    raise self._memory_full_error(topic, plan, in_callback=True)
                # buffer memory full after part of it (if any): the rest waits in turn
                return self._defer(
                    topic,
                    "send_many",
                    self._send_many_later,
                    topic,
                    values,
                    keys,
                    partition,
                    timestamp,
                    headers,
                    callback,
                    plan,
                    n,
                )
        elif in_callbacks() and topic in self.num_partitions:
            raise self._memory_full_error(topic, in_callback=True)  # (as in send)
        return self._defer(
            topic,
            "send_many",
            self._send_many_later,
            topic,
            values,
            keys,
            partition,
            timestamp,
            headers,
            callback,
            None,
            0,
        )

    async def _send_many_later(  # noqa: PLR0917 - send_many's arguments
        self,
        deadline: float,
        topic: str,
        values: Sequence[Any],
        keys: Sequence[Any] | None,
        partition: int | None,
        timestamp: int | None,
        headers: Any,
        callback: Callback | None,
        plan: BulkPlan | None,
        n: int,
    ) -> BulkFuture:
        """The rest of a ``send_many`` that could not be buffered at the call (in
        its turn: see :meth:`_defer`): a topic without a partition count yet (or
        an explicit partition beyond it) waits for its metadata in
        kpax.producer.waiting, then buffer memory."""
        if plan is None:
            if not self._started:
                await self.start()
            known = self.num_partitions.get(topic)  # (known meanwhile?)
            if known is not None:
                n = known
                try:
                    plan = self._plan_many(topic, values, keys, partition, timestamp, headers, n)
                except PartitionNotInMetadata:
                    plan = None
            if plan is None:
                many = await self._wait_and_fill(
                    topic, values, keys, partition, timestamp, headers, deadline
                )
                if callback is not None:
                    many.add_callback(callback)
                return many
        if not self._try_fill(plan, n):
            await self._wait_memory(topic, plan, self._filled, plan, n, deadline=deadline)
        fut = BulkFuture(topic, len(values), plan.timestamp, plan.segments)
        if callback is not None:
            fut.add_callback(callback)
        return fut

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
                    raise self._memory_full_error(topic, in_callback=True)
        elif in_callbacks() and topic in self.num_partitions:
            # behind earlier sends waiting for buffer memory: a callback may not wait
            raise self._memory_full_error(topic, in_callback=True)
        return self._defer(
            topic,
            "send",
            self._send_later,
            topic,
            value,
            key,
            partition,
            timestamp,
            headers,
            callback,
        )

    async def _send_later(  # noqa: PLR0917 - send's arguments
        self,
        deadline: float,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp: int | None,
        headers: Any,
        callback: Callback | None,
    ) -> RecordFuture:
        """A ``send`` that could not be buffered at the call (in its turn: see
        :meth:`_defer`): a topic without a partition count yet (or an explicit
        partition beyond it) waits for its metadata in kpax.producer.waiting,
        then buffer memory."""
        if not self._started:
            await self.start()
        n = self.num_partitions.get(topic)  # (known meanwhile?)
        fut: RecordFuture | None = None
        if n is not None:
            try:
                fut = self._try_append(topic, value, key, partition, timestamp, headers, n)
            except PartitionNotInMetadata:
                n = None
        if n is None:
            fut = await self._wait_and_append(
                topic, value, key, partition, timestamp, headers, deadline
            )
        elif fut is None:
            fut = await self._wait_memory(
                topic,
                None,
                self._try_append,
                topic,
                value,
                key,
                partition,
                timestamp,
                headers,
                n,
                deadline=deadline,
            )
        if callback is not None:
            fut.add_callback(callback)
        return fut

    def _defer(
        self,
        topic: str,
        what: str,
        later: Callable[..., Coroutine[Any, Any, T]],
        *args: Any,
    ) -> Deferred:
        """Go on with a send that cannot be buffered at the call in a task started
        now: ``later(deadline, *args)`` (``deadline``: ``max_block_ms`` from now),
        once the sends to ``topic`` deferred before it are done, so that the
        records of a topic are buffered in call order. Until the topic's last
        deferred send is done, later sends to it are deferred too, and the C
        appender is off (it would append ahead of them)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise IllegalStateError(
                f"kpax.aio.Producer.{what}() for topic {topic!r} must wait (for the topic's "
                "metadata or buffer memory) and was called outside a running event loop: "
                "call it from the loop (or use kpax.Producer)"
            ) from None
        prev = self._deferred.get(topic)
        deadline = time.monotonic() + self._max_block
        task = loop.create_task(self._in_turn(prev, topic, later, deadline, *args))
        self._deferred[topic] = task
        if self._aio_appender is not None:
            self._aio_appender.enabled = False
        if what == "send":
            return Deferred(task, not in_callbacks(), topic)
        return ManyDeferred(task, not in_callbacks(), topic)

    async def _in_turn(
        self,
        prev: asyncio.Task[Any] | None,
        topic: str,
        later: Callable[..., Coroutine[Any, Any, T]],
        *args: Any,
    ) -> T:
        try:
            if prev is not None and not prev.done():
                await asyncio.wait((prev,))  # (its outcome is its own)
            return await later(*args)
        finally:
            if self._deferred.get(topic) is asyncio.current_task():
                del self._deferred[topic]
                if not self._deferred and not self.closed and self._aio_appender is not None:
                    self._aio_appender.enabled = True

    # ------------------------------------------------------------ transactions

    def _transactions(self, action: str) -> TransactionManager:
        if self.txn is None:
            raise IllegalStateError(
                f"cannot {action}: the producer has no transactional_id (set one to use "
                "transactions)"
            )
        return self.txn

    def _restart_sequences(self) -> None:
        """A new producer epoch: every partition's sequence starts again at 0
        (called between transactions, when nothing of this producer is pending)."""
        queues = self.accumulator.all_queues()  # takes the (non-reentrant) lock itself
        with self.accumulator.lock:
            self.accumulator.saved_sequences.clear()
            for pq in queues:
                pq.next_sequence = 0

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Register ``transactional_id`` with its coordinator: fences older producers
        with the same id and aborts their open transaction. Call once, first."""
        txn = self._transactions("init transactions")
        if not self._started:
            await self.start()
        await txn.init(self._max_block if timeout is None else timeout)

    def begin_transaction(self) -> Done:
        """Start a transaction (sends are allowed only inside one). A plain method
        (no I/O: the broker learns of the transaction with its first send); the
        result may be awaited, as aiokafka's and confluent-kafka's asyncio
        producers are: ``await producer.begin_transaction()`` works.
        IllegalStateError without ``transactional_id``, before
        :meth:`init_transactions` or inside a transaction."""
        self._transactions("begin a transaction").begin()
        return DONE

    @contextlib.asynccontextmanager
    async def transaction(self, timeout: float | None = None) -> AsyncIterator[AsyncProducer]:
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
        self.begin_transaction()
        try:
            yield self
        except BaseException:
            await self._abort_quietly(timeout)
            raise
        try:
            await self.commit_transaction(timeout)
        except KafkaError:
            await self._abort_quietly(timeout)
            raise

    async def _abort_quietly(self, timeout: float | None) -> None:
        """Abort the open transaction after a failure; the failure is what the
        caller sees, so an abort that fails too (a fenced producer) is logged."""
        try:
            await self.abort_transaction(timeout)
        except Exception as exc:
            log.warning("aborting the transaction after an error failed too: %s", exc)

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[Any, int | OffsetAndMetadata],
        group_metadata: ConsumerGroupMetadata | str,
        timeout: float | None = None,
    ) -> None:
        """Commit a consumer group's offsets (the next offset to read, per
        partition) as part of the transaction: consume-transform-produce."""
        txn = self._transactions("send offsets to a transaction")
        group = (
            ConsumerGroupMetadata(group_metadata)
            if isinstance(group_metadata, str)
            else group_metadata
        )
        tps = {TopicPartition(*tp): o for tp, o in offsets.items()}
        await txn.send_offsets(tps, group, self._max_block if timeout is None else timeout)

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Send what is buffered, then commit: every record of the transaction
        becomes visible to read_committed consumers, or none does."""
        txn = self._transactions("commit a transaction")
        limit = self._max_block if timeout is None else timeout
        await txn.end(True, lambda: self.flush(limit), limit)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop unsent records (their futures fail), wait for those in flight, abort."""
        txn = self._transactions("abort a transaction")
        limit = self._max_block if timeout is None else timeout

        async def drain() -> None:
            self.sender._fail_unsent(
                TransactionAbortedError(f"the transaction of {txn.transactional_id!r} was aborted")
            )
            try:
                await self.flush(limit)
            except KafkaError:
                pass  # in-flight batches of an aborted transaction may fail; that is the point

        await txn.end(False, drain, limit)

    async def send_and_wait(
        self, topic: str, value: Any = None, key: Any = None, **kw: Any
    ) -> RecordMetadata:
        """``send`` and wait for the record's metadata."""
        fut = await self.send(topic, value, key, **kw)
        return await fut
