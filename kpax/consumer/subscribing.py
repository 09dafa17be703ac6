"""A consumer's subscription: ``subscribe`` and ``unsubscribe``.

Role: the bodies of :meth:`AsyncConsumer.subscribe
<kpax.consumer.client.AsyncConsumer.subscribe>` (topic names or a pattern, to the
group; or, without ``group_id``, every partition of the named topics, looked up
in a task) and ``unsubscribe`` (leave the group, which commits what was
processed, and drop every partition), with the IllegalStateErrors of mixing
``assign``, names and a pattern.

Imports: kpax.consumer.{pattern,state}, kpax.event_loops, kpax.proto, kpax.structs.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Iterable
from typing import TYPE_CHECKING, Any

from kpax.consumer.pattern import subscribe_args
from kpax.consumer.state import PartitionState
from kpax.event_loops import DONE
from kpax.proto.errors import IllegalStateError
from kpax.proto.topic_names import check_topic
from kpax.structs import TopicPartition

if TYPE_CHECKING:
    from kpax.consumer.client import AsyncConsumer

log = logging.getLogger("kpax.consumer")


def subscribe(
    c: AsyncConsumer,
    topics: Iterable[str] | re.Pattern[str] | None,
    listener: Any,
    pattern: str | re.Pattern[str] | None,
) -> Awaitable[None]:
    """``c.subscribe(...)`` (see its docstring)."""
    names, regex = subscribe_args(topics, pattern)
    c._check()
    if c._manual:
        raise IllegalStateError("subscribe() after assign(): call unsubscribe() first")
    if c.group is None:
        if regex is not None:
            raise IllegalStateError(
                "subscribe(pattern=...) needs a group_id (without one, subscribe to "
                "topic names: every partition of them is read)"
            )
        assert names is not None
        if not names:
            return asyncio.ensure_future(c.unsubscribe())
        return subscribe_unmanaged(c, names)
    if regex is not None:
        if c._subscribed:
            raise IllegalStateError(
                "subscribe(pattern=...) after subscribing to topics: call unsubscribe() first"
            )
        c.group.subscribe_pattern(regex)  # a bad regex fails here
        c.listener = listener
        c._pattern = regex
        return DONE
    assert names is not None
    if not names:
        return asyncio.ensure_future(c.unsubscribe())
    if c._pattern is not None:
        raise IllegalStateError(
            "subscribe(topics) after subscribe(pattern=...): call unsubscribe() first"
        )
    c.listener = listener
    c._subscribed = names
    c.group.subscribe(names)
    return DONE


def subscribe_unmanaged(c: AsyncConsumer, names: list[str]) -> asyncio.Task[None]:
    """``subscribe(topics)`` without a group: every partition of ``topics``,
    looked up in a task (the result of ``subscribe``)."""
    for name in names:
        check_topic(name)
    c._subscribed = list(names)
    c.listener = None

    async def assign_all() -> None:
        wanted: set[TopicPartition] = set()
        for name in names:
            parts = await c.cluster.partitions(name, timeout=c._api_timeout)
            wanted.update(TopicPartition(name, p) for p in parts)
        if c._subscribed != names or c._closed:
            return  # subscribed to something else meanwhile
        c._member._remove_partitions(set(c.states) - wanted)
        for tp in wanted - set(c.states):
            c.states[tp] = PartitionState(tp)  # auto_offset_reset says where
        log.info("reading every partition of %s without a group: %d", names, len(wanted))
        c._wake_fetcher()

    return asyncio.ensure_future(assign_all())


async def unsubscribe(c: AsyncConsumer) -> None:
    """``c.unsubscribe()``."""
    c._check()
    if c.group is not None and c._is_subscribed:
        c._leaving = True
        try:
            await c.group.leave()
        finally:
            c._leaving = False
        await c.group.stop_tasks()
        cls = type(c.group)
        c.group = cls(c.cluster, c.settings, c._member)
        c._handout_identity = None
    c.cluster.all_topics = False  # a pattern's metadata of every topic
    c._subscribed = []
    c._pattern = None
    c._manual = False
    c._member._remove_partitions(set(c.states))
