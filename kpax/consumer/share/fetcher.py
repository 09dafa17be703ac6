"""The share fetcher: one share session per leader broker, ShareFetch and ShareAcknowledge.

Role: runs on the share consumer's event loop. For every broker leading a
partition assigned to this member it runs one loop (:class:`_Node`) that owns
the share session with that broker and sends one request at a time (the
session's epochs are strictly sequential), on the broker's long-poll
connection (``Cluster.fetch_broker``) so heartbeats and metadata requests
never wait behind a ShareFetch:

- a **ShareFetch** when the application is waiting for records (a ``poll``
  found the buffer empty), the member has partitions led there and nothing
  of that broker is waiting in the buffer; acknowledgements ready for that
  broker ride on it. Records are never fetched ahead of demand, as in the
  Java client: a record acquired counts as a delivery, and one fetched for an
  application that stopped polling would only wait for its lock to end;
- a **ShareAcknowledge** when acknowledgements have waited
  :data:`ACK_LINGER` for a fetch to carry them, when a ``commit`` waits for
  them (a ShareFetch may wait ``fetch_max_wait_ms`` before it answers), when
  they are RENEWs (sent alone, ``IsRenewAck``), or when they are for
  partitions no longer fetched there.

Acknowledgements always go to the broker the records were acquired from.
Acquired records reach :class:`ShareBuffer` as one chunk per partition per
response (decoded by :mod:`kpax.consumer.share.decode`); the acknowledgements
the consumer makes itself (gaps, bad batches) are queued here at once.

Errors: a lost or rejected session (SHARE_SESSION_ERRORS), a broken
connection or an unanswered request open a new session after a backoff, and
the acknowledgements that were in flight fail (the broker releases those
records when their locks end). A partition whose leader moved is forgotten
here and fetched from its new leader after a metadata refresh. Errors
retrying cannot help (authorization, unsupported versions) go to
``on_fatal``, which makes the next poll raise them.

Imports: kpax.cluster, kpax.proto, kpax.structs, kpax.tasks,
kpax.consumer.record, kpax.consumer.share.*.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kpax.cluster.cluster import Cluster
from kpax.cluster.request_path import RetryPolicy
from kpax.consumer.record import ShareConsumerRecord
from kpax.consumer.share.acks import AcknowledgeType
from kpax.consumer.share.decode import Acquired, decode_acquired
from kpax.consumer.share.options import ShareSettings
from kpax.consumer.share.session import (
    CLOSE_EPOCH,
    ShareSession,
    acknowledge_request,
    fetch_request,
)
from kpax.proto.error_codes import TopicAuthorizationFailedError, UnsupportedVersionError
from kpax.proto.error_families import SHARE_SESSION_ERRORS, STALE_METADATA_ERRORS
from kpax.proto.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    error_for_code,
)
from kpax.proto.messages import ShareAcknowledgeRequest, ShareFetchRequest
from kpax.structs import TopicPartition
from kpax.tasks import cancel_and_wait, wait_quietly

log = logging.getLogger("kpax.share")

__all__ = ["AckResults", "ShareBuffer", "ShareFetcher"]

#: How long acknowledgements wait for a ShareFetch to carry them before they are
#: sent alone (a poll that empties the buffer sends one within microseconds).
ACK_LINGER = 0.1
#: ShareFetch's MaxRecords in ``batch_optimized`` mode: as many as the broker gives
#: (its cap on records locked per partition, ``fetch_max_bytes``), acquired in
#: batches of ``max_poll_records`` (the Java client asks the same). One request then
#: brings what several polls return: a share fetch costs the broker milliseconds
#: (its acknowledgements are persisted), so fewer, larger ones read faster.
BATCH_OPTIMIZED_MAX_RECORDS = 1 << 20
#: The first versions with RENEW acknowledgements and ``share_acquire_mode``.
_RENEW_VERSION = 2
_ACQUIRE_MODE_VERSION = 2

_RENEW = int(AcknowledgeType.RENEW)

#: Per partition: None (acknowledged) or the error that failed the acknowledgements.
AckResults = dict[TopicPartition, KafkaError | None]
#: ``on_acks(acks, results)``: what was sent and how each partition came out.
AckListener = Callable[[Mapping[TopicPartition, Mapping[int, int]], AckResults], None]


@dataclass
class Chunk:
    """Acquired records of one partition from one response, and how far the
    application has taken them."""

    node: int
    tp: TopicPartition
    records: list[ShareConsumerRecord]
    pos: int = 0


class ShareBuffer:
    """Acquired records not yet returned by ``poll``, and errors to raise there,
    in the order the responses brought them."""

    def __init__(self) -> None:
        self.items: deque[Chunk | BaseException] = deque()
        self.per_node: dict[int, int] = {}
        self.ready = asyncio.Event()
        #: A poll found nothing to return: fetch (cleared when records arrive).
        self.demand = False
        #: Called with a node id when the last chunk of that node is taken
        #: (-1: a poll asks for records).
        self.on_drained: Callable[[int], None] = lambda node: None

    def want(self) -> None:
        """A poll found the buffer empty: the fetcher fetches."""
        if not self.demand:
            self.demand = True
            self.on_drained(-1)

    def fetched(self) -> None:
        """A ShareFetch was answered: the demand it served is met (a poll still
        waiting is woken and asks again), so nothing is fetched for an application
        that stopped polling."""
        self.demand = False
        self.ready.set()

    def put(self, chunk: Chunk) -> None:
        self.demand = False
        self.items.append(chunk)
        self.per_node[chunk.node] = self.per_node.get(chunk.node, 0) + 1
        self.ready.set()

    def put_error(self, exc: BaseException) -> None:
        self.items.append(exc)
        self.ready.set()

    def held(self, node: int) -> int:
        return self.per_node.get(node, 0)

    def take(self, max_records: int) -> tuple[list[tuple[Chunk, int, int]], BaseException | None]:
        """Up to ``max_records`` records as (chunk, start, end) slices; or, when an
        error comes first, no records and that error."""
        out: list[tuple[Chunk, int, int]] = []
        left = max_records
        items = self.items
        while items and left > 0:
            head = items[0]
            if isinstance(head, BaseException):
                if out:
                    break
                items.popleft()
                return [], head
            start = head.pos
            end = min(len(head.records), start + left)
            if end > start:
                out.append((head, start, end))
                left -= end - start
            head.pos = end
            if end >= len(head.records):
                items.popleft()
                self._chunk_done(head.node)
        if not items:
            self.ready.clear()
        return out, None

    def put_back(self, slices: list[tuple[Chunk, int, int]]) -> None:
        """Records :meth:`take` gave but the application was never handed (an iterator
        stopped part-way through a poll's records): back at the front, in order,
        returned first by the next take. ``slices`` are the last ones taken."""
        items = self.items
        for chunk, start, _ in reversed(slices):
            if not (items and items[0] is chunk):  # taken to its end: it was removed
                items.appendleft(chunk)
                self.per_node[chunk.node] = self.per_node.get(chunk.node, 0) + 1
            chunk.pos = start
        if slices:
            self.ready.set()

    def _chunk_done(self, node: int) -> None:
        n = self.per_node.get(node, 0) - 1
        self.per_node[node] = max(n, 0)
        if n <= 0:
            self.on_drained(node)

    def drain(self) -> list[Chunk]:
        """Every chunk not wholly taken (for close: their rest is released)."""
        left = [c for c in self.items if isinstance(c, Chunk)]
        self.items.clear()
        self.per_node.clear()
        self.ready.clear()
        return left


@dataclass
class _Waiter:
    """A commit waiting for the answers to the requests carrying its acknowledgements."""

    future: asyncio.Future[AckResults]
    remaining: int = 0
    results: AckResults = field(default_factory=dict)

    def add(self, results: AckResults) -> None:
        self.results.update(results)
        self.remaining -= 1
        if self.remaining <= 0 and not self.future.done():
            self.future.set_result(self.results)


class _Node:
    """The member's state with one broker: its session, its acknowledgements."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.session = ShareSession(node_id)
        self.acks: dict[TopicPartition, dict[int, int]] = {}
        self.renews: dict[TopicPartition, dict[int, int]] = {}
        #: Commits waiting for the next request carrying acknowledgements.
        self.next_waiters: list[_Waiter] = []
        #: Commits waiting for the request in flight (which carries acknowledgements).
        self.inflight_waiters: list[_Waiter] | None = None
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        #: The broker was checked to speak ``share_acquire_mode`` (ShareFetch v2).
        self.mode_checked = False
        #: When the oldest acknowledgement in ``acks`` was made (loop time).
        self.acks_since = 0.0

    def has_acks(self) -> bool:
        return bool(self.acks) or bool(self.renews)


class ShareFetcher:
    """See the module docstring."""

    def __init__(
        self,
        cluster: Cluster,
        settings: ShareSettings,
        buffer: ShareBuffer,
        member: Callable[[], tuple[str, frozenset[TopicPartition]]],
        *,
        on_fatal: Callable[[BaseException], None],
        on_acks: AckListener,
    ) -> None:
        self.cluster = cluster
        self.settings = settings
        #: The one backoff policy (kpax.cluster.request_path) paces every retry here.
        self._policy = RetryPolicy(*settings.retry_backoff)
        self.group_id = settings.group_id
        self.buffer = buffer
        buffer.on_drained = self._drained
        self._member = member
        self._on_fatal = on_fatal
        self._on_acks = on_acks
        self._nodes: dict[int, _Node] = {}
        self._closing = False
        self._refreshing: asyncio.Task[None] | None = None
        #: The acquisition lock timeout the last ShareFetch answer gave (ms; -1: none yet).
        self.lock_timeout_ms = -1
        self.fetches = 0

    # ------------------------------------------------------------ wiring

    def _node(self, node_id: int) -> _Node:
        st = self._nodes.get(node_id)
        if st is None:
            st = self._nodes[node_id] = _Node(node_id)
        if st.task is None and not self._closing:
            st.task = asyncio.ensure_future(self._run(st))
            st.task.add_done_callback(self._task_done)
        return st

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None and not self._closing:
            log.error("share group %s: fetcher failed: %r", self.group_id, exc)
            self._on_fatal(exc)

    def _drained(self, node: int) -> None:
        for st in self._nodes.values() if node < 0 else [self._nodes.get(node)]:
            if st is not None:
                st.wake.set()

    def leader(self, tp: TopicPartition) -> int:
        info = self.cluster.snapshot.topics.get(tp.topic)
        p = info.partitions.get(tp.partition) if info is not None else None
        return p.leader if p is not None else -1

    def assignment_changed(self) -> None:
        """The member's partitions (or their leaders) changed: start the loops of
        new leaders and wake every loop to add or forget partitions."""
        _, assigned = self._member()
        unknown = False
        for tp in assigned:
            if not self._led(tp):
                unknown = True
                continue
            self._node(self.leader(tp))
        for st in self._nodes.values():
            st.wake.set()
        if unknown:
            self._refresh({tp.topic for tp in assigned})

    def _refresh(self, topics: Iterable[str]) -> None:
        """Refresh the metadata of ``topics`` in the background, with backoff, until
        every assigned partition has a live leader again (a broker restarting
        answers nothing for seconds), then start and wake the loops."""
        if self._closing or (self._refreshing is not None and not self._refreshing.done()):
            return
        names = set(topics)

        async def refresh() -> None:
            rounds = 0
            while not self._closing:
                rounds += 1
                await asyncio.sleep(self._policy.delay(rounds))
                with contextlib.suppress(KafkaError, asyncio.TimeoutError):
                    await asyncio.wait_for(
                        self.cluster.refresh(sorted(names)), self.settings.request_timeout
                    )
                _, assigned = self._member()
                names.update(tp.topic for tp in assigned)
                if all(self._led(tp) for tp in assigned):
                    break
            self._refreshing = None
            if not self._closing:  # (closing: no loop to start, and no refresh again)
                self.assignment_changed()

        self._refreshing = asyncio.ensure_future(refresh())

    def _led(self, tp: TopicPartition) -> bool:
        """``tp`` has a leader the metadata knows."""
        node = self.leader(tp)
        return node >= 0 and node in self.cluster.snapshot.brokers

    # ------------------------------------------------------------ acknowledgements

    def acknowledge(
        self, node: int, tp: TopicPartition, offsets: Mapping[int, int], *, renew: bool = False
    ) -> None:
        """Queue acknowledgements of records acquired from ``node``."""
        st = self._node(node)
        target = st.renews if renew else st.acks
        if not st.acks and not renew:
            st.acks_since = asyncio.get_running_loop().time()
        target.setdefault(tp, {}).update(offsets)
        st.wake.set()

    def commit(self) -> asyncio.Future[AckResults]:
        """A future of the results of every acknowledgement queued or in flight now."""
        fut: asyncio.Future[AckResults] = asyncio.get_running_loop().create_future()
        waiter = _Waiter(fut)
        for st in self._nodes.values():
            if st.inflight_waiters is not None:
                st.inflight_waiters.append(waiter)
                waiter.remaining += 1
            if st.has_acks():
                st.next_waiters.append(waiter)
                waiter.remaining += 1
                st.wake.set()
        if waiter.remaining == 0:
            fut.set_result({})
        return fut

    def _finish(
        self,
        sent: Mapping[TopicPartition, Mapping[int, int]],
        results: AckResults,
        waiters: list[_Waiter] | None,
    ) -> None:
        if sent:
            self._on_acks(sent, results)
        for w in waiters or ():
            w.add(results)

    # ------------------------------------------------------------ the loop

    def _wanted(self, node: int) -> set[TopicPartition]:
        _, assigned = self._member()
        return {tp for tp in assigned if self.leader(tp) == node}

    def _topic_ids(self, tps: Iterable[TopicPartition]) -> dict[str, uuid.UUID]:
        out: dict[str, uuid.UUID] = {}
        for tp in tps:
            info = self.cluster.snapshot.topics.get(tp.topic)
            if info is not None and info.topic_id is not None:
                out[tp.topic] = info.topic_id
        return out

    async def _run(self, st: _Node) -> None:
        failures = 0  # requests in a row that failed (or answered only errors)
        while not self._closing:
            wanted = self._wanted(st.node_id)
            add, forget = st.session.plan(wanted)
            fetch = bool(wanted) and self.buffer.demand and self.buffer.held(st.node_id) == 0
            if not (fetch or st.has_acks() or (forget and st.session.open)):
                st.wake.clear()
                await st.wake.wait()
                continue
            if not st.session.open and st.has_acks():
                self._fail_acks(st, "the share session they were acquired in is gone")
                continue
            foreign = any(tp not in wanted for tp in st.acks)
            alone = bool(st.renews) or (
                bool(st.acks) and (bool(st.next_waiters) or foreign or not wanted)
            )
            if st.acks and not fetch and not alone:
                # the next poll's fetch will carry them: wait a little for it
                left = st.acks_since + ACK_LINGER - asyncio.get_running_loop().time()
                if left > 0 and not (forget and st.session.open):
                    st.wake.clear()
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(st.wake.wait(), left)
                    continue
                alone = True
            try:
                if alone:
                    await self._acknowledge(st)
                    failures = 0
                elif await self._fetch(
                    st,
                    (add if st.session.open else wanted) if fetch else set(),
                    forget,
                    fetch,
                ):
                    failures = 0
                else:  # every partition answered with an error: do not spin on it
                    failures += 1
                    await asyncio.sleep(self._policy.delay(failures))
            except KafkaError as exc:
                if self._closing:
                    return
                if not exc.retriable:
                    raise
                log.info(
                    "share group %s: share session with broker %d: %s; opening a new one",
                    self.group_id,
                    st.node_id,
                    exc,
                )
                st.session.reset()
                if isinstance(exc, (KafkaConnectionError, KafkaTimeoutError)) and wanted:
                    # the broker may be gone: learn where its partitions lead now
                    for tp in wanted:
                        self.cluster.leader_is_down(tp.topic, tp.partition)
                    self._refresh(tp.topic for tp in wanted)
                failures += 1
                await asyncio.sleep(self._policy.delay(failures))

    def _fail_acks(self, st: _Node, why: str) -> None:
        err = KafkaError(
            f"acknowledgements to broker {st.node_id} for share group {self.group_id!r} not "
            f"sent: {why}; the records are delivered again when their locks end",
            retriable=False,
        )
        results: AckResults = {}
        for acks in (st.acks, st.renews):
            if acks:
                failed: AckResults = dict.fromkeys(acks, err)
                self._finish(dict(acks), failed, None)
                results.update(failed)
                acks.clear()
        waiters, st.next_waiters = st.next_waiters, []
        for w in waiters:  # the commits waiting for them learn why
            w.add(results)

    def _take_acks(
        self, st: _Node, acks: dict[TopicPartition, dict[int, int]]
    ) -> tuple[dict[TopicPartition, dict[int, int]], list[_Waiter] | None]:
        sent = dict(acks)
        acks.clear()
        waiters: list[_Waiter] | None = None
        if sent:
            waiters, st.next_waiters = st.next_waiters, []
        return sent, waiters

    async def _send(self, st: _Node, req: Any, sent: Any, waiters: Any, timeout: float) -> Any:
        """Send ``req`` on ``st``'s fetch connection; on no answer the session is
        reset and the acknowledgements in it fail."""
        st.inflight_waiters = waiters
        try:
            broker = self.cluster.fetch_broker(st.node_id)
            return await broker.request(req, timeout=timeout)
        except (KafkaError, asyncio.TimeoutError) as exc:
            err = (
                exc
                if isinstance(exc, KafkaError)
                else KafkaTimeoutError(f"no answer from broker {st.node_id}")
            )
            st.session.reset()
            self._finish(sent, dict.fromkeys(sent, err), waiters)
            if isinstance(err, (KafkaConnectionError, KafkaTimeoutError)):
                err = type(err)(
                    f"share session with broker {st.node_id} for share group {self.group_id!r}: "
                    f"{err.message}",
                    retriable=True,
                )
            raise err from None
        finally:
            st.inflight_waiters = None

    def _session_error(self, st: _Node, resp: Any, what: str, sent: Any, waiters: Any) -> None:
        """Raise the error of a top-level error answer (after failing ``sent``)."""
        code = resp.error_code
        err = error_for_code(code)(
            f"{what} for share group {self.group_id!r} to broker {st.node_id}",
            error_message=resp.error_message,
        )
        self._finish(sent, dict.fromkeys(sent, err), waiters)
        if isinstance(err, SHARE_SESSION_ERRORS):
            st.session.reset()
        raise err

    async def _acknowledge(self, st: _Node, *, close: bool = False) -> None:
        version = 0
        if st.renews:
            # Asked before the acknowledgements leave the queue (this may wait for a
            # new connection): a commit meanwhile finds them queued and waits for them.
            version = await self.cluster.fetch_broker(st.node_id).api_version(
                ShareAcknowledgeRequest
            )
        acks: dict[TopicPartition, dict[int, int]] = {}
        for queued in (st.renews, st.acks):  # a later ACCEPT/RELEASE/REJECT wins over RENEW
            for tp, offsets in queued.items():
                acks.setdefault(tp, {}).update(offsets)
        # (every RENEW is in st.renews, non-empty before the await if it is now)
        renew = any(t == _RENEW for offsets in acks.values() for t in offsets.values())
        st.acks.clear()
        st.renews.clear()
        sent, waiters = self._take_acks(st, acks)
        if renew and version < _RENEW_VERSION:
            err = UnsupportedVersionError(
                f"RENEW acknowledgements need ShareAcknowledge v{_RENEW_VERSION} (Kafka "
                f"4.2+); broker {st.node_id} speaks up to v{version}",
                retriable=False,
            )
            self._finish(sent, dict.fromkeys(sent, err), waiters)
            return
        member_id, _ = self._member()
        req = acknowledge_request(
            self.group_id,
            member_id,
            CLOSE_EPOCH if close else st.session.epoch,
            acks=sent,
            topic_ids=self._topic_ids(sent),
            renew=renew,
        )
        resp = await self._send(st, req, sent, waiters, self.settings.request_timeout)
        if resp.error_code:
            self._session_error(st, resp, "ShareAcknowledge", sent, waiters)
        if not close:
            st.session.answered()
        results: AckResults = {}
        names = self._names()
        for topic in resp.responses:
            name = names.get(topic.topic_id)
            for p in topic.partitions:
                if name is None:
                    continue
                tp = TopicPartition(name, p.partition_index)
                outcome = self._ack_error(tp, p.error_code, p.error_message)
                results[tp] = outcome
                if isinstance(outcome, STALE_METADATA_ERRORS):
                    self.cluster.leader_is_down(tp.topic, tp.partition)
        for tp in sent:
            results.setdefault(tp, None)
        self._finish(sent, results, waiters)

    def _ack_error(self, tp: TopicPartition, code: int, message: str | None) -> KafkaError | None:
        """The error an acknowledgement answer's ``code`` stands for (None: accepted)."""
        if not code:
            return None
        return error_for_code(code)(
            f"acknowledging records of {tp} for share group {self.group_id!r}",
            error_message=message,
        )

    def _names(self) -> dict[uuid.UUID, str]:
        return {
            info.topic_id: name
            for name, info in self.cluster.snapshot.topics.items()
            if info.topic_id is not None
        }

    async def _fetch(
        self,
        st: _Node,
        add: set[TopicPartition],
        forget: set[TopicPartition],
        fetch: bool,
    ) -> bool:
        """One ShareFetch; False when every partition in the answer had an error."""
        s = self.settings
        if s.acquire_mode and not st.mode_checked:
            version = await self.cluster.fetch_broker(st.node_id).api_version(ShareFetchRequest)
            if version < _ACQUIRE_MODE_VERSION:
                raise UnsupportedVersionError(
                    f"share_acquire_mode='record_limit' needs ShareFetch "
                    f"v{_ACQUIRE_MODE_VERSION} (Kafka 4.2+); broker {st.node_id} speaks up to "
                    f"v{version}",
                    retriable=False,
                )
            st.mode_checked = True
        sent, waiters = self._take_acks(st, st.acks)
        member_id, _ = self._member()
        max_wait = s.fetch_max_wait_ms if fetch else 0
        req = fetch_request(
            self.group_id,
            member_id,
            st.session.epoch,
            fetch=add,
            forget=forget,
            acks=sent,
            topic_ids=self._topic_ids([*add, *forget, *sent]),
            max_wait_ms=max_wait,
            min_bytes=s.fetch_min_bytes,
            max_bytes=s.fetch_max_bytes,
            max_records=s.max_poll_records if s.acquire_mode else BATCH_OPTIMIZED_MAX_RECORDS,
            batch_size=s.max_poll_records,
            acquire_mode=s.acquire_mode,
        )
        st.session.sending(add, forget)
        try:
            resp = await self._send(st, req, sent, waiters, s.request_timeout + max_wait / 1000)
        finally:
            if fetch:
                self.buffer.fetched()
        self.fetches += 1
        if resp.error_code:
            self._session_error(st, resp, "ShareFetch", sent, waiters)
        st.session.answered()
        if resp.acquisition_lock_timeout_ms > 0:
            self.lock_timeout_ms = resp.acquisition_lock_timeout_ms
        results: AckResults = {}
        moved: set[TopicPartition] = set()
        errors = answered = 0
        names = self._names()
        for topic in resp.responses:
            name = names.get(topic.topic_id)
            if name is None:
                log.warning(
                    "share group %s: answer names unknown topic id %s",
                    self.group_id,
                    topic.topic_id,
                )
                continue
            for p in topic.partitions:
                tp = TopicPartition(name, p.partition_index)
                if tp in sent:
                    results[tp] = self._ack_error(
                        tp, p.acknowledge_error_code, p.acknowledge_error_message
                    )
                answered += 1
                if p.error_code:
                    errors += 1
                    self._partition_error(st, tp, p, moved)
                if p.acquired_records:
                    self._deliver(st, tp, p)
        for tp in sent:
            results.setdefault(tp, None)
        self._finish(sent, results, waiters)
        if moved:
            st.session.drop(moved)
            self._refresh(tp.topic for tp in moved)
        return errors == 0 or errors < answered

    def _partition_error(
        self, st: _Node, tp: TopicPartition, p: Any, moved: set[TopicPartition]
    ) -> None:
        err = error_for_code(p.error_code)(
            f"ShareFetch of {tp} for share group {self.group_id!r} from broker {st.node_id}",
            error_message=p.error_message,
        )
        if isinstance(err, STALE_METADATA_ERRORS):
            self.cluster.leader_is_down(tp.topic, tp.partition)
            moved.add(tp)
            return
        if isinstance(err, TopicAuthorizationFailedError) or not err.retriable:
            self.buffer.put_error(err)
            return
        log.info("share group %s: %s", self.group_id, err)

    def _deliver(self, st: _Node, tp: TopicPartition, p: Any) -> None:
        s = self.settings
        decoded = decode_acquired(
            tp.topic,
            tp.partition,
            p.records,
            [Acquired(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records],
            check_crcs=s.check_crcs,
            max_decompressed=s.max_decompressed_batch_bytes,
            key_deserializer=s.key_deserializer,
            value_deserializer=s.value_deserializer,
        )
        if decoded.auto_acks:
            st.acks.setdefault(tp, {}).update(decoded.auto_acks)
        if decoded.records:
            self.buffer.put(Chunk(st.node_id, tp, decoded.records))
        if decoded.error is not None:
            self.buffer.put_error(decoded.error)

    # ------------------------------------------------------------ close

    def stop(self) -> None:
        """Send no new request (the loops end after the one they are sending);
        acknowledgements queued from now on wait for :meth:`close`."""
        self._closing = True
        for st in self._nodes.values():
            st.wake.set()

    async def close(self, deadline: float) -> None:
        """Stop; let each session's request in flight finish (a long poll at most
        ``fetch_max_wait_ms``), then send what is left to acknowledge and close every
        session (which releases whatever this member still holds)."""
        self.stop()
        loop = asyncio.get_running_loop()
        if self._refreshing is not None:
            self._refreshing.cancel()
        tasks = [st.task for st in self._nodes.values() if st.task is not None]
        if tasks:
            wait = min(deadline - loop.time(), self.settings.fetch_max_wait_ms / 1000 + 1.0)
            _, late = await asyncio.wait(tasks, timeout=max(wait, 0.1))
            await cancel_and_wait(late)
            await wait_quietly(tasks)

        async def close_one(st: _Node) -> None:
            if not st.session.open and not st.has_acks():
                return
            try:
                await asyncio.wait_for(
                    self._acknowledge(st, close=True), max(deadline - loop.time(), 0.1)
                )
            except (KafkaError, asyncio.TimeoutError) as exc:
                log.info(
                    "share group %s: closing the share session with broker %d: %s",
                    self.group_id,
                    st.node_id,
                    exc,
                )
            st.session.reset()

        await asyncio.gather(*(close_one(st) for st in self._nodes.values()))
