"""A producer batch and the futures of its records.

Role: :class:`ProducerBatch` is one partition's batch from first append to
final outcome: its records as columns (timestamps, keys, values, headers) while it fills
-- appending is three ``list.append`` calls and a size sum, no per-record
object -- its bytes once drained (``encode_columns``, one batch at a time;
kept for retries), the producer-id/sequence
state it was sent with, and its outcome (base offset and log-append time, or
an error). :class:`RecordFuture` is what ``send`` returns: a small object
(batch, index, timestamp) -- no lock, event or list per record. Completion is
per batch: one lock, one lazily created :class:`threading.Event` for blocking
waiters, and asyncio futures for awaiting callers (woken on their own loop).

Thread model: records are appended by caller threads under the accumulator's
lock; a batch is completed exactly once, on the producer's I/O loop. Callbacks
``fn(metadata, error)`` run on the I/O loop (as the Java client's do): keep
them short and never block there.

Imports: kpax.structs, kpax.proto (records, errors), the standard library.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Generator, Sequence
from typing import Any

from kpax.proto.errors import KafkaError, KafkaTimeoutError
from kpax.proto.records import Header
from kpax.structs import RecordMetadata

Callback = Callable[[RecordMetadata | None, BaseException | None], Any]

__all__ = ["Callback", "ProducerBatch", "RecordFuture"]


class ProducerBatch:
    """One partition's batch (see the module docstring)."""

    __slots__ = (
        "_callbacks",
        "_event",
        "_lock",
        "_waiters",
        "attempts",
        "base_offset",
        "base_sequence",
        "count",
        "created",
        "data",
        "done",
        "error",
        "headers",
        "keys",
        "last_error",
        "log_append_time",
        "partition",
        "producer_epoch",
        "producer_id",
        "reserved",
        "retry_at",
        "serial",
        "size",
        "timestamps",
        "topic",
        "unknown_outcome",
        "values",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        created: float,
        reserved: int,
        serial: int,
    ) -> None:
        self._lock = threading.Lock()
        self._event: threading.Event | None = None
        self._waiters: list[asyncio.Future[None]] | None = None
        self._callbacks: list[tuple[int, int, Callback]] | None = None
        self.topic = topic
        self.partition = partition
        self.timestamps: list[int] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        #: None until a record with headers arrives (then one entry per record).
        self.headers: list[Sequence[Header] | None] | None = None
        #: Estimated encoded size of the records (upper bound, as BatchBuilder's).
        self.size = 0
        self.created = created
        self.reserved = reserved
        self.serial = serial
        self.data: bytes | None = None
        self.count = 0
        self.attempts = 0
        self.retry_at = 0.0
        self.base_sequence = -1
        self.producer_id = -1
        self.producer_epoch = -1
        self.unknown_outcome = False
        self.last_error: BaseException | None = None
        self.done = False
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None

    def __repr__(self) -> str:
        return (
            f"<ProducerBatch {self.topic}-{self.partition} serial={self.serial} "
            f"seq={self.base_sequence}>"
        )

    # ------------------------------------------------------------ completion (I/O loop)

    def complete(self, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        """Set the outcome once; wake blocking waiters, awaiting tasks and callbacks."""
        with self._lock:
            if self.done:
                return
            self.base_offset = base_offset
            self.log_append_time = log_append_time
            self.error = error
            self.done = True
            event, waiters, callbacks = self._event, self._waiters, self._callbacks
            self._waiters = self._callbacks = None
        self.timestamps = self.keys = self.values = []  # type: ignore[assignment]
        self.headers = None
        if event is not None:
            event.set()
        if waiters:
            for w in waiters:
                _wake(w)
        if callbacks:
            for index, ts, fn in callbacks:
                _run_callback(fn, self._metadata(index, ts), error)

    def _metadata(self, index: int, timestamp: int) -> RecordMetadata | None:
        if self.error is not None:
            return None
        offset = self.base_offset + index if self.base_offset >= 0 else -1
        ts = self.log_append_time if self.log_append_time != -1 else timestamp
        return RecordMetadata(self.topic, self.partition, offset, ts)

    # ------------------------------------------------------------ waiting (any thread)

    def wait(self, timeout: float | None) -> bool:
        if self.done:
            return True
        with self._lock:
            if self.done:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    def add_waiter(self, fut: asyncio.Future[None]) -> bool:
        """Register an asyncio future to wake; False if already done."""
        with self._lock:
            if self.done:
                return False
            if self._waiters is None:
                self._waiters = []
            self._waiters.append(fut)
            return True

    def add_callback(self, index: int, timestamp: int, fn: Callback) -> None:
        with self._lock:
            if not self.done:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append((index, timestamp, fn))
                return
        _run_callback(fn, self._metadata(index, timestamp), self.error)


def _wake(fut: asyncio.Future[None]) -> None:
    loop = fut.get_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        if not fut.done():
            fut.set_result(None)
    else:
        loop.call_soon_threadsafe(_set_if_pending, fut)


def _set_if_pending(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _run_callback(fn: Callback, meta: RecordMetadata | None, error: BaseException | None) -> None:
    try:
        fn(meta, error)
    except Exception:  # a user callback must not break the sender
        import logging

        logging.getLogger("kpax.producer").exception("producer callback %r raised", fn)


class RecordFuture:
    """The outcome of one ``send``: :meth:`result` blocks (sync face), ``await``
    works in asyncio; :meth:`add_callback` registers ``fn(metadata, error)``."""

    __slots__ = ("_batch", "_index", "_timestamp")

    def __init__(self, batch: ProducerBatch, index: int, timestamp: int) -> None:
        self._batch = batch
        self._index = index
        self._timestamp = timestamp

    def done(self) -> bool:
        return self._batch.done

    def succeeded(self) -> bool:
        return self._batch.done and self._batch.error is None

    def failed(self) -> bool:
        return self._batch.done and self._batch.error is not None

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """Where the record landed; raises the delivery error, or KafkaTimeoutError
        if the outcome is not known within ``timeout`` seconds."""
        b = self._batch
        if not b.done and not b.wait(timeout):
            raise KafkaTimeoutError(
                f"record for {b.topic}-{b.partition} not acknowledged within {timeout:g}s"
            )
        if b.error is not None:
            raise b.error
        meta = b._metadata(self._index, self._timestamp)
        assert meta is not None
        return meta

    get = result  # kafka-python spelling

    def exception(self, timeout: float | None = None) -> BaseException | None:
        try:
            self.result(timeout)
        except KafkaTimeoutError:
            if not self._batch.done:
                raise
            return self._batch.error
        except BaseException as exc:
            return exc
        return None

    def add_callback(self, fn: Callback) -> RecordFuture:
        """Call ``fn(metadata, error)`` on completion (on the I/O loop; at once if done)."""
        self._batch.add_callback(self._index, self._timestamp, fn)
        return self

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        b = self._batch
        if not b.done:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            if b.add_waiter(fut):
                yield from fut.__await__()
        return self.result(0)

    def __repr__(self) -> str:
        b = self._batch
        state = "pending" if not b.done else ("failed" if b.error else "done")
        return f"<RecordFuture {b.topic}-{b.partition} {state}>"


def delivery_error(batch: ProducerBatch, why: str) -> KafkaError:
    """A KafkaTimeoutError for records not delivered in time (names the partition)."""
    last = f"; last error: {batch.last_error}" if batch.last_error is not None else ""
    return KafkaTimeoutError(
        f"{batch.count or len(batch.values)} record(s) for "
        f"{batch.topic}-{batch.partition} {why}{last}"
    )
