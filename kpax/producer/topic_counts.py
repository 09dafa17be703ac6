"""The producer's topics: each one's partition count, and when to forget it.

Role: :class:`TopicCounts` owns ``counts`` (topic -> partition count, the
``num_partitions`` every send reads, from any thread without a lock) and the
sends waiting for a topic's metadata (kpax.producer.waiting's
:class:`~kpax.producer.waiting.TopicWaits`). A topic enters ``counts`` once its
metadata is known and no send to it waits (:meth:`TopicCounts.publish`); every
metadata update moves the counts (:meth:`TopicCounts.on_metadata`, the
cluster's listener); before each refresh the topics idle for
``metadata_max_idle_ms`` are forgotten (:meth:`TopicCounts.forget_idle`).
:meth:`TopicCounts.wait_topic` is ``AsyncProducer.wait_topic``.

Imports: kpax.cluster, kpax.producer.{accumulator,options,waiting}, kpax.proto.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from kpax.cluster.cluster import Cluster
from kpax.producer.accumulator import Accumulator
from kpax.producer.options import ProducerSettings
from kpax.producer.waiting import TopicWaits
from kpax.proto.error_codes import UnknownTopicOrPartitionError
from kpax.proto.errors import KafkaError, KafkaTimeoutError
from kpax.proto.topic_names import check_topic

log = logging.getLogger("kpax.producer")


class TopicCounts:
    """Partition counts of the topics a producer sends to (module docstring)."""

    def __init__(
        self,
        cluster: Cluster,
        accumulator: Accumulator,
        settings: ProducerSettings,
        active: Callable[[], bool],
    ) -> None:
        self.cluster = cluster
        self.accumulator = accumulator
        #: Whether the producer is started and not closed (idle topics are
        #: forgotten only then).
        self.active = active
        self.retry_backoff = settings.retry_backoff_ms / 1000
        self.max_block = settings.max_block_ms / 1000
        #: topic -> partition count (read by caller threads without a lock).
        #: A topic enters once its metadata is known and no send to it waits
        #: (kpax.producer.waiting); every metadata update changes its count.
        self.counts: dict[str, int] = {}
        #: Sends waiting for their topic's metadata, in call order per topic.
        self.waits = TopicWaits(
            cluster,
            self.publish,
            max_block_ms=settings.max_block_ms,
            retry_backoff_ms=settings.retry_backoff_ms,
            retry_backoff_max_ms=settings.retry_backoff_max_ms,
        )
        #: topic -> when its partition count was published (its first use, or
        #: the first after it was forgotten): with its batches' opening times,
        #: what ``metadata_max_idle_ms`` is measured from.
        self.published_at: dict[str, float] = {}
        self.max_idle = settings.metadata_max_idle_ms / 1000 + settings.linger_ms / 1000
        cluster.add_listener(self.on_metadata)
        cluster.before_refresh = self.forget_idle

    def publish(self, topic: str, n: int) -> None:
        """``topic`` has ``n`` partitions and no send to it waits: from now on
        sends append directly (kpax.producer.waiting calls it once the topic's
        waiting sends are appended)."""
        if topic not in self.counts:
            self.published_at[topic] = time.monotonic()
        self.counts[topic] = n

    def on_metadata(self) -> None:
        """After every metadata update (periodic or not; the cluster's listener):
        each known topic's partition count follows the metadata, as the Java
        producer's does -- partitions added to a topic take keyed records
        (murmur2 modulo the new count) and keyless ones at once -- and sends
        waiting for a topic's metadata are appended (in call order) before its
        count changes."""
        topics = self.cluster.snapshot.topics
        waits = self.waits
        counts = self.counts
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

    def forget_idle(self) -> None:
        """Before each metadata refresh: forget the topics not sent to for
        ``metadata_max_idle_ms`` (Java's rule) with nothing of them buffered or
        in flight -- the refresh no longer names them (so auto-creation does
        not re-create a deleted one) and their per-topic state goes; a later
        send looks the topic up again."""
        if not self.active():
            return
        now = time.monotonic()
        limit = self.max_idle
        cluster = self.cluster
        published = self.published_at
        candidates = [
            t
            for t in cluster.interest
            if now - max(published.get(t, 0.0), cluster.asked_at(t)) >= limit
            and t not in self.waits
        ]
        if not candidates:
            return
        forgotten = self.accumulator.forget_idle_topics(candidates, now - limit)
        for t in forgotten:
            self.counts.pop(t, None)
            self.published_at.pop(t, None)
        if forgotten:
            cluster.forget(forgotten)
            log.debug("forgot %d topic(s) idle for metadata_max_idle_ms", len(forgotten))

    async def wait_topic(self, topic: str, timeout: float | None = None) -> int:
        """The partition count of ``topic``, waiting up to ``timeout`` (default
        ``max_block_ms``) for its metadata; KafkaTimeoutError names the topic,
        InvalidTopicError a name Kafka would refuse (at once)."""
        n = self.counts.get(topic)
        if n is not None:
            return n
        check_topic(topic)
        limit = self.max_block if timeout is None else timeout
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
                await asyncio.sleep(min(remaining, self.retry_backoff))
        n = len(info.partitions)
        if topic not in self.waits:  # (else its waiting sends go first: they publish it)
            self.publish(topic, n)
        return n
