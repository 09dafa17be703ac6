"""``send_many`` of the asyncio producer: buffer a whole call at once, or defer it.

Role: the body of :meth:`AsyncProducer.send_many
<kpax.producer.client.AsyncProducer.send_many>`: plan the call
(kpax.producer.planning, through the producer's ``_plan_many``) and append it
(``_try_fill``) when the topic's partition count is known and memory allows;
else go on in a task in the topic's turn (kpax.producer.deferred). Per call,
never per record.

Imports: kpax.producer.{batch,deferred,fastpath,planning,sent}, kpax.proto.topic_names.
"""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from kpax.producer.batch import BulkFuture, Callback, bad_callback
from kpax.producer.deferred import defer, memory_full_error, send_many_later
from kpax.producer.fastpath import in_callbacks
from kpax.producer.planning import BulkPlan, PartitionNotInMetadata
from kpax.producer.sent import ManySent
from kpax.proto.topic_names import check_topic

if TYPE_CHECKING:
    from kpax.producer.client import AsyncProducer


def send_many(  # noqa: PLR0917 - send_many's arguments
    p: AsyncProducer,
    topic: str,
    values: Sequence[Any],
    keys: Sequence[Any] | None,
    partition: int | None,
    timestamp: int | None,
    headers: Any,
    callback: Callback | None,
) -> Coroutine[Any, Any, BulkFuture]:
    """``p.send_many(...)`` (see its docstring)."""
    if callback is not None and not callable(callback):
        raise bad_callback(callback)
    plan: BulkPlan | None = None
    n = 0
    if topic not in p._deferred:
        count = p.num_partitions.get(topic)
        if count is not None:
            try:
                plan = p._plan_many(topic, values, keys, partition, timestamp, headers, count)
                n = count
            except PartitionNotInMetadata:  # added since? (deferred: a refresh first)
                plan = None
        else:
            check_topic(topic)  # (at the call: a name Kafka would refuse never waits)
        if plan is not None:
            if p._try_fill(plan, n):
                fut = BulkFuture(topic, len(values), plan.timestamp, plan.segments)
                if callback is not None:
                    fut.add_callback(callback)
                # (pause: the sender's turn once awaited, as in send)
                return ManySent(fut, True, not in_callbacks(), topic)
            if in_callbacks():
                raise memory_full_error(p, topic, plan, in_callback=True)
            # buffer memory full after part of it (if any): the rest waits in turn
    elif in_callbacks() and topic in p.num_partitions:
        raise memory_full_error(p, topic, in_callback=True)  # (as in send)
    return defer(
        p,
        topic,
        "send_many",
        send_many_later,
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
