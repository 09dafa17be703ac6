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

Imports: kpax.producer.client, kpax.producer.batch, kpax.loop_thread, kpax.proto.errors.
"""

from __future__ import annotations

import time
from collections.abc import Coroutine, Mapping, Sequence
from types import TracebackType
from typing import Any

from kpax.loop_thread import LoopThread
from kpax.producer.batch import BulkFuture, Callback, RecordFuture
from kpax.producer.client import AsyncProducer
from kpax.proto.errors import ClientClosedError, KafkaTimeoutError
from kpax.structs import ConsumerGroupMetadata, OffsetAndMetadata

__all__ = ["Producer"]


def _yield() -> None:
    time.sleep(0)


class Producer:
    """``kpax.Producer("host:9092", acks="all", linger_ms=5)``; a context manager."""

    def __init__(self, bootstrap_servers: str | Sequence[str] | None = None, **config: Any) -> None:
        self._core = AsyncProducer(bootstrap_servers, **config)  # validates options first
        self.config = self._core.config
        self._thread = LoopThread("kpax-producer")
        self._closed = False
        self._max_block = self.config["max_block_ms"] / 1000
        self._nparts = self._core.num_partitions
        self._append = self._core._append
        try:
            self._thread.run(
                self._core.start(),
                self._max_block + self.config["request_timeout_ms"] / 1000,
                what="producer start",
            )
        except BaseException:
            self._thread.run(self._core.close(0), 5.0)
            self._thread.stop()
            raise
        # The C send path (kpax.producer.fastpath): this instance's ``send`` is
        # the C appender's, which hands anything but the common record to the
        # Python ``send`` below -- same arguments, same results.
        fast = self._core.new_appender(Producer.send.__get__(self))
        if fast is not None:
            self.__dict__["send"] = fast.send

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
        RecordMetadata). ``callback(metadata, error)`` runs on the I/O thread."""
        n = self._nparts.get(topic)
        if n is None:
            n = self._wait_topic(topic)
        fut = self._append(topic, value, key, partition, timestamp, headers, n)
        if fut is None:
            fut = self._wait_memory(topic, value, key, partition, timestamp, headers, n)
        elif fut._index == 0:
            _yield()  # a new batch: let the I/O thread take the GIL (see module docstring)
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
        n = self._nparts.get(topic)
        if n is None:
            n = self._wait_topic(topic)
        core = self._core
        plan = core._plan_many(topic, values, keys, partition, timestamp, headers, n)
        if not core._fill(plan, n):
            deadline = time.monotonic() + self._max_block
            acc = core.accumulator
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise core._memory_full(topic, plan)
                acc.wait_for_memory(min(remaining, 0.05))
                if core._fill(plan, n):
                    break
        if plan.segments and plan.segments[-1][1] == 0:
            _yield()  # a new batch: let the I/O thread take the GIL (as send does)
        fut = BulkFuture(topic, len(values), plan.timestamp, plan.segments)
        if callback is not None:
            fut.add_callback(callback)
        return fut

    def _wait_topic(self, topic: str) -> int:
        if self._closed:
            raise ClientClosedError("send() on a closed producer")
        return self._thread.run(
            self._core.wait_topic(topic), self._max_block + 5.0, what=f"metadata for {topic!r}"
        )

    def _wait_memory(  # noqa: PLR0917 - same arguments as AsyncProducer._append
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp: int | None,
        headers: Any,
        n: int,
    ) -> RecordFuture:
        deadline = time.monotonic() + self._max_block
        acc = self._core.accumulator
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._core._memory_full(topic)
            acc.wait_for_memory(min(remaining, 0.05))
            fut = self._append(topic, value, key, partition, timestamp, headers, n)
            if fut is not None:
                return fut

    def metrics(self) -> dict[str, float]:
        """``{metric-name: value}``: see :meth:`AsyncProducer.metrics` and
        docs/observability.md."""
        return self._core.metrics()

    def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered and wait for the outcome (KafkaTimeoutError
        after ``timeout`` seconds)."""
        if self._closed:
            return
        limit = None if timeout is None else timeout + 5.0
        self._thread.run(self._core.flush(timeout), limit, what="flush")

    # ------------------------------------------------------------ transactions
    # (see AsyncProducer: same methods, same semantics)

    def _txn_call(self, coro: Coroutine[Any, Any, None], timeout: float | None, what: str) -> None:
        if self._closed:
            coro.close()
            raise ClientClosedError(f"{what} on a closed producer")
        limit = (self._max_block if timeout is None else timeout) + 5.0
        self._thread.run(coro, limit, what=what)

    def init_transactions(self, timeout: float | None = None) -> None:
        self._txn_call(self._core.init_transactions(timeout), timeout, "init_transactions")

    def begin_transaction(self) -> None:
        self._core.begin_transaction()

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[Any, int | OffsetAndMetadata],
        group_metadata: ConsumerGroupMetadata | str,
        timeout: float | None = None,
    ) -> None:
        self._txn_call(
            self._core.send_offsets_to_transaction(offsets, group_metadata, timeout),
            timeout,
            "send_offsets_to_transaction",
        )

    def commit_transaction(self, timeout: float | None = None) -> None:
        self._txn_call(self._core.commit_transaction(timeout), timeout, "commit_transaction")

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._txn_call(self._core.abort_transaction(timeout), timeout, "abort_transaction")

    def partitions_for(self, topic: str) -> list[int]:
        return self._thread.run(
            self._core.partitions_for(topic), self._max_block + 5.0, what="partitions_for"
        )

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is buffered (at most ``timeout`` seconds), fail the rest with
        ClientClosedError, close connections and stop the I/O thread. Returns within
        ``timeout`` (plus a small margin for closing sockets)."""
        if self._closed:
            return
        self._closed = True
        try:
            limit = None if timeout is None else timeout + 2.0
            self._thread.run(self._core.close(timeout), limit, what="producer close")
        except KafkaTimeoutError:
            pass
        finally:
            self._thread.stop(2.0)

    def __enter__(self) -> Producer:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            try:
                self.close(0)
            except Exception:
                pass
