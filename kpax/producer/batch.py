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
Its state (open, sealed, in flight, waiting for a retry, split, done...) is
one machine, :mod:`kpax.producer.batch_state`; :meth:`ProducerBatch.fire` is
the only code that moves it.
A batch the broker refused as too large is split (:mod:`kpax.producer.split`):
it keeps its futures, completes when its ``parts`` have, and each record's
offset or error is its part's.

Thread model: records are appended by caller threads under the accumulator's
lock; a batch is completed exactly once, on the producer's I/O loop. Callbacks
``fn(metadata, error)`` run on the I/O loop (as the Java client's do): keep
them short and never block there.

Imports: kpax.producer.{batch_state,fastpath}, kpax.machines, kpax.structs, kpax.proto (records,
errors), the standard library.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import threading
import time
from collections.abc import Callable, Generator, Sequence
from inspect import CO_VARARGS
from types import MethodType
from typing import TYPE_CHECKING, Any

from kpax.machines import refusal
from kpax.producer.batch_state import TRANSITIONS, BatchEvent, BatchState
from kpax.producer.fastpath import BatchBase, FutureBase, enter_callbacks, leave_callbacks
from kpax.proto.errors import KafkaError, KafkaTimeoutError
from kpax.proto.records import Header
from kpax.structs import RecordMetadata

if TYPE_CHECKING:
    from kpax.producer.weights import Segment

Callback = Callable[[RecordMetadata | None, BaseException | None], Any]

_log = logging.getLogger("kpax.producer")
_OPEN, _DONE = BatchState.OPEN, BatchState.DONE
_SUCCEED, _FAIL = BatchEvent.SUCCEED, BatchEvent.FAIL

__all__ = ["BulkFuture", "Callback", "ProducerBatch", "RecordFuture", "bad_callback"]


class ProducerBatch(BatchBase):
    """One partition's batch (see the module docstring). Its columns
    (values, keys, timestamps, headers, size) live in :class:`BatchBase`, a C
    struct when the C send path is built."""

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
        "last_error",
        "log_append_time",
        "maybe_written",
        "parent",
        "partition",
        "parts",
        "producer_epoch",
        "producer_id",
        "resequenced",
        "reserved",
        "retry_at",
        "rolled",
        "seal_error",
        "serial",
        "state",
        "topic",
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
        #: The size its reserved memory holds (``reserved`` less the batch
        #: header): a record past it grows the reservation or closes the batch.
        self.cap = 0
        self.created = created
        self.reserved = reserved
        self.serial = serial
        #: Opened by the record that did not fit in the partition's full batch.
        self.rolled = False
        self.data: bytes | None = None
        self.count = 0
        self.attempts = 0
        self.retry_at = 0.0
        self.base_sequence = -1
        self.producer_id = -1
        self.producer_epoch = -1
        #: An attempt with this producer id and epoch had an unknown outcome (it
        #: may have been written): its sequence numbers are never given back.
        self.maybe_written = False
        #: The attempt in flight carries sequence numbers given back since (an
        #: earlier batch failed unwritten): its sequence error is expected.
        self.resequenced = False
        self.last_error: BaseException | None = None
        #: Where the batch is (kpax.producer.batch_state); changed by :meth:`fire` only.
        self.state = _OPEN
        #: ``state`` is DONE or FAILED (a plain bool, read per record on any thread).
        self.done = False
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        #: Why the batch could not be encoded (it then fails without being sent).
        self.seal_error: BaseException | None = None
        #: Split (the broker refused it as too large; kpax.producer.split): its
        #: parts as (index of the part's first record here, part); None if not split.
        self.parts: list[tuple[int, ProducerBatch]] | None = None
        #: The batch this one is a part of (None: a batch of its own).
        self.parent: ProducerBatch | None = None

    def __repr__(self) -> str:
        return (
            f"<ProducerBatch {self.topic}-{self.partition} serial={self.serial} "
            f"seq={self.base_sequence} {self.state.name}>"
        )

    def _refused(self, event: BatchEvent) -> BaseException:
        """The error of ``event``, which the batch's state does not allow."""
        subject = f"the batch {self.topic}-{self.partition} (serial {self.serial})"
        return refusal(event, self.state, subject, note="; this is a bug in kpax")

    def fire(self, event: BatchEvent) -> BatchState:
        """Move the batch on ``event`` (:data:`~kpax.producer.batch_state.TRANSITIONS`);
        IllegalStateError if its state does not allow it. The one place that
        changes ``state`` (and ``done``). Returns the new state."""
        try:
            new = TRANSITIONS[self.state][event]
        except KeyError:
            raise self._refused(event) from None
        self.state = new
        if new >= _DONE:
            self.done = True
        return new

    # ------------------------------------------------------------ completion (I/O loop)

    def complete(self, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        """Set the outcome once; wake blocking waiters, awaiting tasks and callbacks.
        A success the batch's state does not allow (a bug) fails it instead: its
        futures are completed whatever happens."""
        with self._lock:
            if self.done:
                return  # (a late answer for a batch that expired in flight)
            if error is None and _SUCCEED not in TRANSITIONS[self.state]:
                error = self._refused(_SUCCEED)
                _log.error("%s", error)
            self.fire(_SUCCEED if error is None else _FAIL)
            self.base_offset = base_offset
            self.log_append_time = log_append_time
            self.error = error
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
            # (marked as delivery callbacks: a send made in one must not wait for
            # buffer memory, and is not warned about when never awaited)
            enter_callbacks()
            try:
                for index, ts, fn in callbacks:
                    err = error if error is None else self.record_error(index)
                    _run_callback(fn, self._metadata(index, ts), err)
            finally:
                leave_callbacks()

    def _part(self, index: int) -> tuple[ProducerBatch, int]:
        """The part of a split batch holding record ``index``, and its index there."""
        assert self.parts is not None
        start, part = self.parts[0]
        for s, p in self.parts:
            if s > index:
                break
            start, part = s, p
        return part, index - start

    def record_error(self, index: int) -> BaseException | None:
        """Record ``index``'s error (done batch): the batch's, or its part's if split."""
        if self.parts is None or self.error is None:
            return self.error
        part, i = self._part(index)
        return part.record_error(i)

    def _metadata(self, index: int, timestamp: int) -> RecordMetadata | None:
        if self.parts is not None:
            part, i = self._part(index)
            return part._metadata(i, timestamp)
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
        _log.exception("producer callback %r raised", fn)


class RecordFuture(FutureBase):
    """The outcome of one ``send``: :meth:`result` blocks (sync face), ``await``
    works in asyncio; :meth:`add_callback` registers ``fn(metadata, error)``.
    ``RecordFuture(batch, index, timestamp)``: its three fields live in
    :class:`FutureBase` (a C struct when the C send path is built)."""

    __slots__ = ()
    _batch: ProducerBatch

    #: The record's position in its batch (read only): 0 when its send opened a
    #: new batch. The base's own field under a public name, as cheap to read.
    if TYPE_CHECKING:
        batch_index: int
    else:
        batch_index = FutureBase._index

    def done(self) -> bool:
        """Is the record's outcome known (acknowledged or failed)?"""
        return self._batch.done

    def succeeded(self) -> bool:
        """Was the record acknowledged (False while pending)?"""
        b = self._batch
        return b.done and (b.error is None or b.record_error(self._index) is None)

    def failed(self) -> bool:
        """Did the record fail (False while pending)?"""
        b = self._batch
        return b.done and b.error is not None and b.record_error(self._index) is not None

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """Where the record landed; raises the delivery error, or KafkaTimeoutError
        if the outcome is not known within ``timeout`` seconds."""
        b = self._batch
        if not b.done and not b.wait(timeout):
            raise KafkaTimeoutError(
                f"record for {b.topic}-{b.partition} not acknowledged within {timeout:g}s"
            )
        if b.error is not None:
            err = b.record_error(self._index)  # a split batch's parts may differ
            if err is not None:
                raise err
        meta = b._metadata(self._index, self._timestamp)
        assert meta is not None
        return meta

    get = result  # kafka-python spelling

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The error ``result`` would raise (None on success), waiting at most
        ``timeout`` seconds for the outcome (KafkaTimeoutError if not known)."""
        try:
            self.result(timeout)
        except KafkaTimeoutError:
            if not self._batch.done:
                raise
            return self._batch.record_error(self._index)
        except BaseException as exc:
            return exc
        return None

    def add_callback(self, fn: Callback) -> RecordFuture:
        """Call ``fn(metadata, error)`` on completion (on the I/O loop; at once if done).
        A function whose first parameter is named ``err``/``error`` (confluent-kafka's
        ``on_delivery(err, msg)``) is called as ``fn(error, metadata)``."""
        if not callable(fn):
            raise bad_callback(fn)
        self._batch.add_callback(self._index, self._timestamp, delivery_callback(fn))
        return self

    def add_errback(self, fn: Callable[[BaseException], Any]) -> RecordFuture:
        """kafka-python's ``add_errback``: ``fn(error)`` if the record fails (on the
        I/O loop; at once if it already has)."""
        if not callable(fn):
            raise bad_callback(fn)
        self._batch.add_callback(
            self._index,
            self._timestamp,
            lambda meta, error: fn(error) if error is not None else None,
        )
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


class BulkFuture:
    """The outcome of one ``send_many``: one object for all its records.

    ``result(timeout)`` blocks until every batch holding them is done and
    returns how many were delivered, or raises the first delivery error (its
    class kept, its message naming the topic-partition and how many records
    failed) or KafkaTimeoutError; ``await fut`` does the same in asyncio.
    ``metadata()`` builds the per-record :class:`RecordMetadata` list (call
    order) only when asked. Completion is per batch: nothing per record."""

    __slots__ = ("_batches", "_error", "_meta", "_segments", "_timestamp", "count", "topic")

    def __init__(self, topic: str, count: int, timestamp: int, segments: list[Segment]) -> None:
        self.topic = topic
        #: Records covered (the length of the ``values`` given to ``send_many``).
        self.count = count
        self._timestamp = timestamp
        self._segments = segments
        self._batches = list(dict.fromkeys(seg[0] for seg in segments))
        self._error: BaseException | None = None
        self._meta: list[RecordMetadata] | None = None

    def done(self) -> bool:
        """Is the outcome of every record known?"""
        return all(b.done for b in self._batches)

    @property
    def failed_count(self) -> int:
        """Records whose batch failed (so far: pending batches count as not failed)."""
        return sum(
            _failed_in(b, start, hi - lo)
            for b, start, _, lo, hi in self._segments
            if b.done and b.error is not None
        )

    def _wait(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        for b in self._batches:
            if b.done:
                continue
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not b.wait(left):
                pending = sum(hi - lo for b2, _, _, lo, hi in self._segments if not b2.done)
                raise KafkaTimeoutError(
                    f"{pending} of {self.count} record(s) for topic {self.topic!r} "
                    f"not acknowledged within {timeout:g}s"
                )

    def _failure(self) -> BaseException | None:
        if self._error is not None:
            return self._error
        first: ProducerBatch | None = None
        cause: BaseException | None = None
        failed = 0
        for b, start, _, lo, hi in self._segments:
            if b.error is not None:
                n = _failed_in(b, start, hi - lo)
                failed += n
                if first is None and n:
                    first = b
                    cause = next(
                        e
                        for e in map(b.record_error, range(start, start + hi - lo))
                        if e is not None
                    )
        if first is None or cause is None:
            return None
        msg = (
            f"{failed} of {self.count} record(s) for topic {self.topic!r} failed; first failure "
            f"on {first.topic}-{first.partition}: "
            f"{cause.message if isinstance(cause, KafkaError) else cause}"
        )
        err: BaseException
        try:  # keep the class (callers catch e.g. TransactionAbortedError), new message
            err = copy.copy(cause)
            err.args = (msg,)
            if isinstance(err, KafkaError):
                err.message = msg
        except Exception:
            err = KafkaError(msg)
        err.__cause__ = cause
        self._error = err
        return err

    def result(self, timeout: float | None = None) -> int:
        """The number of records delivered; raises the first delivery error, or
        KafkaTimeoutError if some outcome is not known within ``timeout`` seconds."""
        self._wait(timeout)
        err = self._failure()
        if err is not None:
            raise err
        return self.count

    get = result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The error ``result`` would raise (None on success); KafkaTimeoutError
        is raised, not returned, if the outcome is not known in time."""
        self._wait(timeout)
        return self._failure()

    def metadata(self, timeout: float | None = None) -> list[RecordMetadata]:
        """Where each record landed, in the order given to ``send_many`` (built
        on the first call); raises as :meth:`result` does."""
        self.result(timeout)
        if self._meta is None:
            out: list[Any] = [None] * self.count
            ts = self._timestamp
            for b, start, col, lo, hi in self._segments:
                positions = col.positions
                for k in range(hi - lo):
                    where = col.base + lo + k if positions is None else positions[lo + k]
                    out[where] = b._metadata(start + k, ts)
            self._meta = out
        return self._meta

    def add_callback(self, fn: Callback) -> BulkFuture:
        """Call ``fn(metadata, error)`` once per record, as ``send``'s callback
        (on the I/O loop; at once for records already done)."""
        if not callable(fn):
            raise bad_callback(fn)
        fn = delivery_callback(fn)
        ts = self._timestamp
        for b, start, _, lo, hi in self._segments:
            for k in range(start, start + hi - lo):
                b.add_callback(k, ts, fn)
        return self

    def __await__(self) -> Generator[Any, None, int]:
        pending = [b for b in self._batches if not b.done]
        if pending:
            loop = asyncio.get_running_loop()
            waiters = []
            for b in pending:
                fut: asyncio.Future[None] = loop.create_future()
                if b.add_waiter(fut):
                    waiters.append(fut)
            for w in waiters:
                yield from w.__await__()
        return self.result(0)

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        state = "pending" if not self.done() else ("failed" if self.failed_count else "done")
        return (
            f"<BulkFuture {self.topic} {self.count} record(s) "
            f"in {len(self._batches)} batch(es) {state}>"
        )


#: First parameter names that say a callback takes the error first, as
#: confluent-kafka's ``on_delivery(err, msg)`` does.
_ERROR_FIRST = frozenset({"err", "error", "exc", "exception", "e"})


def delivery_callback(fn: Callback) -> Callback:
    """``fn`` as kpax calls a delivery callback, ``(metadata, error)``: a function
    written the confluent-kafka way, its first parameter named ``err`` (or
    ``error``, ``exc``, ``exception``, ``e``), gets ``(error, metadata)`` instead, so
    its ``if err:`` means what it says (called the other way, it reported every
    success as a failure); one of a single parameter (kafka-python's
    ``add_callback(fn(metadata))``) gets the metadata of a success only."""
    code = getattr(fn, "__code__", None)  # (a bound method's too)
    if code is None:
        return fn
    first = 1 if type(fn) is MethodType else 0  # past a bound method's self
    if code.co_argcount > first + 1 and code.co_varnames[first] in _ERROR_FIRST:
        return lambda meta, error: fn(error, meta)  # type: ignore[arg-type]
    if code.co_argcount == first + 1 and not code.co_flags & CO_VARARGS:
        # kafka-python's add_callback(fn(metadata)): called on success only
        return lambda meta, error: fn(meta) if error is None else None  # type: ignore[call-arg]
    return fn


def bad_callback(fn: Any) -> TypeError:
    """The TypeError of a callback that cannot be called: ``send`` and
    ``send_many`` raise it at the call, before anything is buffered (it would
    fail on the I/O thread otherwise). The C send path's text is the same."""
    return TypeError(
        f"callback must be a callable fn(metadata, error), not {fn!r} ({type(fn).__name__})"
    )


def _failed_in(b: ProducerBatch, start: int, n: int) -> int:
    """How many of a failed batch's records ``start .. start + n - 1`` failed (all,
    unless it was split and some of its parts succeeded)."""
    if b.parts is None:
        return n
    return sum(1 for i in range(start, start + n) if b.record_error(i) is not None)


def delivery_error(batch: ProducerBatch, why: str) -> KafkaError:
    """A KafkaTimeoutError for records not delivered in time (names the partition)."""
    err = batch.last_error
    last = ""
    if err is not None:  # its message only: the error made here says if retrying can help
        text = err.message if isinstance(err, KafkaError) and err.message else str(err)
        last = f"; last error: {text}"
    return KafkaTimeoutError(
        f"{batch.count or len(batch.values)} record(s) for "
        f"{batch.topic}-{batch.partition} {why}{last}"
    )
