"""The asyncio consumer core (``kpax.aio.Consumer``): assignment, positions, polling, groups.

Role: owns the consumer's :class:`~kpax.cluster.Cluster`, the per-partition
states, the :class:`~kpax.consumer.fetcher.Fetcher` and the
:class:`~kpax.consumer.buffer.FetchBuffer`, and (with ``group_id`` and
``subscribe``) a group member of the classic protocol
(:class:`~kpax.consumer.classic.ClassicGroup`) or of KIP-848
(:class:`~kpax.consumer.kip848.ConsumerGroup`). Every I/O runs on the event
loop this object was started on; the sync face (:mod:`kpax.consumer.sync`)
runs it on a :class:`~kpax.loop_thread.LoopThread` and takes records from
the buffer on the caller's thread.

Positions: ``position(tp)`` is the next offset the application will get;
the fetcher runs ahead of it. ``seek*`` drop whatever was fetched ahead.
Explicit ``commit()`` sends the positions; automatic commits (the
``auto_commit_interval_ms`` timer, revocation, close after an exception) send
only what the application has moved past (kpax.consumer.member_side's ``_processed_offsets``:
at-least-once, Java's rule), and a plain ``close()`` the positions.
Without ``group_id`` commits are refused; with ``group_id`` and ``assign``
commits go to the group without a generation (like Java).

A consumer belongs to the event loop that started it (a call from another
loop is an IllegalStateError: kpax.event_loops), is unusable in a child of
fork() (kpax.forks), and warns (ResourceWarning) when collected unclosed.

Polling and iteration (the per-record path) live here; the rest is in one
module per job, which this class calls: kpax.consumer.member_side (what the
group code asks of the consumer: partitions given and taken, offsets to
commit, listener calls), kpax.consumer.committing (commits and the group
identity they carry), kpax.consumer.subscribing, kpax.consumer.closing,
kpax.consumer.partition_args (the partitions a call is given),
kpax.consumer.java_metrics (``metrics``).

Imports: kpax.cluster, kpax.broker, kpax.config, kpax.metrics, kpax.proto, kpax.structs,
kpax.consumer.*, kpax.forks, kpax.event_loops, kpax.user_callbacks, kpax.peer_methods.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kpax.cluster.cluster import Cluster
from kpax.config import given_options, resolve
from kpax.consumer import closing, committing, subscribing
from kpax.consumer.buffer import FetchBuffer
from kpax.consumer.classic import ClassicGroup
from kpax.consumer.fetcher import Fetcher
from kpax.consumer.group import GroupBase
from kpax.consumer.java_metrics import consumer_metrics
from kpax.consumer.kip848 import ConsumerGroup
from kpax.consumer.member_side import MemberSide
from kpax.consumer.offsets import EARLIEST, LATEST, list_offsets
from kpax.consumer.options import CONSUMER_OPTIONS, ConsumerConfig, ConsumerSettings
from kpax.consumer.partition_args import one_partition, partition_list
from kpax.consumer.position_state import Reset
from kpax.consumer.record import ConsumerRecord
from kpax.consumer.state import PartitionState
from kpax.event_loops import DONE, Done, check_loop
from kpax.forks import forked_error
from kpax.forks import track as track_fork
from kpax.metrics import ConnectionMetrics, Metrics, metrics_enabled, report_stats
from kpax.peer_methods import CONSUMER, PeerHints
from kpax.proto.errors import ClientClosedError, IllegalStateError, KafkaTimeoutError
from kpax.structs import (
    ConsumerGroupMetadata,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack  # (typing's from Python 3.11)

log = logging.getLogger("kpax.consumer")

__all__ = ["AsyncConsumer"]

ListenerRunner = Callable[[Callable[[], Any]], "asyncio.Future[Any]"]


class AsyncConsumer(PeerHints):
    """``kpax.aio.Consumer("host:9092", group_id="g")``: ``subscribe`` or ``assign``,
    then ``await poll()`` / ``async for rec in consumer``. An async context manager."""

    _peer_methods = CONSUMER

    _client_name = "kpax.aio.Consumer"
    #: Set on a consumer inherited through fork() (kpax.forks).
    _forked = False

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | Mapping[str, Any] | None = None,
        /,
        **config: Unpack[ConsumerConfig],
    ) -> None:
        given = given_options(bootstrap_servers, config)
        self.config = resolve("consumer", CONSUMER_OPTIONS, given)
        #: The typed view of ``config`` the consumer's components read (built once).
        self.settings = settings = ConsumerSettings.from_config(self.config)
        #: Counters behind :meth:`metrics` (kpax.metrics; None when switched off).
        self.metrics_registry: Metrics | None = Metrics() if metrics_enabled() else None
        m = self.metrics_registry
        self._conn_metrics = ConnectionMetrics(m) if m is not None else None
        if m is not None:  # made here, once: the group records commits in it
            m.sensor("commit-latency")
        self.cluster = Cluster.from_config(self.config, self._conn_metrics)
        self.cluster.client_name = self._client_name
        self.cluster.on_unhealthy = settings.error_callback
        self.states: dict[TopicPartition, PartitionState] = {}
        self.buffer = FetchBuffer(m.sensor("records-consumed") if m is not None else None)
        self.fetcher: Fetcher | None = None
        self.group: GroupBase | None = None
        self.listener: Any = None
        #: How listener calls reach the application (the sync face routes them
        #: through the buffer to the polling thread).
        self.listener_runner: ListenerRunner | None = None
        self._subscribed: list[str] = []
        self._pattern: str | re.Pattern[str] | None = None
        self._manual = False
        self._closed = False
        #: close() is leaving the group: the revocation listener may still commit
        #: (as in the Java consumer, whose close() runs onPartitionsRevoked first)
        self._closing_group = False
        self._started = False
        #: Set by close() and unsubscribe(): the application is not polling, so a
        #: revocation does not wait for it to finish the records it holds.
        self._leaving = False
        #: Set by a plain close(): the records in hand count as processed.
        self._in_hand_processed = False
        self._fatal: BaseException | None = None
        self._max_records = settings.max_poll_records
        self._api_timeout = settings.api_timeout
        #: What store_offsets() stored (``enable_auto_offset_store=False``).
        self._stored: dict[TopicPartition, OffsetAndMetadata] = {}
        #: ``on_partition_eof`` (None: off) and the position each partition's
        #: end was last reported at.
        self._eof_callback = settings.on_partition_eof
        self._eof_at: dict[TopicPartition, int] = {}
        self._stats_task: asyncio.Future[None] | None = None
        #: The group identity (generation or member epoch, member id) in force
        #: when the records in hand were handed out: what group_metadata() gives.
        self._handout_identity: tuple[int, str] | None = None
        #: What the group code calls (kpax.consumer.member_side).
        self._member = MemberSide(self)
        track_fork(self)

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Connect to the cluster and start fetching (and the group member, with ``group_id``);
        ``async with`` calls it.
        """
        if self._started:
            return
        await self.cluster.start()
        settings = self.settings
        if settings.group_id is not None:
            cls = ConsumerGroup if settings.group_protocol == "consumer" else ClassicGroup
            self.group = cls(self.cluster, settings, self._member)
            self.buffer.on_handout = self._note_handout
        self.fetcher = fetcher = Fetcher(
            self.cluster,
            self.states,
            self.buffer,
            settings,
            self.metrics_registry,
            committed_lookup=self._committed_lookup if self.group is not None else None,
        )
        max_chunks = settings.fetch_buffer_chunks

        def drained(st: PartitionState) -> None:
            if st.puts - st.takes == max_chunks - 1:
                fetcher.wake()

        self.buffer.on_drained = drained
        fetcher.start()
        if settings.stats_callback is not None and settings.statistics_interval_ms > 0:
            self._stats_task = asyncio.ensure_future(
                report_stats(
                    self.metrics,
                    settings.stats_callback,
                    settings.statistics_interval_ms / 1000,
                    self._client_name,
                )
            )
        self._started = True

    async def __aenter__(self) -> AsyncConsumer:
        await self.start()
        return self

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        # An exception leaving the block: the batch or record in hand was not
        # processed, so only what the application moved past is committed.
        await self.close(commit_in_hand=exc_type is None)

    def _check(self) -> None:
        if self._forked:
            raise forked_error(self, "a call")
        if self._closed and not self._closing_group:
            raise ClientClosedError("the consumer is closed")
        if not self._started:
            raise IllegalStateError("the consumer is not started: await consumer.start() first")
        check_loop(self.cluster.loop, "a call", self._client_name)

    def _after_fork(self) -> None:
        """In a child of fork() (kpax.forks): every call refuses (a method bound
        before the fork included) and the cluster is unusable."""
        self.cluster.unusable = forked_error(self, "a call")

    def __del__(self) -> None:
        if self.__dict__.get("_started") and not self._closed and not self._forked:
            warnings.warn(
                f"unclosed {self._client_name}: await close() (or use `async with`) "
                "before its event loop ends",
                ResourceWarning,
                stacklevel=1,
                source=self,
            )

    async def close(self, timeout: float = 30.0, *, commit_in_hand: bool = True) -> None:
        """Commit (auto-commit), leave the group, stop fetching; returns within ``timeout``.
        On the event loop that started the consumer only (IllegalStateError from
        another loop).

        With auto-commit, the commit counts the records in the application's hands
        (the last poll's batch, the record an iteration is on) as processed, as the
        Java consumer's close does: close after processing. ``commit_in_hand=False``
        commits only what the application moved past (what ``async with`` does when
        an exception leaves the block)."""
        await closing.close(self, timeout, commit_in_hand)

    # ------------------------------------------------------------ offsets store, partition ends

    def store_offsets(
        self,
        message: ConsumerRecord | Iterable[ConsumerRecord] | None = None,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
    ) -> None:
        """Store the offsets automatic commits (and ``commit()`` without offsets)
        send, with ``enable_auto_offset_store=False`` (confluent-kafka's offset
        store): ``message``, a record or records the application has processed
        (each stores its offset + 1), and/or ``offsets``, ``{tp: next offset}``.
        A plain method on both faces, safe from any thread. IllegalStateError
        with ``enable_auto_offset_store=True`` (the default: automatic commits
        send what the application moved past) or for a partition not assigned::

            for record in consumer:
                process(record)
                consumer.store_offsets(record)  # committed by the next auto-commit
        """
        if self.settings.enable_auto_offset_store:
            raise IllegalStateError(
                "store_offsets() needs enable_auto_offset_store=False (with the default, "
                "automatic commits send what the application has moved past)"
            )
        found: dict[TopicPartition, OffsetAndMetadata] = {}
        if message is not None:
            records = [message] if isinstance(message, ConsumerRecord) else list(message)
            for rec in records:
                tp = TopicPartition(rec.topic, rec.partition)
                prev = found.get(tp)
                if prev is None or rec.offset + 1 > prev.offset:
                    found[tp] = OffsetAndMetadata(rec.offset + 1, "", rec.leader_epoch)
        if offsets is not None:
            for key, om in offsets.items():
                found[TopicPartition(*key)] = (
                    om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(om)
                )
        for tp, om in found.items():
            if not isinstance(om.offset, int) or isinstance(om.offset, bool) or om.offset < 0:
                raise ValueError(f"cannot store offset {om.offset!r} for {tp}: an int >= 0")
            if tp not in self.states:
                raise IllegalStateError(
                    f"store_offsets: partition {tp} is not assigned to this consumer"
                )
        self._stored.update(found)

    def _partition_eofs(self) -> list[tuple[TopicPartition, int]]:
        """The partitions whose position has reached their end (the high
        watermark; the last stable offset with read_committed) since last asked,
        with that offset: what ``on_partition_eof`` is told."""
        out = []
        end_of = "last_stable_offset" if self.settings.read_committed else "high_watermark"
        reported = self._eof_at
        for tp, st in list(self.states.items()):
            pos = st.position
            if pos is None or st.paused:  # (None: awaiting a reset)
                continue
            end = getattr(st, end_of)
            if 0 <= end <= pos and reported.get(tp) != pos:
                reported[tp] = pos
                out.append((tp, pos))
        return out

    def _report_eofs(self) -> None:
        """Call ``on_partition_eof(tp, offset)`` for each partition at its end
        (:meth:`_partition_eofs`); polls call it on the polling thread."""
        callback = self._eof_callback
        if callback is None:
            return
        for tp, offset in self._partition_eofs():
            try:
                callback(tp, offset)
            except Exception:
                log.exception("on_partition_eof(%s, %d) failed", tp, offset)

    def _wake_fetcher(self) -> None:
        if self.fetcher is not None:
            self.fetcher.wake()

    # ------------------------------------------------------------ assignment

    async def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions (no group membership)."""
        self._check()
        if self._is_subscribed:
            raise IllegalStateError("assign() after subscribe(): call unsubscribe() first")
        tps = set(partition_list(partitions))
        for tp in tps:
            await self.cluster.leader(tp.topic, tp.partition, timeout=self._api_timeout)
        self._manual = True
        self._member._remove_partitions(set(self.states) - tps)
        new = tps - set(self.states)
        for tp in new:
            how = Reset.COMMITTED if self.group is not None else Reset.POLICY
            self.states[tp] = PartitionState(tp, how)
        self._wake_fetcher()

    def assignment(self) -> set[TopicPartition]:
        """The partitions this consumer reads now (assigned, or given by the group)."""
        return set(self.states)

    def subscribe(
        self,
        topics: Iterable[str] | re.Pattern[str] | None = None,
        listener: Any = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
    ) -> Awaitable[None]:
        """Read the partitions of ``topics`` (names) or of every topic ``pattern``
        (a regex) matches. A plain method, as aiokafka's: calling it is enough;
        the result may be awaited (earlier kpax versions required it).

        With ``group_id``: join the group and read the partitions it assigns.
        Returns at once, as the Java consumer's does: a topic that does not exist
        yet is picked up when it appears (the group rebalances then).
        ``listener``: an object with ``on_partitions_assigned(tps)``,
        ``on_partitions_revoked(tps)`` (and ``on_partitions_lost(tps)``), plain
        or async methods.

        Without ``group_id`` (kafka-python's and aiokafka's behaviour): read
        every partition of ``topics`` with no group and no commits
        (``auto_offset_reset`` says where to start); the partitions are looked up
        in a task, which the returned awaitable is (await it to see a missing
        topic's error); partitions added to the topics later are not picked up
        (``assign()`` or a group for that); no listener calls.

        ``pattern``: under the classic protocol matched here with ``re.fullmatch``
        against every topic name of each metadata refresh (``metadata_max_age_ms``),
        internal topics never; under KIP-848 (``group_protocol="consumer"``) sent to
        the broker, which matches it (RE2/J syntax). Topics created or deleted later
        join or leave the subscription. Switching between names and a pattern needs
        ``unsubscribe()`` first, as in Java.

        Raises IllegalStateError after ``assign()`` (call ``unsubscribe()``
        first), ValueError / InvalidTopicError for bad names or a bad regex::

            consumer.subscribe(["orders"])
            async for record in consumer:
                ...
        """
        return subscribing.subscribe(self, topics, listener, pattern)

    def subscription(self) -> set[str]:
        """The topics subscribed to: the names given, or those the pattern
        matches now (under KIP-848: the topics of this member's assignment)."""
        if self._pattern is not None and self.group is not None:
            return set(self.group.subscription)
        return set(self._subscribed)

    @property
    def _is_subscribed(self) -> bool:
        """True while subscribed to topics or a pattern (group-managed assignment)."""
        return bool(self._subscribed) or self._pattern is not None

    async def unsubscribe(self) -> None:
        """Leave the group (its revocation commits what was processed, with auto-commit) and stop
        reading every partition, subscribed or assigned.
        """
        await subscribing.unsubscribe(self)

    async def wait_for_assignment(self, timeout: float = 30.0) -> set[TopicPartition]:
        """Wait until the group has given this member its (possibly empty) assignment."""
        self._check()
        if self.group is None:
            return set(self.states)
        await asyncio.wait_for(self.group.stable.wait(), timeout)
        return set(self.states)

    # ------------------------------------------------------------ positions

    def _state(self, tp: TopicPartition) -> PartitionState:
        st = self.states.get(tp)
        if st is None:
            raise IllegalStateError(f"partition {tp} is not assigned to this consumer")
        return st

    def seek(self, tp: TopicPartition, offset: int) -> Done:
        """Read ``tp`` from ``offset`` on (the next record returned): what was
        fetched ahead is dropped, and the next commit sends the new position even
        if it moved back. A plain method, as aiokafka's (awaiting the result
        works too). IllegalStateError if ``tp`` is not assigned; ValueError for
        a negative offset::

            consumer.seek(TopicPartition("orders", 0), 42)
        """
        self._check()
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise TypeError(f"seek offset must be an int, not {type(offset).__name__}")
        if offset < 0:
            raise ValueError(f"seek offset must be >= 0, got {offset} for {tp}")
        st = self._state(one_partition(tp, "seek"))
        self.buffer.settle_reading(st)
        st.seek(offset)
        st.committed = None  # the application moved: the next commit sends it, even back
        self._wake_fetcher()
        if self.fetcher is not None:
            self.fetcher.positions.notify()  # a position() waiting has its answer
        return DONE

    def seek_to_beginning(self, *partitions: TopicPartition) -> Done:
        """Read ``partitions`` (all assigned ones if none are given) from their
        first offset, looked up by the next fetch. A plain method (awaiting the
        result works too)."""
        self._check()
        self._seek_to(Reset.EARLIEST, partitions)
        return DONE

    def seek_to_end(self, *partitions: TopicPartition) -> Done:
        """Read only what arrives after now on ``partitions`` (all assigned ones if
        none are given): the end offset (the last stable one with
        ``read_committed``) is looked up by the next fetch. A plain method
        (awaiting the result works too)."""
        self._check()
        self._seek_to(Reset.LATEST, partitions)
        return DONE

    def _seek_to(self, how: Reset, partitions: Sequence[TopicPartition]) -> None:
        tps = partition_list(partitions) if partitions else list(self.states)
        for tp in tps:
            st = self._state(tp)
            self.buffer.settle_reading(st)
            st.await_reset(how)
            st.committed = None
        self._wake_fetcher()

    async def position(self, tp: TopicPartition, timeout: float | None = None) -> int:
        """The offset of the next record ``poll`` returns for ``tp`` (looked up if unknown)."""
        self._check()
        st = self._state(one_partition(tp, "position"))
        limit = timeout if timeout is not None else self._api_timeout
        deadline = time.monotonic() + limit
        fetcher = self.fetcher
        if fetcher is not None and (st.position is None or st.awaiting):
            self._wake_fetcher()  # it looks the position up (and retries, with backoff)
        while st.position is None or st.awaiting:
            if st.error is not None:
                raise st.error
            left = deadline - time.monotonic()
            if left <= 0 or fetcher is None:
                raise KafkaTimeoutError(f"position of {tp} not known within {limit:g}s")
            if self.states.get(st.tp) is not st:
                self._state(st.tp)  # unassigned meanwhile: says so
            changed = fetcher.positions.changed()
            # Wakes at the end of a lookup or validation, a failure or a seek.
            await asyncio.wait([changed], timeout=left)
            changed.cancel()
        read = self.buffer.read_position(st)  # mid-iteration: after the last record out
        return read[0] if read is not None else st.position

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member's group id, generation (KIP-848: member epoch) and member id
        for ``producer.send_offsets_to_transaction``: those in force when the last
        poll or iteration step handed records out (kpax.consumer.committing)."""
        return committing.group_metadata(self)

    def _note_handout(self) -> None:
        """The buffer handed records out (on the taking thread)."""
        committing.note_handout(self)

    async def _committed_lookup(
        self, tps: list[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Where the fetcher finds committed offsets to start from: the current
        group's (``unsubscribe`` replaces the group; the fetcher keeps this)."""
        assert self.group is not None
        return await self.group.fetch_committed(tps)

    async def committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets of ``partitions`` (None: none committed). IllegalStateError
        without ``group_id``.
        """
        self._check()
        if self.group is None:
            raise IllegalStateError("committed() needs a group_id")
        return await self.group.fetch_committed(partition_list(partitions))

    async def _list(self, specs: Mapping[TopicPartition, int]) -> dict[TopicPartition, Any]:
        self._check()
        return await list_offsets(
            self.cluster,
            specs,
            isolation_level=self.settings.isolation,
            timeout=self._api_timeout,
            retry_backoff=self.settings.retry_backoff,
        )

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """The first offset of each partition (the log start offset)."""
        found = await self._list(dict.fromkeys(partition_list(partitions), EARLIEST))
        return {tp: v[0] for tp, v in found.items()}

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermark (read_uncommitted) or last stable offset (read_committed)."""
        found = await self._list(dict.fromkeys(partition_list(partitions), LATEST))
        return {tp: v[0] for tp, v in found.items()}

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The first offset with a timestamp >= the one given (None if there is none)."""
        specs = {TopicPartition(*tp): ts for tp, ts in timestamps.items()}
        for tp, ts in specs.items():
            if ts < 0:
                raise ValueError(f"timestamp for {tp} must be >= 0, got {ts}")
        found = await self._list(specs)
        return {
            tp: (OffsetAndTimestamp(o, t, e) if o >= 0 else None) for tp, (o, t, e) in found.items()
        }

    def highwater(self, tp: TopicPartition) -> int | None:
        """``tp``'s high watermark as the last fetch saw it (None: not fetched yet)."""
        st = self.states.get(tp)
        return st.high_watermark if st is not None and st.high_watermark >= 0 else None

    async def partitions_for_topic(self, topic: str) -> set[int]:
        """The partition ids of ``topic`` (from metadata)."""
        self._check()
        return set(await self.cluster.partitions(topic, timeout=self._api_timeout))

    async def topics(self) -> set[str]:
        """Every topic of the cluster, internal ones left out."""
        self._check()
        await self.cluster.refresh(all_topics=True)
        return {n for n, t in self.cluster.snapshot.topics.items() if not t.is_internal}

    # ------------------------------------------------------------ pause

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop returning records of ``partitions`` (and fetching them) until
        :meth:`resume`; what was fetched ahead is kept for then. A paused
        partition stays assigned (a group keeps it; heartbeats go on).
        IllegalStateError for a partition not assigned."""
        for tp in partition_list(partitions):
            st = self._state(tp)
            if not st.paused:
                self.buffer.settle_reading(st)
                st.pause()  # (fetched again from the position on resume)

    def resume(self, *partitions: TopicPartition) -> None:
        """Return and fetch records of paused ``partitions`` again."""
        resumed = []
        for tp in partition_list(partitions):
            st = self._state(tp)
            if st.paused:
                st.resume()
                resumed.append(tp)
        if self.fetcher is not None:
            self.fetcher.kick(resumed)  # fetched at once, not after a long poll in flight

    def paused(self) -> set[TopicPartition]:
        """The partitions :meth:`pause` stopped."""
        return {tp for tp, st in self.states.items() if st.paused}

    # ------------------------------------------------------------ metrics

    def metrics(self) -> dict[str, float]:
        """The Java consumer's metrics that apply, as ``{name: value}`` (see
        docs/observability.md): ``records-consumed-total``, ``fetch-rate``,
        ``records-lag-max``, ``commit-latency-avg``..., and per-partition
        ``records-lag{topic=t,partition=0}``. Safe to call from any thread."""
        return consumer_metrics(
            self.states, self.settings, self.metrics_registry, self._conn_metrics
        )

    # ------------------------------------------------------------ poll

    def _poll_tick(self) -> None:
        """What every poll does first (non-blocking; the sync face calls it from
        the polling thread): raise the consumer's fatal error if any, and tell
        the group this member is polling (``max_poll_interval_ms``)."""
        if self._fatal is not None:
            raise self._fatal
        if self.group is not None:
            self.group.polled()

    async def poll(
        self, timeout: float = 0.0, max_records: int | None = None
    ) -> list[ConsumerRecord]:
        """Records ready now, else waits up to ``timeout`` seconds for some (at most
        ``max_records``, default ``max_poll_records``)."""
        self._check()
        self._poll_tick()
        if self._eof_callback is not None:
            self._report_eofs()  # (the ends reached by what earlier polls returned)
        limit = max_records or self._max_records
        records = self.buffer.take(limit)
        if records:
            return records
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or self._closed:
                return self.buffer.take(limit)
            await self.buffer.wait_async(min(left, 0.1) if self._eof_callback else left)
            records = self.buffer.take(limit)
            if records:
                return records
            if self._eof_callback is not None:
                self._report_eofs()

    async def consume(
        self, num_messages: int = 1, timeout: float | None = None
    ) -> list[ConsumerRecord]:
        """confluent-kafka's ``consume``: up to ``num_messages`` records, waiting
        until there are that many or ``timeout`` seconds have passed (None: no
        limit); what :meth:`poll` returns, gathered."""
        if isinstance(num_messages, bool) or not isinstance(num_messages, int) or num_messages < 1:
            raise ValueError(f"consume: num_messages must be an int >= 1, not {num_messages!r}")
        out: list[ConsumerRecord] = []
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        while len(out) < num_messages and not self._closed:
            left = 1.0 if deadline is None else deadline - time.monotonic()
            out += await self.poll(max(left, 0.0), num_messages - len(out))
            if deadline is not None and time.monotonic() >= deadline:
                break
        return out

    async def list_topics(
        self, topic: str | None = None, *, timeout: float | None = None
    ) -> dict[str, list[int]]:
        """confluent-kafka's ``list_topics``: ``{topic: partition ids}`` of every
        topic of the cluster (internal ones left out), or of ``topic`` alone
        (UnknownTopicOrPartitionError if it does not exist)."""
        self._check()
        limit = self._api_timeout if timeout is None else timeout
        return await self.cluster.list_topics(topic, limit)

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """aiokafka's ``getmany``: the records :meth:`poll` returns (waiting up to
        ``timeout_ms`` milliseconds), grouped by partition. Naming partitions is
        refused (records of the others would be taken and lost from view):
        :meth:`pause` the others instead."""
        if partitions:
            raise TypeError(
                "getmany(*partitions) is not supported: pause() the partitions not "
                "wanted, then getmany()"
            )
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        for rec in await self.poll(timeout_ms / 1000, max_records):
            tp = TopicPartition(rec.topic, rec.partition)
            got = out.get(tp)
            if got is None:
                out[tp] = [rec]
            else:
                got.append(rec)
        return out

    async def getone(self) -> ConsumerRecord:
        """aiokafka's ``getone``: the next record, waiting as long as it takes
        (``async for rec in consumer`` is the loop form)."""
        while True:
            got = await self.poll(1.0, 1)
            if got:
                return got[0]

    async def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        self._check()
        buffer = self.buffer
        while not self._closed:
            self._poll_tick()
            if self._eof_callback is not None:
                self._report_eofs()  # (per chunk, never per record)
            chunk = buffer.take_chunk()
            if chunk is None:
                await buffer.wait_async(0.1 if self._eof_callback else 1.0)
                continue
            it = buffer.start_reading(chunk)
            try:
                for rec in it:
                    yield rec
            finally:
                buffer.finish_reading(chunk, it)  # a break gives back what was not read

    # ------------------------------------------------------------ commits

    async def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None
    ) -> None:
        """Commit ``offsets`` (next offsets to read), or the current positions --
        after every record ``poll()`` returned, or after the record the iteration is
        on: call it after processing them. (Auto-commit sends only what the
        application has moved past: kpax.consumer.member_side.)"""
        await committing.commit(self, offsets)

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        callback: Callable[[dict[TopicPartition, OffsetAndMetadata], BaseException | None], Any]
        | None = None,
    ) -> asyncio.Task[None]:
        """Start a commit; ``callback(offsets, exception_or_None)`` runs when it ends."""
        self._check()
        snapshot = self._member._commit_offsets() if offsets is None else offsets

        async def run() -> None:
            exc: BaseException | None = None
            try:
                await self.commit(snapshot)
            except Exception as e:
                exc = e
                if callback is None:
                    log.warning("async commit failed: %s", e)
            if callback is not None:
                callback(dict(snapshot), exc)  # type: ignore[arg-type]

        return asyncio.ensure_future(run())
