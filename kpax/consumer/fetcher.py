"""The fetcher: pipelined Fetch requests per leader broker, decoded into the fetch buffer.

Role: runs on the consumer's event loop. For every leader broker it keeps
one Fetch request in flight -- on that broker's fetch connection
(``Cluster.fetch_broker``), so that commits, heartbeats and offset or
metadata requests never wait behind a long poll -- whenever any of its
partitions is fetchable and has room in the buffer (``fetch_buffer_chunks``
fetches per partition), so the next fetch travels while the
application handles the records already buffered. Requests use fetch
sessions (KIP-227, :mod:`kpax.consumer.fetch_session`, one per broker). Fetch
v13+ names topics by id (from the metadata); when a topic's id is unknown the
request is capped at v12.

Responses are framed and CRC-checked here (with the accelerator, in C: one call
for all the partitions of a response for the sync face, ``walk_many``), one
:class:`~kpax.consumer.buffer.Chunk` per partition, which
:class:`~kpax.consumer.chunk_decoder.ChunkDecoder` decodes into the buffer
(records built here or by the taking thread, aborted transactions dropped,
bad records stopping their partition where they start).

Partition errors: OFFSET_OUT_OF_RANGE resets per ``auto_offset_reset``
("none": an error naming the partition and offsets); leader errors refresh
the metadata and (FENCED/UNKNOWN_LEADER_EPOCH, leader moves) validate the
position with OffsetForLeaderEpoch; a diverging epoch in the response
(Fetch v12+) is log truncation (KIP-320). Resets, validations and
truncations are handled by :class:`~kpax.consumer.positions.Positions`.

Each partition's records and error reach the buffer in the order of the
Fetch response, so the records of partitions before it are never held back by
it.

Positions still unknown (new assignment, reset) are found by
:class:`~kpax.consumer.positions.Positions` too (the fetcher starts it on
them): from the committed offsets (``committed_lookup``: the group's, passed
at construction) or by ListOffsets. What a partition awaits is its
:class:`~kpax.consumer.position_state.PositionMachine`'s state: the fetcher
fires its events once per partition and response (fetched, validate, reset,
fail), never per record.

Imports: kpax.cluster, kpax.proto, kpax.structs, kpax.metrics, kpax.tasks, kpax.consumer.*.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable
from functools import partial
from typing import Any

from kpax.cluster.cluster import Cluster
from kpax.consumer.buffer import FetchBuffer
from kpax.consumer.chunk_decoder import ChunkDecoder
from kpax.consumer.fetch_session import FetchSession, Wanted
from kpax.consumer.options import ConsumerSettings
from kpax.consumer.position_state import FetchState, Reset
from kpax.consumer.positions import CommittedLookup, Positions
from kpax.consumer.record import ConsumerRecord
from kpax.consumer.state import PartitionState
from kpax.metrics import Metrics
from kpax.proto.error_codes import OffsetOutOfRangeError
from kpax.proto.error_families import (
    EPOCH_VALIDATION_ERRORS,
    FETCH_SESSION_ERRORS,
    STALE_METADATA_ERRORS,
    code_in,
)
from kpax.proto.errors import (
    KafkaError,
    error_for_code,
)
from kpax.proto.messages import FetchRequest
from kpax.proto.records import decode_batches, walk_many
from kpax.structs import TopicPartition
from kpax.tasks import cancel_and_wait

log = logging.getLogger("kpax.consumer")

#: The highest Fetch version whose fields this fetcher was written for (its
#: replica-only fields at v18 included). Regenerating the messages with a newer
#: Fetch does not raise what is sent until this module learns the new fields.
FETCH_MAX_VERSION = 18

__all__ = ["CommittedLookup", "Fetcher"]

_make = partial(tuple.__new__, ConsumerRecord)
#: Where the record loop puts offset, timestamp, key, value and headers in a ConsumerRecord.
_ROW_SLOTS = (2, 3, 5, 6, 7)
#: Send the next Fetch before decoding the current response (see _fetch).
EARLY_DISPATCH = True


class Fetcher:
    #: Frame and check all the partitions of a response in one C call (``walk_many``,
    #: the GIL released when they are large): the sync face sets it, whose
    #: application thread builds and reads records meanwhile. Otherwise (the asyncio
    #: face, one thread) each partition is walked just before it is decoded, while
    #: its bytes are in the CPU caches.
    walk_all = False

    def __init__(
        self,
        cluster: Cluster,
        states: dict[TopicPartition, PartitionState],
        buffer: FetchBuffer,
        settings: ConsumerSettings,
        metrics: Metrics | None = None,
        *,
        committed_lookup: CommittedLookup | None = None,
    ) -> None:
        self.cluster = cluster
        #: fetch-latency (ms) and fetch-size (bytes of records) per Fetch response.
        self.m_latency = metrics.sensor("fetch-latency") if metrics is not None else None
        self.m_size = metrics.sensor("fetch-size") if metrics is not None else None
        self.states = states
        self.buffer = buffer
        self.settings = settings
        self.isolation = settings.isolation
        self.reset_policy = settings.auto_offset_reset
        self.max_chunks = settings.fetch_buffer_chunks
        self.check_crcs = settings.check_crcs
        self.max_decompressed = settings.max_decompressed_batch_bytes
        #: Resets, validations and truncations of positions; ``fail`` for errors.
        self.positions = Positions(
            cluster, states, buffer, settings, committed_lookup=committed_lookup
        )
        #: Decodes each partition's batches into the buffer.
        self.decoder = ChunkDecoder(settings, buffer, self.positions)
        self._backoff = settings.retry_backoff
        self._timeout = settings.request_timeout
        self._inflight: dict[int, asyncio.Task[None]] = {}
        #: The partitions each fetch in ``_inflight`` asks for.
        self._inflight_parts: dict[int, set[TopicPartition]] = {}
        #: Partitions resumed since the last dispatch (see :meth:`kick`).
        self._kicked: set[TopicPartition] = set()
        #: One-off fetches of resumed partitions, per broker (see :meth:`kick`).
        self._side: dict[int, asyncio.Task[None]] = {}
        self._sessions: dict[int, FetchSession] = {}
        self._backoff_until: dict[int, float] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._aux: set[asyncio.Task[None]] = set()
        #: The error the last failed background task ended with (None: the last
        #: one succeeded): failures are logged once per change, not per attempt.
        self._failing: BaseException | None = None
        self._refreshing = False
        #: Topic ids a Fetch answered about that no fetched topic had (said once each).
        self._unknown_ids: set[Any] = set()
        #: The metadata snapshot whose topic ids the partitions were last checked against.
        self._ids_seen: Any = None
        self._closed = False
        self.fetches = 0

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    def wake(self) -> None:
        self._wake.set()

    def kick(self, tps: list[TopicPartition]) -> None:
        """``tps`` can be fetched again (resumed): fetch them now. When their leader
        has a fetch in flight that leaves them out -- a long poll of its other
        partitions, up to ``fetch_max_wait_ms`` -- they are fetched at once by a
        one-off request outside the fetch session that does not wait for data
        (on the broker's main connection: the fetch connection is busy with that
        long poll), not when that long poll ends."""
        self._kicked.update(tps)
        self._wake.set()

    async def close(self) -> None:
        self._closed = True
        tasks = [
            t
            for t in (self._task, *self._inflight.values(), *self._side.values(), *self._aux)
            if t is not None
        ]
        await cancel_and_wait(tasks)
        await self._close_sessions()

    async def _close_sessions(self) -> None:
        """Tell brokers to drop our fetch sessions (epoch -1), best effort."""
        for node, s in list(self._sessions.items()):
            if s.id:
                with contextlib.suppress(Exception):  # (best effort; a cancellation ends it)
                    broker = self.cluster.fetch_broker(node)
                    req = s.close_request()
                    await broker.request(req, timeout=1.0, expect_response=False)
        self._sessions.clear()

    def forget(self, tp: TopicPartition) -> None:
        """``tp`` left the assignment."""
        self.positions.forget(tp)

    # ------------------------------------------------------------ main loop

    async def _run(self) -> None:
        while not self._closed:
            self._wake.clear()
            try:
                self._dispatch()
            except Exception:
                log.exception("fetcher dispatch failed")
                await asyncio.sleep(self._backoff[0] / 1000)
            await self._wake.wait()

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._aux.add(task)
        task.add_done_callback(self._aux_done)

    def _aux_done(self, task: asyncio.Task[None]) -> None:
        self._aux.discard(task)
        exc = None if task.cancelled() else task.exception()
        if exc is None:
            if self._failing is not None and not task.cancelled():
                log.info("consumer fetching works again (it failed with: %s)", self._failing)
                self._failing = None
            self._wake.set()
            return
        # One line per change of state (failing, recovered), not per attempt:
        # with a broker down this runs about once a second while kpax retries.
        if self._failing is None or type(self._failing) is not type(exc):
            log.warning("consumer fetching failed, retrying: %s", exc)
        else:
            log.debug("consumer fetching still failing: %s", exc)
        self._failing = exc
        if isinstance(exc, KafkaError) and not exc.retriable:
            self.buffer.put_error(exc)  # poll raises it (a broker breaking the protocol)
        # Try again after a backoff, not at once: a broker that fails every
        # request on a fresh connection would otherwise be reconnected in a loop.
        asyncio.get_running_loop().call_later(self._backoff[0] / 1000, self._wake.set)

    def _dispatch(self) -> None:
        snapshot = self.cluster.snapshot
        need_reset: list[PartitionState] = []
        need_validate: list[PartitionState] = []
        by_node: dict[int, list[PartitionState]] = {}
        missing_leader: set[str] = set()
        max_chunks = self.max_chunks
        resetting = self.positions.resetting
        fetchable = FetchState.FETCHABLE
        awaiting_reset = FetchState.AWAITING_RESET
        awaiting_validation = FetchState.AWAITING_VALIDATION
        #: topic -> (its old id, its partitions found re-created by this pass)
        recreated: dict[str, tuple[uuid.UUID, list[PartitionState]]] = {}
        topics = snapshot.topics
        new_metadata = snapshot is not self._ids_seen  # topic ids checked once per snapshot
        self._ids_seen = snapshot
        for st in self.states.values():
            if not st.assigned:
                continue
            if new_metadata or st.topic_id is None:
                info = topics.get(st.tp.topic)
                tid = info.topic_id if info is not None else None
                if tid is not None and tid != st.topic_id:
                    old = st.topic_id
                    if old is not None:  # deleted and re-created: another topic now
                        recreated.setdefault(st.tp.topic, (old, []))[1].append(st)
                        self.buffer.settle_reading(st)
                        self.positions.topic_recreated(st, tid)
                    st.topic_id = tid
            state = st.state
            if state is not fetchable:  # FAILED: stopped until a seek
                if state is awaiting_reset:
                    if st.tp not in resetting:
                        need_reset.append(st)
                elif state is awaiting_validation and st.tp not in resetting:
                    need_validate.append(st)
                continue
            if st.paused or st.buffered >= max_chunks:
                continue
            info = topics.get(st.tp.topic)
            p = info.partitions.get(st.tp.partition) if info is not None else None
            if p is None or p.leader < 0 or p.leader not in snapshot.brokers:
                missing_leader.add(st.tp.topic)
                continue
            by_node.setdefault(p.leader, []).append(st)
        for topic, (old_id, parts) in recreated.items():
            log.warning(
                "topic %r was deleted and re-created (topic id %s, was %s): partitions %s "
                "start over from %s",
                topic,
                topics[topic].topic_id,
                old_id,
                sorted(st.tp.partition for st in parts),
                self.positions.restart_from(),
            )
        if need_reset:
            for st in need_reset:
                resetting.add(st.tp)
            self._spawn(self.positions.reset(need_reset))
        if need_validate:
            for st in need_validate:
                resetting.add(st.tp)
            self._spawn(self.positions.validate(need_validate))
        if missing_leader and not self._refreshing:
            self._refreshing = True
            self._spawn(self._refresh(missing_leader))
        # A kicked partition stays kicked until a request asks for it: one that
        # cannot be fetched yet (its offset still being looked up) is fetched at
        # once when it can, not when its leader's long poll ends.
        kicked = self._kicked
        now = time.monotonic()
        for node, parts in by_node.items():
            if node in self._inflight:
                if kicked:
                    held = self._inflight_parts.get(node, ())
                    late = [st for st in parts if st.tp in kicked and st.tp not in held]
                    if not late:
                        kicked.difference_update(st.tp for st in parts)
                    elif node not in self._side:  # (else: once that one-off fetch ends)
                        kicked.difference_update(st.tp for st in parts)
                        side = asyncio.ensure_future(self._fetch(node, late, side=True))
                        self._side[node] = side
                        side.add_done_callback(partial(self._side_done, node))
                continue
            until = self._backoff_until.get(node, 0.0)
            if until > now:
                asyncio.get_running_loop().call_later(until - now, self._wake.set)
                continue
            if kicked:
                kicked.difference_update(st.tp for st in parts)
            task = asyncio.ensure_future(self._fetch(node, parts))
            self._inflight[node] = task
            self._inflight_parts[node] = {st.tp for st in parts}
            task.add_done_callback(partial(self._fetch_done, node, parts))
        if kicked:  # no longer assigned, or paused again: nothing to hurry
            states = self.states
            for tp in list(kicked):
                kst = states.get(tp)
                if kst is None or kst.paused or not kst.assigned:
                    kicked.discard(tp)

    def _side_done(self, node: int, task: asyncio.Task[None]) -> None:
        if self._side.get(node) is task:
            del self._side[node]
        if not task.cancelled() and task.exception() is not None:
            # the regular fetch asks for these partitions next anyway
            log.debug("one-off fetch from broker %s failed: %s", node, task.exception())
        self._wake.set()

    def _fetch_done(self, node: int, parts: list[PartitionState], task: asyncio.Task[None]) -> None:
        if self._inflight.get(node) is task:
            del self._inflight[node]
            self._inflight_parts.pop(node, None)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.debug("fetch from broker %s failed: %s", node, exc)
            self._sessions.pop(node, None)
            self._backoff_until[node] = time.monotonic() + self._backoff[0] / 1000
            if isinstance(exc, KafkaError) and not exc.retriable:
                self.buffer.put_error(exc)
            else:
                for st in parts:  # the leader may have moved: look again
                    self.cluster.leader_is_down(st.tp.topic, st.tp.partition)
        self._wake.set()

    async def _refresh(self, topics: set[str]) -> None:
        try:
            await asyncio.sleep(self._backoff[0] / 1000)
            await self.cluster.refresh(topics)
        finally:
            self._refreshing = False

    # ------------------------------------------------------------ fetch

    async def _fetch(self, node: int, parts: list[PartitionState], side: bool = False) -> None:
        """Fetch ``parts`` from ``node`` in its fetch session on its fetch connection,
        or (``side``) by a one-off sessionless request on its main connection."""
        broker = self.cluster.broker(node) if side else self.cluster.fetch_broker(node)
        snapshot = self.cluster.snapshot
        version = await broker.api_version(FetchRequest, FETCH_MAX_VERSION)
        if version >= 13:
            for st in parts:
                info = snapshot.topics.get(st.tp.topic)
                if info is None or info.topic_id is None:
                    version = await broker.api_version(FetchRequest, 12)
                    break
        session = FetchSession() if side else self._sessions.get(node)
        if session is None:
            session = self._sessions[node] = FetchSession()
        settings = self.settings
        wanted: Wanted = {}
        sent: dict[TopicPartition, tuple[PartitionState, int, int]] = {}
        for st in parts:
            if not st.fetchable or not st.assigned:
                continue  # paused, failed, reset or revoked since _dispatch picked it
            info = snapshot.topics[st.tp.topic]
            leader_epoch = info.partitions[st.tp.partition].leader_epoch
            assert st.fetch_position is not None
            wanted[st.tp] = (st.fetch_position, st.fetch_epoch, leader_epoch)
            sent[st.tp] = (st, st.gen, st.fetch_position)
        if not wanted:
            return  # (the next dispatch picks what is fetchable then)
        built = session.request(
            wanted, snapshot, version >= 13, settings, self.isolation, sessionless=side
        )
        if built is None:
            return  # the session starts over (see FetchSession.request)
        req, ids = built
        timeout = self._timeout + settings.fetch_max_wait_ms / 1000
        started = time.monotonic()
        resp = await broker.request(req, version=version, timeout=timeout)
        self.fetches += 1
        if self.m_latency is not None and self.m_size is not None:
            self.m_latency.record((time.monotonic() - started) * 1000.0)
            self.m_size.record(
                sum(len(p.records) for t in resp.responses for p in t.partitions if p.records)
            )
        if resp.error_code:
            if code_in(resp.error_code, FETCH_SESSION_ERRORS):
                session.reset()
                return
            session.reset()
            raise error_for_code(resp.error_code)(f"Fetch from {broker.describe()}")
        if side:
            pending = self._handle_response(resp, sent, ids, broker.describe())
        else:
            session.completed(resp.session_id, wanted, ids)
            pending = self._handle_response(resp, sent, ids, broker.describe(), session)
        if pending and EARLY_DISPATCH and not side:
            # Fetch positions are known from the batch headers already: send the next
            # request now, so the broker prepares it while these records are decoded.
            if self._inflight.get(node) is asyncio.current_task():
                del self._inflight[node]
            self._dispatch()
            await asyncio.sleep(0)  # lets the new request reach the socket
        decode = self.decoder.decode
        for item in pending:
            decode(*item)

    def _handle_response(
        self,
        resp: Any,
        sent: dict[TopicPartition, tuple[PartitionState, int, int]],
        ids: dict[Any, str],
        where: str,
        session: FetchSession | None = None,
    ) -> list[tuple[Any, ...]]:
        """Handle errors and metadata of each partition; return what is to decode.

        Batches are framed (and CRC-checked) here and each partition's fetch
        position moves to the end of its last batch, with a buffer slot reserved,
        so the next fetch can be sent before the records are decoded. The framing,
        CRCs and the records of uncompressed batches are checked in C (such
        batches are built by the taking thread). For the sync face, that is one
        call for all the partitions (``walk_many``), with the GIL released once
        when they are large, so that its application thread reads records
        meanwhile; the asyncio face, which has no other thread to let run, walks
        each partition just before decoding it, while its bytes are in the caches.
        """
        refresh: set[str] = set()
        pending: list[tuple[Any, ...]] = []
        # The partitions with records, in response order: (state, gen, topic, its
        # response partition, fetch offset).
        todo: list[tuple[PartitionState, int, str, Any, int]] = []
        for t in resp.responses:
            name = ids.get(t.topic_id) if t.topic_id is not None and t.topic_id.int else t.topic
            if name is None:
                self._unknown_topic_id(t.topic_id, sent, where, session, refresh)
                continue
            for p in t.partitions:
                tp = TopicPartition(name, p.partition_index)
                entry = sent.get(tp)
                if entry is None:
                    continue
                st, gen, offset = entry
                if st.gen != gen or st.fetch_position != offset or not st.assigned:
                    continue  # seeked, paused or revoked meanwhile
                code = p.error_code
                if code:
                    self._partition_error(st, code, p, offset, where, refresh)
                    continue
                st.high_watermark = p.high_watermark
                st.last_stable_offset = p.last_stable_offset
                st.log_start_offset = p.log_start_offset
                div = getattr(p, "diverging_epoch", None)
                if div is not None and div.epoch >= 0:
                    self.positions.maybe_truncated(st, div.epoch, div.end_offset)
                    if st.gen != gen or st.state is FetchState.FAILED:
                        continue
                if p.records:
                    todo.append((st, gen, name, p, offset))
        walks = None
        if self.walk_all:  # the sync face: its application thread builds records meanwhile
            walks = walk_many(
                [item[3].records for item in todo],
                [item[4] for item in todo],
                validate_crc=self.check_crcs,
                check_records=True,
                borrow=True,  # the response frame is ours alone
            )
        for i, (st, gen, name, p, offset) in enumerate(todo):
            batches: list[Any] = []
            err: KafkaError | None = None
            try:
                batches.extend(
                    decode_batches(
                        p.records,
                        validate_crc=self.check_crcs,
                        max_decompressed_size=self.max_decompressed,
                        check_records=True,
                        min_offset=offset,
                        borrow=True,
                        walked=None if walks is None else walks[i],
                    )
                )
            except KafkaError as exc:
                # Bad bytes after `batches`: stop fetching the partition now; the
                # error follows its records (see ChunkDecoder.decode), in response order.
                at = max(offset, batches[-1].next_offset) if batches else offset
                err = self.decoder.record_error(st, exc, at)
                st.fail(err)  # (raised by the buffer after the records: decode)
            if not batches:
                if err is not None:
                    pending.append((st, gen, name, p.partition_index, batches, offset, None, err))
                continue
            last = batches[-1]
            nxt = last.next_offset
            if nxt <= offset and err is None:
                continue
            st.fetched(nxt, last.partition_leader_epoch if last.magic >= 2 else -1)
            st.puts += 1  # the slot of the chunk ChunkDecoder.decode will put
            pending.append(
                (st, gen, name, p.partition_index, batches, offset, p.aborted_transactions, err)
            )
        if refresh:
            self._spawn(self.cluster.refresh(refresh))
        return pending

    def _unknown_topic_id(
        self,
        topic_id: Any,
        sent: dict[TopicPartition, tuple[PartitionState, int, int]],
        where: str,
        session: FetchSession | None,
        refresh: set[str],
    ) -> None:
        """A Fetch answer about a topic id the request did not name: the broker's
        fetch session and this consumer disagree about a topic (deleted,
        re-created). Said once per id; the session starts over (a full request
        next) and the fetched topics' metadata is refreshed."""
        if session is not None:
            session.reset()
        topics = {tp.topic for tp in sent}
        refresh.update(topics)
        if topic_id in self._unknown_ids:
            return
        self._unknown_ids.add(topic_id)
        log.warning(
            "Fetch from %s answered about topic id %s, which no topic this consumer fetches "
            "has now (a topic deleted or re-created?): refreshing the metadata of %s and "
            "starting a new fetch session",
            where,
            topic_id,
            sorted(topics),
        )

    def _partition_error(  # noqa: PLR0917
        self,
        st: PartitionState,
        code: int,
        p: Any,
        offset: int,
        where: str,
        refresh: set[str],
    ) -> None:
        err = error_for_code(code)
        if issubclass(err, OffsetOutOfRangeError):
            if self.reset_policy == "none":
                # stopped now; Positions.out_of_range delivers the error, with the valid range
                st.fail(err(f"fetch offset {offset} of partition {st.tp} is out of range"))
                self._spawn(self.positions.out_of_range(st, code, offset))
            else:
                log.info("partition %s: offset %d out of range, resetting", st.tp, offset)
                st.await_reset(Reset.POLICY)
            return
        if issubclass(err, STALE_METADATA_ERRORS):
            self.cluster.leader_is_down(st.tp.topic, st.tp.partition)
            refresh.add(st.tp.topic)
            if issubclass(err, EPOCH_VALIDATION_ERRORS):
                st.validate()
            return
        if err.retriable:
            refresh.add(st.tp.topic)
            return
        self.positions.fail(st, err(f"fetching partition {st.tp} from {where}"))
