"""``kpax.Consumer``: the blocking face of :class:`kpax.consumer.client.AsyncConsumer`.

Role: the asyncio core runs on a :class:`~kpax.loop_thread.LoopThread`. The
hot path never crosses threads per record: the loop thread decodes fetches
into the :class:`~kpax.consumer.buffer.FetchBuffer`; ``poll()`` and
iteration take whole decoded chunks from it on the caller's thread (a
blocked caller is woken by a condition variable). Control calls (assign,
seek, commit, offsets lookups...) are handed to the loop and waited for.
Rebalance listener calls run on the caller's thread inside ``poll()`` /
iteration, as in the Java client, so a listener may call ``commit()``.

Not thread-safe for concurrent polling from several threads (neither is
Java's); other methods may be called from any thread.

Imports: kpax.consumer.client, kpax.consumer.*, kpax.sync_face,
kpax.structs, kpax.proto.errors, kpax.proto.topic_names, kpax.peer_methods.
"""

from __future__ import annotations

import concurrent.futures
import logging
import re
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from itertools import chain
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from kpax.consumer.client import AsyncConsumer
from kpax.consumer.options import ConsumerConfig
from kpax.consumer.partition_args import one_partition
from kpax.consumer.pattern import subscribe_args
from kpax.consumer.record import ConsumerRecord
from kpax.consumer.state import PartitionState
from kpax.peer_methods import CONSUMER, PeerHints
from kpax.proto.errors import ConfigError, KafkaTimeoutError
from kpax.proto.topic_names import check_topic
from kpax.structs import (
    ConsumerGroupMetadata,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
)
from kpax.sync_face import SyncFace

if TYPE_CHECKING:
    from typing_extensions import Unpack  # (typing's from Python 3.11)

log = logging.getLogger("kpax.consumer")

T = TypeVar("T")

__all__ = ["Consumer"]


class Consumer(PeerHints, SyncFace):
    """``kpax.Consumer("host:9092", group_id="g", auto_offset_reset="earliest")``.

    ``subscribe([...])`` or ``assign([...])``, then ``poll(timeout)`` (a list
    of :class:`ConsumerRecord`) or ``for rec in consumer``. A context manager.
    """

    _peer_methods = CONSUMER

    _call_what = "consumer call"
    _closed_text = "the consumer is closed"
    _client_name = "kpax.Consumer"

    def __init__(
        self,
        *topics: str,
        consumer_timeout_ms: float | None = None,
        **config: Unpack[ConsumerConfig],
    ) -> None:
        # kpax.Consumer("host:9092", ...) as the README shows; a first positional
        # argument containing ":" is the bootstrap list, the rest are topics.
        names: list[Any] = list(topics)
        options: dict[str, Any] = dict(config)
        bootstrap_servers = options.pop("bootstrap_servers", None)  # (given as a keyword)
        if names and isinstance(names[0], Mapping):
            # confluent-kafka's Consumer({"bootstrap.servers": ..., "group.id": ...})
            options = {**names.pop(0), **options}
        if bootstrap_servers is None and names and (":" in names[0] or "," in names[0]):
            bootstrap_servers = names.pop(0)
        # Every argument is checked before the I/O thread starts: a refused one
        # leaves nothing running.
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"kpax.Consumer topics are str, not {type(name).__name__}")
            check_topic(name)
        if consumer_timeout_ms is not None and (
            isinstance(consumer_timeout_ms, bool)
            or not isinstance(consumer_timeout_ms, (int, float))
            or consumer_timeout_ms < 0
        ):
            raise ConfigError(
                f"consumer option consumer_timeout_ms={consumer_timeout_ms!r}: must be a "
                "number >= 0 (or None)"
            )
        core = self._core = AsyncConsumer(bootstrap_servers, **options)  # validates options first
        self._consumer_timeout = consumer_timeout_ms / 1000 if consumer_timeout_ms else None
        settings = core.settings
        margin = 5.0 + settings.request_timeout
        super().__init__("kpax-consumer", core._api_timeout, margin)
        self._max_records = settings.max_poll_records
        self._start(core.start(), margin + 30, "consumer start", lambda: core.close(5.0), 10.0)
        self._buffer = self._core.buffer
        fetcher = self._core.fetcher
        assert fetcher is not None
        loop = self._thread.loop
        max_chunks = settings.fetch_buffer_chunks

        def drained(st: PartitionState) -> None:
            if st.puts - st.takes == max_chunks - 1:
                loop.call_soon_threadsafe(fetcher.wake)

        self._buffer.on_drained = drained
        # Records are built on this (the caller's) thread, as it reads them, while the
        # I/O thread checks a whole response's batches without the GIL (Fetcher.walk_all).
        fetcher.walk_all = True
        self._core.listener_runner = self._buffer.call_in_app
        if names:
            try:
                self.subscribe(names)
            except BaseException:
                self.close(5.0)
                raise

    # ------------------------------------------------------------ plumbing

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        async def run() -> T:
            return fn(*args)

        return self._run(run())

    @property
    def aio(self) -> AsyncConsumer:
        """The asyncio core (for use on this consumer's own loop only)."""
        return self._core

    def close(self, timeout: float = 30.0, *, commit_in_hand: bool = True) -> None:
        """Commit (auto-commit), leave the group and stop; returns within ``timeout``.

        With auto-commit, the commit counts the records in the application's hands
        (the last poll's batch, the record the iteration is on) as processed, as
        Java's close does: close after processing. ``commit_in_hand=False`` commits
        only what the application moved past (what leaving a ``with`` block by an
        exception does)."""
        self._close_once(
            self._core.close(timeout, commit_in_hand=commit_in_hand),
            timeout + 2.0,
            "consumer close",
        )

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        # An exception leaving the block: the batch or record in hand was not
        # processed, so only what the application moved past is committed.
        self.close(commit_in_hand=t is None)

    def _closing(self) -> None:
        # The revoke listener call runs here, on the caller's thread, while the
        # consumer is still open (it may commit).
        core = self._core
        listener = core.listener
        if listener is not None and core.states and core._is_subscribed:
            core.listener = None
            fn = getattr(listener, "on_partitions_revoked", None)
            if fn is not None:
                try:
                    fn(set(core.states))
                except Exception:
                    log.exception("rebalance listener on_partitions_revoked failed")
        core.listener_runner = None

    def _close_failed(self, exc: Exception) -> None:
        log.warning("consumer close: %s", exc)

    def _unreferenced_close(self) -> Coroutine[Any, Any, Any]:
        return self._core.close()

    def metrics(self) -> dict[str, float]:
        """``{metric-name: value}``: see :meth:`AsyncConsumer.metrics` and
        docs/observability.md."""
        return self._core.metrics()

    # ------------------------------------------------------------ poll

    def poll(
        self, timeout: float = 0.0, max_records: int | None = None, *, timeout_ms: Any = None
    ) -> list[ConsumerRecord]:
        """Records ready now, else waits up to ``timeout`` seconds for some.

        A partition's error (a bad batch or record, an offset out of range with
        ``auto_offset_reset="none"``...) is raised after the records before it, then
        by every call (not while that partition is paused) until it is seeked
        (``seek(e.topic_partition, e.next_offset)`` skips a bad batch) or unassigned."""
        if self._closed:
            raise self._closed_error("poll")
        if timeout_ms is not None:
            raise TypeError(
                "poll() takes timeout= in seconds, not kafka-python's timeout_ms "
                f"(poll(timeout={timeout_ms / 1000 if isinstance(timeout_ms, int) else 1.0!r})), "
                "and returns a flat list of records, not a dict by partition"
            )
        core = self._core
        core._poll_tick()
        eof = core._eof_callback
        if eof is not None:
            core._report_eofs()  # (the ends reached by what earlier polls returned)
        buffer = self._buffer
        limit = max_records or self._max_records
        records = buffer.take(limit)
        if records or timeout <= 0:
            return records
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or self._closed:
                return buffer.take(limit)
            buffer.wait_sync(min(left, 0.1) if eof is not None else left)
            records = buffer.take(limit)
            if records:
                return records
            if eof is not None:
                core._report_eofs()

    def consume(self, num_messages: int = 1, timeout: float | None = None) -> list[ConsumerRecord]:
        """confluent-kafka's ``consume``: up to ``num_messages`` records, waiting
        until there are that many or ``timeout`` seconds have passed (None or
        negative: no limit); what :meth:`poll` returns, gathered::

            for record in consumer.consume(100, timeout=1.0):
                ...
        """
        if isinstance(num_messages, bool) or not isinstance(num_messages, int) or num_messages < 1:
            raise ValueError(f"consume: num_messages must be an int >= 1, not {num_messages!r}")
        out: list[ConsumerRecord] = []
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        while len(out) < num_messages and not self._closed:
            left = 1.0 if deadline is None else deadline - time.monotonic()
            out += self.poll(max(left, 0.0), num_messages - len(out))
            if deadline is not None and time.monotonic() >= deadline:
                break
        return out

    def list_topics(
        self, topic: str | None = None, *, timeout: float | None = None
    ) -> dict[str, list[int]]:
        """``{topic: partition ids}`` of every topic (internal ones left out), or of
        ``topic`` alone; see :meth:`AsyncConsumer.list_topics`."""
        return self._run(self._core.list_topics(topic, timeout=timeout), timeout)

    def store_offsets(
        self,
        message: ConsumerRecord | Iterable[ConsumerRecord] | None = None,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
    ) -> None:
        """Store what automatic commits send, with ``enable_auto_offset_store=False``
        (confluent-kafka's offset store); see :meth:`AsyncConsumer.store_offsets`."""
        self._core.store_offsets(message, offsets)

    def __next__(self) -> ConsumerRecord:
        """The next record (kafka-python's ``next(consumer)``): blocks until one
        arrives; StopIteration after ``consumer_timeout_ms`` without one (if set)
        or once the consumer is closed."""
        idle = self._consumer_timeout
        deadline = None if idle is None else time.monotonic() + idle
        while not self._closed:
            left = 1.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                break
            records = self.poll(left, 1)
            if records:
                return records[0]
        raise StopIteration

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Every record, blocking for more; ends after ``consumer_timeout_ms``
        without records (if set) or when the consumer is closed. The iterator is
        C code (``itertools.chain``) over each chunk's records: no Python call
        per record."""
        if self._forked:
            raise self._closed_error("iteration")
        return chain.from_iterable(self._chunks())

    def _chunks(self) -> Iterator[Iterator[ConsumerRecord]]:
        """An iterator per chunk taken, its end (or a break) noted when the next
        one is asked for (or the iteration is dropped)."""
        buffer = self._buffer
        core = self._core
        idle = self._consumer_timeout
        eof = core._eof_callback
        while not self._closed:
            core._poll_tick()
            if eof is not None:
                core._report_eofs()  # (per chunk, never per record)
            chunk = buffer.take_chunk()
            if chunk is None:
                if eof is not None:
                    if idle is None:
                        buffer.wait_sync(0.1)
                        continue
                    # the idle timeout, in steps that tell of partitions' ends
                    end = time.monotonic() + idle
                    while not buffer.wait_sync(min(0.1, max(end - time.monotonic(), 0))):
                        core._report_eofs()
                        if time.monotonic() >= end or self._closed:
                            return
                    continue
                if not buffer.wait_sync(idle if idle is not None else 1.0) and idle is not None:
                    return
                continue
            it = buffer.start_reading(chunk)
            try:
                yield it  # no work per record: positions follow from the iterator
            finally:
                buffer.finish_reading(chunk, it)  # a break gives back what was not read

    # ------------------------------------------------------------ assignment

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions, with no group membership (commits still
        go to ``group_id`` if one is set); replaces an earlier ``assign``.
        IllegalStateError after ``subscribe`` (``unsubscribe()`` first);
        UnknownTopicOrPartitionError for a partition that does not exist::

            consumer.assign([TopicPartition("orders", 0), TopicPartition("orders", 1)])
        """
        self._run(self._core.assign(list(partitions)))

    def assignment(self) -> set[TopicPartition]:
        """The partitions this consumer reads now (assigned, or given by the group)."""
        return self._core.assignment()

    def subscribe(
        self,
        topics: Iterable[str] | re.Pattern[str] | None = None,
        listener: Any = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
    ) -> None:
        """Join the group and read the partitions of ``topics`` (names) or of the
        topics ``pattern`` (a regex) matches; see :meth:`AsyncConsumer.subscribe`.
        Without ``group_id``: read every partition of ``topics``, no group, no
        commits (as kafka-python and aiokafka do). ``listener``'s calls run on
        the polling thread, inside ``poll()`` / iteration."""
        names, regex = subscribe_args(topics, pattern)  # argument errors on this thread
        core = self._core

        async def run() -> None:
            if regex is not None:
                await core.subscribe(listener=listener, pattern=regex)
            else:
                await core.subscribe(names, listener)

        self._run(run())

    def subscription(self) -> set[str]:
        """The topics subscribed to (see :meth:`AsyncConsumer.subscription`)."""
        return self._core.subscription()

    def unsubscribe(self) -> None:
        """Leave the group (its revocation commits what was processed, with
        auto-commit) and stop reading every partition, subscribed or assigned."""
        self._run(self._core.unsubscribe())

    def wait_for_assignment(self, timeout: float = 30.0) -> set[TopicPartition]:
        """Poll (running listener calls) until the group has assigned this member."""
        core = self._core
        if core.group is None:
            return core.assignment()
        stable = core.group.stable
        if not stable.is_set():

            def step(seconds: float) -> None:
                core._poll_tick()
                self._buffer.wait_sync(seconds)
                self._run_app_calls()

            self._wait_until(
                lambda: True if stable.is_set() else None,
                step,
                timeout,
                lambda: KafkaTimeoutError(f"no assignment within {timeout:g}s"),
            )
        return core.assignment()

    def _run_app_calls(self) -> None:
        # Runs queued listener calls without taking records.
        self._buffer.run_app_calls()

    # ------------------------------------------------------------ positions

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Read ``tp`` from ``offset`` on; see :meth:`AsyncConsumer.seek`."""
        self._call(self._core.seek, tp, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Read ``partitions`` (all assigned if none given) from their first offset."""
        self._call(self._core.seek_to_beginning, *partitions)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Read only what arrives from now on ``partitions`` (all assigned if none given)."""
        self._call(self._core.seek_to_end, *partitions)

    def position(self, tp: TopicPartition, timeout: float | None = None) -> int:
        """The offset of the next record ``poll`` returns for ``tp`` (looked up if
        unknown, at most ``timeout`` seconds: KafkaTimeoutError after)."""
        st = self._core.states.get(one_partition(tp, "position"))
        if st is not None and st.position is not None and not st.awaiting:
            read = self._buffer.read_position(st)  # mid-iteration: after the last record out
            return read[0] if read is not None else st.position
        return self._run(self._core.position(tp, timeout), timeout)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """See :meth:`AsyncConsumer.group_metadata`."""
        return self._core.group_metadata()

    def committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets of ``partitions`` (None: none committed).
        IllegalStateError without ``group_id``."""
        return self._run(self._core.committed(list(partitions)))

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The first offset of each partition (the log start offset)."""
        return self._run(self._core.beginning_offsets(list(partitions)))

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermark (read_uncommitted) or last stable offset (read_committed)."""
        return self._run(self._core.end_offsets(list(partitions)))

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The first offset with a timestamp >= the one given (milliseconds since
        the epoch) per partition; None where there is none."""
        return self._run(self._core.offsets_for_times(dict(timestamps)))

    def highwater(self, tp: TopicPartition) -> int | None:
        """``tp``'s high watermark as the last fetch saw it (None: not fetched yet)."""
        return self._core.highwater(tp)

    def partitions_for_topic(self, topic: str) -> set[int]:
        """The partition ids of ``topic`` (from metadata)."""
        return self._run(self._core.partitions_for_topic(topic))

    def topics(self) -> set[str]:
        """Every topic of the cluster, internal ones left out."""
        return self._run(self._core.topics())

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop returning and fetching records of ``partitions`` until :meth:`resume`."""
        self._call(self._core.pause, *partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        """Return and fetch records of paused ``partitions`` again."""
        self._call(self._core.resume, *partitions)

    def paused(self) -> set[TopicPartition]:
        """The partitions :meth:`pause` stopped."""
        return self._core.paused()

    # ------------------------------------------------------------ commits

    def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None
    ) -> None:
        """Commit ``offsets`` (the next offsets to read), or the current positions --
        after every record ``poll()`` returned, or after the record the iteration is
        on: call it after processing them; blocks. (Auto-commit sends only what the
        application has moved past: see docs/consumer.md.)"""
        snapshot = self._core._member._commit_offsets() if offsets is None else dict(offsets)
        self._run(self._core.commit(snapshot))

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        callback: Callable[[dict[TopicPartition, OffsetAndMetadata], BaseException | None], Any]
        | None = None,
    ) -> concurrent.futures.Future[None]:
        """Start a commit and return at once; ``callback(offsets, exc)`` runs on the I/O thread."""
        snapshot = self._core._member._commit_offsets() if offsets is None else dict(offsets)
        if self._closed:
            raise self._closed_error("commit_async")

        async def run() -> None:
            await self._core.commit_async(snapshot, callback)

        return self._thread.submit(run())
