"""The producer's appends through serializers that take a SerializationContext.

Role: a producer whose key or value serializer takes the record's topic and
headers (a :class:`~kpax.producer.serializers.SerializationContext`) gets these
as its ``_try_append`` and ``_plan_many`` (bound at its construction): they
serialize with the context and hand the plain path bytes, so a producer
without such serializers pays nothing per record.

Imports: kpax.producer.{planning,batch,serializers}.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kpax.producer.batch import RecordFuture
from kpax.producer.planning import BulkPlan
from kpax.producer.serializers import SerializationContext

if TYPE_CHECKING:
    from kpax.producer.client import AsyncProducer


def try_append_ctx(  # noqa: PLR0917 - try_append's arguments
    p: AsyncProducer,
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
    assert p._ctx_sers is not None
    kser, vser = p._ctx_sers
    if kser is not None:
        key = kser(key, SerializationContext(topic, "key", headers))
    if vser is not None:
        value = vser(value, SerializationContext(topic, "value", headers))
    return type(p)._try_append(p, topic, value, key, partition, timestamp, headers, n)


def plan_many_ctx(  # noqa: PLR0917 - plan_many's arguments
    p: AsyncProducer,
    topic: str,
    values: Sequence[Any],
    keys: Sequence[Any] | None,
    partition: int | None,
    timestamp: int | None,
    headers: Any,
    n: int,
) -> BulkPlan:
    """``plan_many`` with serializers that take a SerializationContext."""
    assert p._ctx_sers is not None
    kser, vser = p._ctx_sers
    if vser is not None:
        ctx = SerializationContext(topic, "value", headers)
        values = [vser(v, ctx) for v in values]
    if kser is not None and keys is not None:
        ctx = SerializationContext(topic, "key", headers)
        keys = [kser(k, ctx) for k in keys]
    return type(p)._plan_many(p, topic, values, keys, partition, timestamp, headers, n)
