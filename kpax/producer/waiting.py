"""Sends that wait for their topic's metadata, kept in call order per topic.

Role: a send to a topic the producer has no partition count for yet (a new
topic, one forgotten after ``metadata_max_idle_ms``), or to an explicit
partition beyond the count it knows (partitions added since), cannot be
appended at once. :class:`TopicWaits` keeps such sends in one FIFO per topic
and appends them, in the order they were made, as soon as the metadata allows
-- from the cluster's listener at the very metadata update that brings it
(:meth:`TopicWaits.drain`), so no later send can overtake them: the producer
publishes the topic's partition count (``publish(topic, n)``, after which
sends append directly, by the C send path too) only once the FIFO holds
nothing it could append. One task per waiting topic asks for its metadata
(with ``retry_backoff_ms`` backoff) while sends wait. (Each waiting send used
to look the metadata up on its own, and they landed in whatever order their
retries happened to end.)

Bounds, as the Java producer's ``max_block_ms``: a send fails with
KafkaTimeoutError when its topic is still unknown (or buffer memory still full)
that long after it was made; a non-retriable metadata error for the topic
(authorization, an invalid name) fails the topic's sends at once. A send to a
partition beyond the known count gets one metadata refresh made after it: if
the partition is still missing, it fails with the ValueError of
:func:`~kpax.producer.planning.check_partition`. Records waiting behind one
that waits for buffer memory wait too (a partition's records keep call order).

Every method runs on the producer's event loop.

Imports: kpax.cluster, kpax.producer.planning, kpax.proto,
the standard library.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from kpax.cluster.cluster import Cluster
from kpax.cluster.request_path import RetryPolicy
from kpax.producer.planning import check_partition
from kpax.proto.error_codes import UnknownTopicOrPartitionError
from kpax.proto.errors import KafkaError, KafkaTimeoutError, error_for_code

__all__ = ["Attempt", "TopicWaits"]

log = logging.getLogger("kpax.producer")

#: ``attempt(num_partitions)``: append the send's records and return its future,
#: None when buffer memory is full (called again once some is freed), or raise.
Attempt = Callable[[int], Any]


class _Entry:
    """One waiting send."""

    __slots__ = ("attempt", "deadline", "full_error", "future", "partition", "refreshed")

    def __init__(
        self,
        attempt: Attempt,
        partition: int | None,
        deadline: float,
        full_error: Callable[[], KafkaError],
        future: asyncio.Future[Any],
    ) -> None:
        self.attempt = attempt
        self.partition = partition
        self.deadline = deadline
        self.full_error = full_error
        self.future = future
        #: A metadata refresh made after the send has completed.
        self.refreshed = False

    def fail(self, exc: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(exc)


class _Queue:
    """The waiting sends of one topic, in call order, and the task that fetches
    the topic's metadata for them."""

    __slots__ = ("blocked", "entries", "last_error", "task")

    def __init__(self) -> None:
        self.entries: deque[_Entry] = deque()
        #: The first entry waits for buffer memory (those after it wait behind it).
        self.blocked = False
        self.last_error: KafkaError | None = None
        self.task: asyncio.Task[None] | None = None


class TopicWaits:
    """Per-topic FIFOs of sends waiting for metadata (see the module docstring)."""

    def __init__(
        self,
        cluster: Cluster,
        publish: Callable[[str, int], None],
        *,
        max_block_ms: int,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
    ) -> None:
        self.cluster = cluster
        self.publish = publish
        self.max_block_ms = max_block_ms
        #: The one backoff policy (kpax.cluster.request_path) paces the lookups.
        self._policy = RetryPolicy(retry_backoff_ms, retry_backoff_max_ms)
        self._queues: dict[str, _Queue] = {}
        self._memory: asyncio.Event | None = None
        self._closed: BaseException | None = None

    def __contains__(self, topic: object) -> bool:
        return topic in self._queues

    def topics(self) -> list[str]:
        """The topics with sends waiting."""
        return list(self._queues)

    async def wait(
        self,
        topic: str,
        attempt: Attempt,
        partition: int | None,
        full_error: Callable[[], KafkaError],
        deadline: float | None = None,
    ) -> Any:
        """Queue a send behind the topic's earlier waiting sends and return what
        its ``attempt`` returns once it could run (or raise what it raised, or the
        error that ended the wait). ``partition``: the send's explicit partition
        (None: the partitioner's choice, possible with any count); ``deadline``
        (``time.monotonic()``): when the wait ends, ``max_block_ms`` from now by
        default (a send deferred at its call passes its own)."""
        if self._closed is not None:
            raise self._closed
        loop = asyncio.get_running_loop()
        q = self._queues.get(topic)
        if q is None:
            q = self._queues[topic] = _Queue()
        if deadline is None:
            deadline = time.monotonic() + self.max_block_ms / 1000
        entry = _Entry(attempt, partition, deadline, full_error, loop.create_future())
        q.entries.append(entry)
        self.drain(topic)  # the metadata may allow it already
        q = self._queues.get(topic)
        if q is not None and (q.task is None or q.task.done()):
            q.task = asyncio.ensure_future(self._fetch(topic, q))
        return await entry.future

    def drain(self, topic: str) -> None:
        """Append, in call order, every waiting send of ``topic`` the metadata now
        allows; fail those whose time is up; publish the partition count once
        nothing appendable is left waiting. Synchronous: nothing else runs on the
        loop meanwhile (the cluster calls it from its metadata listener)."""
        q = self._queues.get(topic)
        if q is None:
            return
        now = time.monotonic()
        cluster = self.cluster
        # (what the first metadata said of every topic is not kept fresh: only
        # the topics refreshes ask for count)
        info = cluster.snapshot.topics.get(topic) if cluster.interested(topic) else None
        n = len(info.partitions) if info is not None and info.partitions else 0
        keep: deque[_Entry] = deque()
        blocked = False
        for e in q.entries:
            if e.future.done():  # the caller gave up (cancelled): nothing was appended
                continue
            if blocked:  # behind a send waiting for memory
                if now >= e.deadline:
                    e.fail(e.full_error())
                else:
                    keep.append(e)
                continue
            if n == 0:
                if now >= e.deadline:
                    e.fail(self._unknown_error(topic, q.last_error))
                else:
                    keep.append(e)
                continue
            if e.partition is not None and e.partition >= n:
                if e.refreshed or now >= e.deadline:
                    try:
                        check_partition(topic, e.partition, n)
                    except ValueError as exc:
                        e.fail(exc)
                else:
                    keep.append(e)
                continue
            try:
                result = e.attempt(n)
            except Exception as exc:
                e.fail(exc)
                continue
            if result is None:  # buffer memory full
                if now >= e.deadline:
                    e.fail(e.full_error())
                else:
                    blocked = True
                    keep.append(e)
                continue
            e.future.set_result(result)
        q.entries = keep
        q.blocked = blocked
        if n and not blocked:
            self.publish(topic, n)
        if not keep:
            del self._queues[topic]

    def _unknown_error(self, topic: str, last: KafkaError | None) -> KafkaTimeoutError:
        why = f": {last.message}" if last is not None else ""
        return KafkaTimeoutError(
            f"topic {topic!r} not present in metadata after {self.max_block_ms} ms "
            f"(max_block_ms){why}"
        )

    def memory_freed(self) -> None:
        """Buffer memory was released: sends waiting for it try again."""
        if self._memory is not None:
            self._memory.set()

    async def _fetch(self, topic: str, q: _Queue) -> None:
        """While ``topic`` has waiting sends: refresh its metadata (each refresh
        drains through the cluster's listener), back off while it is unknown,
        wait for memory when that is what they wait for."""
        unknown = 0  # rounds that found the topic unknown
        try:
            while self._queues.get(topic) is q:
                self.drain(topic)
                if self._queues.get(topic) is not q:
                    return
                left = min(e.deadline for e in q.entries) - time.monotonic()
                if left <= 0:
                    continue  # the drain fails what is due
                if q.blocked:
                    if self._memory is None:
                        self._memory = asyncio.Event()
                    self._memory.clear()
                    await _wait(self._memory.wait(), left)
                    continue
                marked = list(q.entries)
                try:
                    await asyncio.wait_for(self.cluster.refresh([topic]), left)
                except asyncio.TimeoutError:
                    continue
                except KafkaError as exc:
                    q.last_error = exc
                    log.debug("metadata for topic %r: %s", topic, exc)
                for e in marked:
                    e.refreshed = True
                self.drain(topic)
                if self._queues.get(topic) is not q:
                    return
                snapshot = self.cluster.snapshot
                if topic in snapshot.topics and snapshot.topics[topic].partitions:
                    continue  # known: the sends left wait for a partition or memory
                code = snapshot.topic_errors.get(topic)
                if code:
                    err = error_for_code(code)
                    if not err.retriable and not issubclass(err, UnknownTopicOrPartitionError):
                        self._fail(topic, q, err(f"metadata for topic {topic!r}"))
                        return
                    q.last_error = err(f"metadata for topic {topic!r}")
                left = min(e.deadline for e in q.entries) - time.monotonic()
                unknown += 1
                await asyncio.sleep(max(min(self._policy.delay(unknown), left), 0))
        except asyncio.CancelledError:
            self._fail(topic, q, self._closed or KafkaError("the producer stopped"))
            raise
        except Exception as exc:  # a bug must not leave a send waiting forever
            log.exception("waiting for the metadata of topic %r failed", topic)
            self._fail(topic, q, exc)

    def _fail(self, topic: str, q: _Queue, exc: BaseException) -> None:
        for e in q.entries:
            e.fail(exc)
        q.entries.clear()
        if self._queues.get(topic) is q:
            del self._queues[topic]

    def close(self, exc: BaseException) -> None:
        """Fail every waiting send with ``exc`` (the producer is closing), and
        every later one."""
        self._closed = exc
        for topic, q in list(self._queues.items()):
            self._fail(topic, q, exc)
            if q.task is not None and q.task is not _current_task():
                q.task.cancel()


async def _wait(aw: Any, timeout: float) -> None:
    try:
        await asyncio.wait_for(aw, timeout)
    except asyncio.TimeoutError:
        pass


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None
