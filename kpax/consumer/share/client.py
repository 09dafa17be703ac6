"""The asyncio share consumer core (``kpax.aio.ShareConsumer``): KIP-932 share groups.

Role: owns the share consumer's :class:`~kpax.cluster.Cluster`, its
:class:`~kpax.consumer.share.membership.ShareMembership` (ShareGroupHeartbeat),
its :class:`~kpax.consumer.share.fetcher.ShareFetcher` (share sessions,
ShareFetch, ShareAcknowledge) and the buffer of acquired records, and keeps
the acknowledgement rules:

- ``share_acknowledgement_mode="implicit"`` (the default): the next ``poll``
  or ``commit`` accepts every record the last poll returned;
  ``acknowledge`` is refused (IllegalStateError), as in the Java client;
- ``"explicit"``: every record a poll returned must be acknowledged
  (ACCEPT, RELEASE, REJECT; RENEW extends its lock and keeps it pending)
  before the next poll, else that poll raises IllegalStateError naming them.

Iteration (``async for``) hands a poll's records out one at a time: the ones
it moved past count as processed, the one it handed out last is in the
application's hand, and when the application leaves the loop part-way
through a batch the records never handed out go back to the buffer
(returned first by the next poll, released by ``close``). The bookkeeping is
:class:`~kpax.consumer.share.acks.HandOut`; the sync face reports where its
own iterator stopped through :meth:`AsyncShareConsumer._iterated`.

``commit()`` sends what is acknowledged now and returns ``{TopicPartition:
None or the error}``; ``commit_async()`` does the same in the background,
its result going to the acknowledgement commit callback, which gets every
acknowledgement result (``callback(offsets_by_partition, error_or_None)``)
inside ``poll``/``commit``/``close``, on the caller's side. ``close``, as
Java's, accepts nothing the application did not finish: implicit mode
accepts only what an iterator moved past, and releases the record in hand,
the last poll's records (a poll or a commit accepts them, not a close) and
whatever was acquired but not handed out; explicit mode sends the
acknowledgements made and releases the rest. Then it closes the share
sessions (the brokers release what is left) and leaves.

A share consumer belongs to the event loop that started it (a call from
another loop is an IllegalStateError: kpax.event_loops), is unusable in a
child of fork() (kpax.forks), and warns (ResourceWarning) when collected
unclosed.

Imports: kpax.cluster, kpax.config, kpax.proto, kpax.structs, kpax.consumer.record,
kpax.consumer.share.*, kpax.forks, kpax.event_loops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import operator
import warnings
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kpax.cluster.cluster import Cluster
from kpax.config import given_options, resolve
from kpax.consumer.record import ShareConsumerRecord
from kpax.consumer.share.acks import AcknowledgeType, HandOut, parse_ack_type
from kpax.consumer.share.fetcher import AckResults, Chunk, ShareBuffer, ShareFetcher
from kpax.consumer.share.membership import ShareMembership
from kpax.consumer.share.options import (
    SHARE_CONSUMER_OPTIONS,
    ShareConsumerConfig,
    ShareSettings,
)
from kpax.event_loops import DONE, Done, check_loop
from kpax.forks import forked_error
from kpax.forks import track as track_fork
from kpax.proto.errors import (
    ClientClosedError,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
)
from kpax.proto.topic_names import check_topic
from kpax.structs import TopicPartition

if TYPE_CHECKING:
    from typing_extensions import Unpack  # (typing's from Python 3.11)

log = logging.getLogger("kpax.share")

__all__ = ["AckCallback", "AsyncShareConsumer"]

#: ``callback(offsets, error)``: acknowledgements of ``offsets`` ({partition:
#: offsets}) were committed (``error`` None) or failed with ``error``.
AckCallback = Callable[[dict[TopicPartition, set[int]], BaseException | None], Any]

_RELEASE = int(AcknowledgeType.RELEASE)
_RENEW = int(AcknowledgeType.RENEW)


def _shown(value: object) -> str:
    """``value`` for an error message: its type and a short repr."""
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _int_arg(name: str, value: object) -> int:
    """``value`` of ``acknowledge``'s argument ``name`` as an int: TypeError naming
    the argument for anything else (a bool too: False is not partition 0)."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(
            f"acknowledge(topic, partition, offset, type): {name} must be an int, "
            f"got {_shown(value)}"
        )
    return operator.index(value)  # type: ignore[arg-type]


class AsyncShareConsumer:
    """``kpax.aio.ShareConsumer("host:9092", group_id="workers")``: ``subscribe``, then
    ``await poll()`` / ``async for rec in consumer``. An async context manager."""

    _client_name = "kpax.aio.ShareConsumer"
    #: Set on a share consumer inherited through fork() (kpax.forks).
    _forked = False

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | Mapping[str, Any] | None = None,
        /,
        **config: Unpack[ShareConsumerConfig],
    ) -> None:
        self.config = resolve(
            "share consumer", SHARE_CONSUMER_OPTIONS, given_options(bootstrap_servers, config)
        )
        self.settings = settings = ShareSettings.from_config(self.config)
        self.cluster = Cluster.from_config(self.config, allow_auto_topic_creation=False)
        self.cluster.client_name = self._client_name
        self.buffer = ShareBuffer()
        self.membership: ShareMembership | None = None
        self.fetcher: ShareFetcher | None = None
        self._explicit = settings.explicit
        self._max_records = settings.max_poll_records
        #: What the last poll returned and how much of it the application moved past.
        self._hand: HandOut[Chunk] = HandOut()
        #: ``async for``: the iterator over the last poll's records and their number.
        self._cursor: tuple[Iterator[ShareConsumerRecord], int] | None = None
        #: Explicit mode: records returned and not yet acknowledged -> their broker.
        self._pending: dict[tuple[TopicPartition, int], int] = {}
        #: Explicit mode: records renewed, still to be acknowledged -> their broker.
        self._renewed: dict[tuple[TopicPartition, int], int] = {}
        self._results: deque[tuple[dict[TopicPartition, set[int]], BaseException | None]] = deque()
        self._callback: AckCallback | None = None
        #: Keep acknowledgement results for :meth:`take_ack_results` (the sync face
        #: runs its callback on the application's thread) even without a callback.
        self.collect_ack_results = False
        self._fatal: BaseException | None = None
        self._started = False
        self._closed = False
        track_fork(self)

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Connect to the cluster and get ready to join the share group; ``async with`` calls it."""
        if self._started:
            return
        await self.cluster.start()
        s = self.settings
        self.membership = ShareMembership(
            self.cluster,
            s.group_id,
            rack=s.client_rack,
            request_timeout=s.request_timeout,
            api_timeout=s.api_timeout,
            backoff=s.retry_backoff,
            on_assignment=self._assignment_changed,
            on_fatal=self._fail,
        )
        self.fetcher = ShareFetcher(
            self.cluster,
            s,
            self.buffer,
            self._member,
            on_fatal=self._fail,
            on_acks=self._acks_done,
        )
        self._started = True

    async def __aenter__(self) -> AsyncShareConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _check(self) -> None:
        if self._forked:
            raise forked_error(self, "a call")
        if self._closed:
            raise ClientClosedError("the share consumer is closed")
        if not self._started:
            raise IllegalStateError(
                "the share consumer is not started: await consumer.start() first"
            )
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

    def _member(self) -> tuple[str, frozenset[TopicPartition]]:
        m = self.membership
        assert m is not None
        return m.member_id, m.assignment

    def _assignment_changed(self, partitions: frozenset[TopicPartition]) -> None:
        if self.fetcher is not None:
            self.fetcher.assignment_changed()

    def _fail(self, exc: BaseException) -> None:
        if self._fatal is None:
            self._fatal = exc
        self.buffer.ready.set()

    async def close(self, timeout: float = 30.0) -> None:
        """Accept only what the application finished with (implicit mode: the records
        an iterator moved past; explicit mode: what it acknowledged), release the
        rest (the record in hand, the last poll's records, whatever was acquired
        and not handed out), close the share sessions and leave the group, within
        ``timeout`` seconds. Call :meth:`commit` first to accept the last poll's
        records (implicit mode). On the event loop that started the consumer only
        (IllegalStateError from another loop)."""
        if self._forked:
            raise forked_error(self, "close()")
        if self._closed:
            return
        check_loop(self.cluster.loop, "close()", self._client_name)
        self._closed = True
        if not self._started:
            await self.cluster.close()
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        fetcher = self.fetcher
        assert fetcher is not None and self.membership is not None
        try:
            fetcher.stop()  # what is queued below goes with the sessions' close
            self._take_cursor(closing=True)
            if self._explicit:
                self._hand.take()  # the unacknowledged ones are in _pending
            else:
                self._queue(self._hand.settle(self._hand.moved))
            self._release_buffered()
            for (tp, offset), node in [*self._pending.items(), *self._renewed.items()]:
                fetcher.acknowledge(node, tp, {offset: _RELEASE})
            self._pending.clear()
            self._renewed.clear()
            with contextlib.suppress(Exception, asyncio.TimeoutError):
                await asyncio.wait_for(fetcher.close(deadline), max(timeout * 0.7, 0.1))
            with contextlib.suppress(Exception, asyncio.TimeoutError):
                await asyncio.wait_for(self.membership.leave(), max(deadline - loop.time(), 0.1))
        finally:
            self._run_callbacks()
            with contextlib.suppress(Exception, asyncio.TimeoutError):
                await asyncio.wait_for(self.cluster.close(), max(deadline - loop.time(), 0.1))

    def _release_buffered(self) -> None:
        """Release what was acquired and never returned by a poll (for other members)."""
        fetcher = self.fetcher
        assert fetcher is not None
        for chunk in self.buffer.drain():
            rest = [r.offset for r in chunk.records[chunk.pos :]]
            if rest:
                fetcher.acknowledge(chunk.node, chunk.tp, dict.fromkeys(rest, _RELEASE))

    # ------------------------------------------------------------ subscription

    def subscribe(self, topics: Iterable[str]) -> Done:
        """Join the share group, reading ``topics`` (replacing any earlier subscription).

        A plain method, like :meth:`kpax.aio.Consumer.subscribe`: calling it is
        enough, and ``await consumer.subscribe([...])`` works too (the result is
        an awaitable that is already done)."""
        self._check()
        names = [topics] if isinstance(topics, str) else list(topics)
        if not names or not all(isinstance(t, str) and t for t in names):
            raise ValueError("subscribe() takes a non-empty list of topic names")
        for name in names:
            check_topic(name)  # InvalidTopicError naming a name Kafka would refuse
        assert self.membership is not None
        self.membership.subscribe(names)
        return DONE

    async def unsubscribe(self) -> None:
        """Leave the share group (what the last poll returned is accepted first in
        implicit mode, what was acquired and not handed out is released, and
        acknowledgements are sent)."""
        self._check()
        assert self.membership is not None
        self._take_cursor()
        self._release_buffered()
        await self.commit()
        await self.membership.unsubscribe()

    def subscription(self) -> set[str]:
        """The topics subscribed to."""
        return set(self.membership.subscription) if self.membership is not None else set()

    def assignment(self) -> set[TopicPartition]:
        """The partitions the share group gives this member now (other members may
        share them)."""
        return set(self.membership.assignment) if self.membership is not None else set()

    @property
    def member_id(self) -> str:
        """This member's id in the share group (KIP-932; chosen by the client)."""
        assert self.membership is not None
        return self.membership.member_id

    def acquisition_lock_timeout_ms(self) -> int | None:
        """How long acquired records stay locked to this member (ms), as the last
        ShareFetch answer said; None before the first answer."""
        t = self.fetcher.lock_timeout_ms if self.fetcher is not None else -1
        return t if t >= 0 else None

    # ------------------------------------------------------------ polling

    async def poll(
        self, timeout: float = 0.0, *, run_callbacks: bool = True
    ) -> list[ShareConsumerRecord]:
        """Records acquired for this member, at most ``max_poll_records``, waiting up
        to ``timeout`` seconds for the first; [] when none came."""
        self._check()
        self._settle_last_poll()
        if run_callbacks:
            self._run_callbacks()
        assert self.membership is not None
        if not self.membership.subscription:
            raise IllegalStateError("poll() on a share consumer that is not subscribed")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout, 0.0)
        while True:
            if self._fatal is not None:
                raise self._fatal
            slices, error = self.buffer.take(self._max_records)
            if error is not None:
                raise error
            if slices:
                return self._hand_out(slices)
            self.buffer.want()
            left = deadline - loop.time()
            if left <= 0:
                return []
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.buffer.ready.wait(), left)

    def _hand_out(self, slices: list[Any]) -> list[ShareConsumerRecord]:
        out: list[ShareConsumerRecord] = []
        if len(slices) == 1:
            chunk, start, end = slices[0]
            out = chunk.records[start:end] if (start or end < len(chunk.records)) else chunk.records
        else:
            for chunk, start, end in slices:
                out.extend(chunk.records[start:end])
        if self._explicit:
            pending = self._pending
            for chunk, start, end in slices:
                node, tp = chunk.node, chunk.tp
                for rec in chunk.records[start:end]:
                    pending[(tp, rec.offset)] = node
        self._hand.handed(slices)
        return out

    def _queue(self, acks: Iterable[tuple[int, Any, dict[int, int]]]) -> None:
        fetcher = self.fetcher
        assert fetcher is not None
        for node, tp, offsets in acks:
            fetcher.acknowledge(node, tp, offsets)

    def _accept_last(self) -> None:
        """Implicit mode: accept every record the last poll handed out."""
        self._queue(self._hand.settle())

    def _iterated(self, handed: int) -> None:
        """An iterator handed the application only the first ``handed`` records the last
        poll returned (the last of them is still in its hand): the rest go back to
        the buffer, returned first by the next poll (the sync face's iterator
        reports here where it stopped)."""
        rest = self._hand.iterated(handed)
        if not rest:
            return
        if self._explicit:
            for chunk, start, end in rest:
                for rec in chunk.records[start:end]:
                    self._pending.pop((chunk.tp, rec.offset), None)
        self.buffer.put_back(rest)

    def _take_cursor(self, closing: bool = False) -> None:
        """``async for`` left its batch (the next poll, a commit, close): tell
        :meth:`iterated` where it stopped, and end that batch for the iterator."""
        cursor, self._cursor = self._cursor, None
        if cursor is None:
            return
        it, count = cursor
        left = operator.length_hint(it)
        if left:
            deque(it, maxlen=0)  # a suspended ``async for`` must not hand them out now
        elif not closing:
            return  # all handed out: the poll or commit accepts them all
        self._iterated(count - left)

    def _settle_last_poll(self) -> None:
        self._take_cursor()
        if not self._explicit:
            self._accept_last()
            return
        if self._pending:
            keys = sorted(self._pending, key=lambda k: (k[0], k[1]))
            shown = ", ".join(f"{tp}@{off}" for tp, off in keys[:5])
            more = f" and {len(keys) - 5} more" if len(keys) > 5 else ""
            raise IllegalStateError(
                f"share_acknowledgement_mode='explicit': {len(keys)} records the last poll "
                f"returned are not acknowledged ({shown}{more}); call acknowledge(record, type) "
                "for each before polling again"
            )
        self._hand.take()

    def __aiter__(self) -> AsyncIterator[ShareConsumerRecord]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[ShareConsumerRecord]:
        while not self._closed:
            records = await self.poll(1.0)
            if not records:
                continue
            it = iter(records)
            self._cursor = (it, len(records))
            for rec in it:  # one by one: see _take_cursor
                yield rec

    # ------------------------------------------------------------ acknowledging

    def acknowledge(
        self,
        record: ShareConsumerRecord | str,
        partition: int | Any = None,
        offset: int | None = None,
        type: AcknowledgeType | str | int = AcknowledgeType.ACCEPT,
    ) -> None:
        """Acknowledge one record a poll returned (explicit mode):
        ``acknowledge(record, type=...)`` or ``acknowledge(topic, partition, offset, type)``.
        RENEW extends the record's lock and leaves it to be acknowledged again."""
        self._check()
        tp, off, kind = self._check_acknowledge(record, partition, offset, type)
        self._apply_acknowledge(tp, off, kind)

    def _check_acknowledge(
        self,
        record: ShareConsumerRecord | str,
        partition: int | Any = None,
        offset: int | None = None,
        type: AcknowledgeType | str | int = AcknowledgeType.ACCEPT,
    ) -> tuple[TopicPartition, int, AcknowledgeType]:
        """What ``acknowledge`` would acknowledge, or the error it would raise (no
        state is changed: the sync face checks on the caller's thread)."""
        kind = parse_ack_type(type)
        if isinstance(record, str):
            tp = TopicPartition(record, _int_arg("partition", partition))
            off = _int_arg("offset", offset)
        elif isinstance(record, ShareConsumerRecord):
            if offset is not None:
                raise TypeError(
                    f"acknowledge(record, type) takes no offset (got offset={offset!r}); "
                    "by coordinates: acknowledge(topic, partition, offset, type)"
                )
            if partition is not None:  # acknowledge(record, AcknowledgeType.X), as in Java
                kind = parse_ack_type(partition)
            tp, off = TopicPartition(record.topic, record.partition), record.offset
        else:
            raise TypeError(
                "acknowledge() takes a record a poll returned (a ShareConsumerRecord) or a "
                f"topic name, partition and offset; got record={_shown(record)}"
            )
        if not self._explicit:
            raise IllegalStateError(
                "acknowledge() needs share_acknowledgement_mode='explicit'; in implicit mode "
                "the next poll (or commit) accepts every record the last poll returned"
            )
        key = (tp, off)
        if key not in self._pending and key not in self._renewed:
            raise IllegalStateError(
                f"record {tp}@{off} was not returned by a poll of this consumer or is "
                "already acknowledged"
            )
        return tp, off, kind

    def _apply_acknowledge(self, tp: TopicPartition, off: int, kind: AcknowledgeType) -> None:
        """Queue a checked acknowledgement (on the event loop)."""
        key = (tp, off)
        node = self._pending.pop(key, None)
        if node is None:
            node = self._renewed.get(key)
        if node is None:
            return  # acknowledged meanwhile
        fetcher = self.fetcher
        assert fetcher is not None
        if kind is AcknowledgeType.RENEW:
            self._renewed[key] = node
            fetcher.acknowledge(node, tp, {off: _RENEW}, renew=True)
            return
        self._renewed.pop(key, None)
        fetcher.acknowledge(node, tp, {off: int(kind)})

    def set_acknowledgement_commit_callback(self, callback: AckCallback | None) -> None:
        """``callback(offsets, error)`` for every acknowledgement result: ``offsets``
        maps each partition to the offsets acknowledged, ``error`` is None or why
        they failed. Runs inside poll, commit and close."""
        self._callback = callback

    def _acks_done(
        self, sent: Mapping[TopicPartition, Mapping[int, int]], results: AckResults
    ) -> None:
        if self._callback is None and not self.collect_ack_results:
            return
        groups: dict[int, tuple[dict[TopicPartition, set[int]], BaseException | None]] = {}
        for tp, offsets in sent.items():
            err = results.get(tp)
            kept = {o for o, t in offsets.items() if t != 0}  # gaps are the client's own
            if not kept:
                continue
            groups.setdefault(id(err), ({}, err))[0][tp] = kept
        self._results.extend(groups.values())

    def _run_callbacks(self) -> None:
        callback = self._callback
        if callback is None:
            return  # results (if collected) wait for take_ack_results
        while self._results:
            offsets, err = self._results.popleft()
            try:
                callback(offsets, err)
            except Exception:  # a callback's failure is the application's, logged
                log.exception("acknowledgement commit callback failed")

    def _take_ack_results(
        self,
    ) -> list[tuple[dict[TopicPartition, set[int]], BaseException | None]]:
        """The acknowledgement results not yet given to the callback (the sync face
        runs the callback on the application's thread)."""
        out = list(self._results)
        self._results.clear()
        return out

    async def commit(
        self, timeout: float | None = None, *, run_callbacks: bool = True
    ) -> dict[TopicPartition, KafkaError | None]:
        """Send every acknowledgement made so far (implicit mode: accept what the last
        poll returned first; in an ``async for`` loop, what it has handed out, the
        record in hand included) and wait for the brokers' answers: ``{TopicPartition:
        None or the error}``."""
        self._check()
        self._take_cursor()
        if not self._explicit:
            self._accept_last()
        fetcher = self.fetcher
        assert fetcher is not None
        fut = fetcher.commit()
        limit = timeout if timeout is not None else self.settings.api_timeout
        try:
            results = await asyncio.wait_for(asyncio.shield(fut), limit)
        except asyncio.TimeoutError:
            raise KafkaTimeoutError(
                f"commit of share group {self.settings.group_id!r}: the brokers did not answer "
                f"the acknowledgements within {limit:g}s (they may still be applied)"
            ) from None
        finally:
            if run_callbacks:
                self._run_callbacks()
        return dict(results)

    def commit_async(self) -> asyncio.Future[AckResults]:
        """Send every acknowledgement made so far without waiting; the results reach
        the acknowledgement commit callback (and the returned future)."""
        self._check()
        self._take_cursor()
        if not self._explicit:
            self._accept_last()
        assert self.fetcher is not None
        return self.fetcher.commit()
