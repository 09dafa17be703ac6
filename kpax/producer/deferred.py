"""The producer's sends that wait: for a topic's metadata or for buffer memory.

Role: what ``send`` / ``send_many`` of :class:`~kpax.producer.client.AsyncProducer`
(and the sync face's) do when a record cannot be buffered at the call: go on in
a task started at the call (:func:`defer`), behind the topic's earlier deferred
sends so that a topic's records are buffered in call order; wait for the
topic's partition count (kpax.producer.waiting) and for buffer memory, at most
``max_block_ms``; and the error of a send that waited too long
(:func:`memory_full_error`). Functions of the producer, none on the per-record
path of a send that is buffered at the call.

Imports: kpax.producer.{batch,fastpath,planning,sent}, kpax.proto.errors, kpax.proto.topic_names.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from kpax.producer.batch import BulkFuture, Callback, RecordFuture
from kpax.producer.fastpath import in_callbacks
from kpax.producer.planning import BulkPlan, PartitionNotInMetadata, explicit_partition
from kpax.producer.sent import Deferred, ManyDeferred
from kpax.proto.errors import ClientClosedError, IllegalStateError, KafkaTimeoutError
from kpax.proto.topic_names import check_topic

if TYPE_CHECKING:
    from kpax.producer.client import AsyncProducer

T = TypeVar("T")


def memory_full_error(
    p: AsyncProducer, topic: str, plan: BulkPlan | None = None, *, in_callback: bool = False
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
            f"buffer memory full (buffer_memory={p.config['buffer_memory']}) and send() "
            "called from the producer's I/O thread (a delivery callback), which would "
            f"block delivery; the record for topic {topic!r} was not buffered: send it "
            "from another thread or task, or raise buffer_memory",
            retriable=False,
        )
    else:
        err = KafkaTimeoutError(
            f"buffer_memory={p.config['buffer_memory']} full for {p._max_block:g}s "
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


def filled(p: AsyncProducer, plan: BulkPlan, n: int) -> bool | None:
    """``try_fill`` as a :func:`wait_memory` attempt: True when done, None to wait more."""
    return True if p._try_fill(plan, n) else None


async def wait_memory(
    p: AsyncProducer,
    topic: str,
    plan: BulkPlan | None,
    attempt: Callable[..., T | None],
    *args: Any,
    deadline: float | None = None,
) -> T:
    """The asyncio buffer-memory wait of ``send`` and ``send_many``:
    ``attempt(*args)`` each time memory is freed until it returns something
    other than None; after ``max_block_ms`` (or at ``deadline``, a
    ``time.monotonic()``) raise :func:`memory_full_error`.
    (The sync face waits on the accumulator's condition instead, with
    ``SyncFace._wait_until``.)"""
    if deadline is None:
        deadline = time.monotonic() + p._max_block
    event = p._memory_event
    assert event is not None
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise memory_full_error(p, topic, plan)
        event.clear()
        try:
            await asyncio.wait_for(event.wait(), remaining)
        except asyncio.TimeoutError:
            pass
        result = attempt(*args)
        if result is not None:
            return result


async def wait_and_append(  # noqa: PLR0917 - the arguments of send
    p: AsyncProducer,
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
    if p.closed:
        raise ClientClosedError("send() on a closed producer")
    if not p._started:
        await p.start()
    explicit = explicit_partition(partition)
    n = p.num_partitions.get(topic)

    def attempt(count: int) -> RecordFuture | None:
        return p._try_append(topic, value, key, partition, timestamp, headers, count)

    if n is not None and (explicit is None or explicit < n):  # known meanwhile
        fut = attempt(n)
        if fut is None:
            fut = await wait_memory(p, topic, None, attempt, n, deadline=deadline)
        return fut
    waited: RecordFuture = await p._waits.wait(
        topic, attempt, explicit, lambda: memory_full_error(p, topic), deadline
    )
    return waited


async def wait_and_fill(  # noqa: PLR0917 - the arguments of send_many
    p: AsyncProducer,
    topic: str,
    values: Sequence[Any],
    keys: Sequence[Any] | None,
    partition: int | None,
    timestamp: int | None,
    headers: Any,
    deadline: float | None = None,
) -> BulkFuture:
    """``send_many`` to a topic without a partition count yet (or to an
    explicit partition beyond it): as :func:`wait_and_append`, for the
    whole call (its records stay together, in order)."""
    check_topic(topic)
    if p.closed:
        raise ClientClosedError("send_many() on a closed producer")
    if not p._started:
        await p.start()
    explicit = explicit_partition(partition)
    n = p.num_partitions.get(topic)
    if n is not None and (explicit is None or explicit < n):  # known meanwhile
        plan = p._plan_many(topic, values, keys, partition, timestamp, headers, n)
        if not p._try_fill(plan, n):
            await wait_memory(p, topic, plan, filled, p, plan, n, deadline=deadline)
        return BulkFuture(topic, len(values), plan.timestamp, plan.segments)
    planned: list[tuple[BulkPlan, int]] = []  # (the plan, the count it was made with)

    def attempt(count: int) -> BulkFuture | None:
        if not planned:
            plan = p._plan_many(topic, values, keys, partition, timestamp, headers, count)
            planned.append((plan, count))
        plan, count = planned[0]
        if not p._try_fill(plan, count):
            return None  # resumes where it stopped once memory is freed
        return BulkFuture(topic, len(values), plan.timestamp, plan.segments)

    def full() -> KafkaTimeoutError:
        return memory_full_error(p, topic, planned[0][0] if planned else None)

    fut: BulkFuture = await p._waits.wait(topic, attempt, explicit, full, deadline)
    return fut


async def send_many_later(  # noqa: PLR0917 - send_many's arguments
    p: AsyncProducer,
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
    its turn: see :func:`defer`): a topic without a partition count yet (or
    an explicit partition beyond it) waits for its metadata in
    kpax.producer.waiting, then buffer memory."""
    if plan is None:
        if not p._started:
            await p.start()
        known = p.num_partitions.get(topic)  # (known meanwhile?)
        if known is not None:
            n = known
            try:
                plan = p._plan_many(topic, values, keys, partition, timestamp, headers, n)
            except PartitionNotInMetadata:
                plan = None
        if plan is None:
            many = await wait_and_fill(
                p, topic, values, keys, partition, timestamp, headers, deadline
            )
            if callback is not None:
                many.add_callback(callback)
            return many
    if not p._try_fill(plan, n):
        await wait_memory(p, topic, plan, filled, p, plan, n, deadline=deadline)
    fut = BulkFuture(topic, len(values), plan.timestamp, plan.segments)
    if callback is not None:
        fut.add_callback(callback)
    return fut


async def send_later(  # noqa: PLR0917 - send's arguments
    p: AsyncProducer,
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
    :func:`defer`): a topic without a partition count yet (or an explicit
    partition beyond it) waits for its metadata in kpax.producer.waiting,
    then buffer memory."""
    if not p._started:
        await p.start()
    n = p.num_partitions.get(topic)  # (known meanwhile?)
    fut: RecordFuture | None = None
    if n is not None:
        try:
            fut = p._try_append(topic, value, key, partition, timestamp, headers, n)
        except PartitionNotInMetadata:
            n = None
    if n is None:
        fut = await wait_and_append(p, topic, value, key, partition, timestamp, headers, deadline)
    elif fut is None:
        fut = await wait_memory(
            p,
            topic,
            None,
            p._try_append,
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


def defer(
    p: AsyncProducer,
    topic: str,
    what: str,
    later: Callable[..., Coroutine[Any, Any, T]],
    *args: Any,
) -> Deferred:
    """Go on with a send that cannot be buffered at the call in a task started
    now: ``later(p, deadline, *args)`` (``deadline``: ``max_block_ms`` from now),
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
    prev = p._deferred.get(topic)
    deadline = time.monotonic() + p._max_block
    task = loop.create_task(in_turn(p, prev, topic, later, p, deadline, *args))
    p._deferred[topic] = task
    if p._aio_appender is not None:
        p._aio_appender.enabled = False
    if what == "send":
        return Deferred(task, not in_callbacks(), topic)
    return ManyDeferred(task, not in_callbacks(), topic)


async def in_turn(
    p: AsyncProducer,
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
        if p._deferred.get(topic) is asyncio.current_task():
            del p._deferred[topic]
            if not p._deferred and not p.closed and p._aio_appender is not None:
                p._aio_appender.enabled = True
