"""``kpax.Producer``: the blocking face of :class:`~kpax.producer.client.AsyncProducer`.

Role: a thin wrapper that runs the asyncio core on its own
:class:`~kpax.loop_thread.LoopThread`. ``send`` does not cross to the I/O
thread (where the C send path is built, an instance's ``send`` is its C
appender's, which calls the ``send`` below for anything but the common
record): it serializes, partitions and appends into the thread-safe
accumulator in the caller's thread and returns a
:class:`~kpax.producer.batch.RecordFuture` (``.result(timeout)``). Only the
first send to a new topic (metadata, bounded by ``max_block_ms``), a full
buffer (blocks up to ``max_block_ms``), ``flush`` and ``close`` wait on the
I/O thread. Safe to call from several threads.

The GIL: the caller's thread and the I/O thread share it, and a caller that
simply runs on leaves the I/O thread waiting for the interpreter's 5 ms switch
interval. So a send that opens a new batch when the sender has work -- the
batch follows a full one, the sender was woken, or its linger timer is due
(:meth:`AsyncProducer._sender_due`; not at every batch opened: keyed records
to many partitions open one almost per record) -- hands the I/O thread the GIL
until its loop has nothing left to run (its requests written, answers taken
in), at most ``HAND_OVER_S`` (:meth:`kpax.loop_thread.LoopThread.wait_idle`);
when the loop looks idle, the caller does not stop at all. The idle mark lags
(a loop woken by an answer while the caller holds the GIL looks idle until it
runs), which is why the caller does not simply yield whenever the loop looks
idle; a plain ``time.sleep(0)`` would give the I/O thread one slice only, up
to its next system call. What this costs and saves is measured in
bench/results (docs/producer.md says where the time goes).

At exit, a producer still open delivers what it holds, within a bound, or says
how many records were lost (kpax.producer.exit_flush); one collected unclosed
warns (ResourceWarning) and closes in the background (kpax.sync_face). The
C appender reaches this face's ``send`` through a weak reference: the I/O
thread holds the core, and must not keep the face alive.

Imports: kpax.producer.{client,batch,deferred,exit_flush,options,planning}, kpax.sync_face,
kpax.proto.errors, kpax.structs, kpax.peer_methods.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import weakref
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from kpax.peer_methods import PRODUCER, PeerHints
from kpax.producer import deferred, exit_flush
from kpax.producer.batch import BulkFuture, Callback, RecordFuture, bad_callback
from kpax.producer.client import AsyncProducer
from kpax.producer.options import ProducerConfig
from kpax.producer.planning import PartitionNotInMetadata
from kpax.proto.errors import KafkaError, KafkaTimeoutError
from kpax.structs import ConsumerGroupMetadata, OffsetAndMetadata
from kpax.sync_face import SyncFace

if TYPE_CHECKING:
    from typing_extensions import Unpack  # (typing's from Python 3.11)

__all__ = ["Producer"]

log = logging.getLogger("kpax.producer")

T = TypeVar("T")


#: The longest a send that opens a batch waits for the I/O loop to go idle
#: (a loop kept busy, say by slow callbacks, still gets the caller going).
HAND_OVER_S = 0.001


def _filled(core: AsyncProducer, plan: Any, n: int) -> bool | None:
    """``try_fill`` as a ``_wait_memory`` attempt: True when done, None to wait more."""
    return True if core._try_fill(plan, n) else None


class Producer(PeerHints, SyncFace):
    """``kpax.Producer("host:9092", acks="all", linger_ms=5)``; a context manager."""

    _peer_methods = PRODUCER

    _closed_text = "{what} on a closed producer"
    _client_name = "kpax.Producer"

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | Mapping[str, Any] | None = None,
        /,
        **config: Unpack[ProducerConfig],
    ) -> None:
        core = self._core = AsyncProducer(bootstrap_servers, **config)  # validates options first
        self.config = core.config
        self._max_block = core.settings.max_block_ms / 1000
        # calls given no timeout wait max_block_ms; every call's wait has 5 s more
        super().__init__("kpax-producer", self._max_block, 5.0, track_idle=True)
        self._hand_over = partial(self._thread.wait_idle, HAND_OVER_S)
        self._nparts = core.num_partitions
        self._append = core._try_append  # bound once: send's per-record call
        self._sender_due = core._sender_due
        self._start(
            core.start(),
            self._max_block + core.settings.request_timeout_ms / 1000,
            "producer start",
            lambda: core.close(0),
            5.0,
        )
        # The C send path (kpax.producer.fastpath): this instance's ``send`` is
        # the C appender's, which hands anything but the common record to the
        # Python ``send`` below -- same arguments, same results.
        # (bound to a weak proxy: the C appender, which the core holds, must not
        # keep the face alive; a bound method, so the slow path pays no extra call)
        fast = self._core._new_appender(Producer.send.__get__(weakref.proxy(self)))
        if fast is not None:
            self.__dict__["send"] = fast.send
        exit_flush.track(self)

    @property
    def aio(self) -> AsyncProducer:
        """The asyncio core (for use on this producer's own loop only)."""
        return self._core

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
    ) -> RecordFuture:
        """Buffer a record and return its future (``.result(timeout)`` ->
        RecordMetadata). ``callback(metadata, error)`` runs on the I/O thread
        (TypeError at the call if it cannot be called). Called from that
        thread (a callback), a send that would wait for buffer memory raises
        KafkaTimeoutError at once: waiting there would block delivery."""
        if callback is not None and not callable(callback):
            raise bad_callback(callback)
        n = self._nparts.get(topic)
        fut: RecordFuture | None
        if n is None:
            fut = self._wait_and_append(topic, value, key, partition, timestamp, headers)
        else:
            try:
                fut = self._append(topic, value, key, partition, timestamp, headers, n)
            except PartitionNotInMetadata:  # added since? (a refresh first)
                fut = self._wait_and_append(topic, value, key, partition, timestamp, headers)
        if fut is None:
            # (no closure here: send's locals stay plain locals)
            fut = self._wait_memory(
                topic, None, self._append, topic, value, key, partition, timestamp, headers, n
            )
        elif fut.batch_index == 0 and self._sender_due(fut):
            self._hand_over()  # the I/O thread's turn (module docstring)
        if callback is not None:
            fut.add_callback(callback)
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
    ) -> BulkFuture:
        """Buffer many records at once, as ``send`` would one by one (see
        :meth:`AsyncProducer.send_many`); returns one BulkFuture
        (``.result(timeout)`` -> records delivered)."""
        if callback is not None and not callable(callback):
            raise bad_callback(callback)
        core = self._core
        n = self._nparts.get(topic)
        plan = None
        if n is not None:
            try:
                plan = core._plan_many(topic, values, keys, partition, timestamp, headers, n)
            except PartitionNotInMetadata:  # added since? (a refresh first)
                pass
        if plan is None:
            if self._closed:
                raise self._closed_error("send_many()")
            fut = self._run(
                deferred.wait_and_fill(core, topic, values, keys, partition, timestamp, headers),
                None,
                what=f"send_many to {topic!r}",
            )
        else:
            assert n is not None
            if not core._try_fill(plan, n):
                self._wait_memory(topic, plan, _filled, core, plan, n)
            if plan.segments and plan.segments[-1][1] == 0:
                self._hand_over()  # a new batch: the I/O thread's turn (as in send)
            fut = BulkFuture(topic, len(values), plan.timestamp, plan.segments)
        if callback is not None:
            fut.add_callback(callback)
        return fut

    def _wait_and_append(  # noqa: PLR0917 - the arguments of send
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp: int | None,
        headers: Any,
    ) -> RecordFuture:
        """A record whose topic (or partition) is not in the metadata yet: it
        waits on the I/O loop, in call order with the topic's other waiting
        sends (:func:`kpax.producer.deferred.wait_and_append`)."""
        if self._closed:
            raise self._closed_error("send()")
        return self._run(
            deferred.wait_and_append(self._core, topic, value, key, partition, timestamp, headers),
            None,
            what=f"send to {topic!r}",
        )

    def _wait_memory(
        self, topic: str, plan: Any, attempt: Callable[..., T | None], *args: Any
    ) -> T:
        """Buffer memory is full: ``attempt(*args)`` again as memory is freed
        (until not None), at most ``max_block_ms``, then raise the core's
        memory-full error. On the I/O thread (a delivery callback) raise it at
        once: only that thread frees memory, so waiting there would stall
        delivery for ``max_block_ms`` per send."""
        core = self._core
        if self._thread.in_loop_thread:
            raise deferred.memory_full_error(core, topic, plan, in_callback=True)
        return self._wait_until(
            partial(attempt, *args),
            core.accumulator.wait_for_memory,
            self._max_block,
            partial(deferred.memory_full_error, core, topic, plan),
        )

    def __len__(self) -> int:
        """The records buffered or in flight, not yet acknowledged
        (confluent-kafka's ``len(producer)``); a producer is true even when empty::

            while len(producer):
                producer.flush(1.0)
        """
        return len(self._core)

    def __bool__(self) -> bool:
        return True

    def purge(self) -> int:
        """Drop every record buffered and not sent yet (confluent-kafka's
        ``purge()``): their futures and callbacks fail with PurgedError; records
        in flight keep their outcome. Returns how many were dropped."""
        return self._run(self._core.purge(), None, what="purge")

    def list_topics(
        self, topic: str | None = None, *, timeout: float | None = None
    ) -> dict[str, list[int]]:
        """``{topic: partition ids}`` of every topic (internal ones left out), or of
        ``topic`` alone; see :meth:`AsyncProducer.list_topics`."""
        return self._run(self._core.list_topics(topic, timeout=timeout), timeout, "list_topics")

    def metrics(self) -> dict[str, float]:
        """``{metric-name: value}``: see :meth:`AsyncProducer.metrics` and
        docs/observability.md."""
        return self._core.metrics()

    def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered and wait for the outcome (KafkaTimeoutError
        after ``timeout`` seconds)."""
        if self._closed:
            if self._forked:
                raise self._closed_error("flush()")
            return
        self._run(self._core.flush(timeout), timeout, what="flush", unbounded=True)

    # ------------------------------------------------------------ transactions
    # (see AsyncProducer: same methods, same semantics)

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register ``transactional_id`` with its coordinator: fences older
        producers with the same id and aborts their open transaction. Call once,
        first. IllegalStateError without ``transactional_id``."""
        self._run(self._core.init_transactions(timeout), timeout, "init_transactions")

    def begin_transaction(self) -> None:
        """Start a transaction (sends are allowed only inside one)."""
        self._core.begin_transaction()

    @contextlib.contextmanager
    def transaction(self, timeout: float | None = None) -> Iterator[Producer]:
        """``with producer.transaction(): ...``: begin a transaction, commit it when
        the block ends, abort it when an exception leaves the block (the exception
        goes on). A commit that fails is followed by an abort (when the producer
        can still abort) and its error raised. ``timeout``: of the commit or abort
        (``max_block_ms`` when None)::

            producer.init_transactions()
            with producer.transaction():
                producer.send("orders", b"v")
                producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
        """
        self.begin_transaction()
        try:
            yield self
        except BaseException:
            self._abort_quietly(timeout)
            raise
        try:
            self.commit_transaction(timeout)
        except KafkaError:
            self._abort_quietly(timeout)
            raise

    def _abort_quietly(self, timeout: float | None) -> None:
        try:
            self.abort_transaction(timeout)
        except Exception as exc:
            log.warning("aborting the transaction after an error failed too: %s", exc)

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[Any, int | OffsetAndMetadata],
        group_metadata: ConsumerGroupMetadata | str,
        timeout: float | None = None,
    ) -> None:
        """Commit a consumer group's offsets (the next offset to read, per
        partition) as part of the transaction: consume-transform-produce."""
        self._run(
            self._core.send_offsets_to_transaction(offsets, group_metadata, timeout),
            timeout,
            "send_offsets_to_transaction",
        )

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Send what is buffered, then commit: every record of the transaction
        becomes visible to read_committed consumers, or none does."""
        self._run(self._core.commit_transaction(timeout), timeout, "commit_transaction")

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop unsent records (their futures fail), wait for those in flight, abort."""
        self._run(self._core.abort_transaction(timeout), timeout, "abort_transaction")

    def partitions_for(self, topic: str) -> list[int]:
        """The partition ids of ``topic`` (waits for its metadata, at most
        ``max_block_ms``)."""
        return self._run(self._core.partitions_for(topic), None, what="partitions_for")

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is buffered (at most ``timeout`` seconds), fail the rest with
        ClientClosedError, close connections and stop the I/O thread. Returns within
        ``timeout`` (plus a small margin for closing sockets)."""
        limit = None if timeout is None else timeout + 2.0
        self._close_once(self._core.close(timeout), limit, "producer close", stop_timeout=2.0)

    def _close_failed(self, exc: Exception) -> None:
        # outlasting ``timeout`` is not an error: the rest failed with ClientClosedError
        if not isinstance(exc, KafkaTimeoutError):
            raise exc

    def _unreferenced_close(self) -> Coroutine[Any, Any, Any]:
        # deliver what is buffered: each record succeeds or fails within this
        settings = self._core.settings
        return self._core.close(settings.delivery_timeout_ms / 1000)

    def _closing_unreferenced(self, done: concurrent.futures.Future[Any]) -> None:
        exit_flush.closing(self._client_name, self._core, done)
