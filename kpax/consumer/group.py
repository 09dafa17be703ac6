"""What both group protocols share: coordinator, commits, committed offsets, listener calls.

Role: :class:`GroupBase` is what both members' drivers share (the member's
state and identity -- member id, generation or member epoch -- are held by its
machine: :mod:`kpax.consumer.classic_state`, :mod:`kpax.consumer.kip848_state`);
it talks OffsetCommit / OffsetFetch to the group coordinator
(retrying coordinator moves), runs the auto-commit timer, watches
``max_poll_interval_ms``, and applies assignment changes to the consumer
(through :class:`Membership`, implemented by the consumer core) with the
rebalance listener calls in Java's order. :mod:`kpax.consumer.classic` and
:mod:`kpax.consumer.kip848` add the membership protocols.

OffsetCommit/OffsetFetch are capped at v9 (topics by name): v10 names topics
by id and buys nothing here.

Imports: kpax.cluster, kpax.broker, kpax.proto, kpax.structs, kpax.metrics, kpax.tasks,
kpax.consumer.*.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeVar

from kpax.broker.broker import Broker
from kpax.cluster.cluster import GROUP, Cluster
from kpax.cluster.request_path import RequestPath, RetryPolicy, ToCoordinator
from kpax.consumer.errors import CommitFailedError, RebalanceInProgressCommitError
from kpax.consumer.options import ConsumerSettings
from kpax.consumer.pattern import Pattern
from kpax.metrics import Metrics
from kpax.proto.error_codes import RebalanceInProgressError
from kpax.proto.error_families import COORDINATOR_ERRORS, STALE_GENERATION_ERRORS, code_in
from kpax.proto.errors import BrokerResponseError, KafkaError, KafkaTimeoutError, error_for_code
from kpax.proto.messages import OffsetCommitRequest, OffsetFetchRequest
from kpax.proto.offset_fetch import offset_fetch_answer, offset_fetch_request
from kpax.structs import OffsetAndMetadata, TopicPartition
from kpax.tasks import cancel_and_wait

log = logging.getLogger("kpax.consumer.group")

__all__ = ["GroupBase", "Membership"]

R = TypeVar("R")

_OFFSET_COMMIT_MAX = 9
_OFFSET_FETCH_MAX = 9


class Membership(Protocol):
    """What the group code needs from the consumer core."""

    def _assigned_partitions(self) -> set[TopicPartition]: ...

    def _add_partitions(self, tps: set[TopicPartition]) -> None: ...

    def _remove_partitions(self, tps: set[TopicPartition]) -> None: ...

    def _freeze_partitions(self, tps: set[TopicPartition]) -> None: ...

    def _processed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]: ...

    async def _wait_processed(self, tps: set[TopicPartition], timeout: float) -> None: ...

    def _on_committed(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None: ...

    def _forget_committed(self, tps: set[TopicPartition]) -> None: ...

    async def _call_listener(self, method: str, tps: set[TopicPartition]) -> None: ...

    def _fail(self, exc: BaseException) -> None: ...

    #: The consumer's counters (kpax.metrics; None: not counted).
    metrics_registry: Metrics | None


class GroupBase:
    #: What a member whose commit was fenced does (for CommitFailedError's message).
    fenced_note = "the member rejoins"

    def __init__(self, cluster: Cluster, settings: ConsumerSettings, member: Membership) -> None:
        if settings.group_id is None:
            raise ValueError("a consumer group needs a group_id")
        self.cluster = cluster
        self.settings = settings
        self.member = member
        self.group_id: str = settings.group_id
        self.instance_id: str | None = settings.group_instance_id
        #: The topics subscribed to (by name, or those a pattern matches now).
        self.subscription: list[str] = []
        #: ``subscribe(pattern=...)``'s regex (None: subscribed by names).
        self.pattern: Pattern | None = None
        self.last_poll = time.monotonic()
        self._timeout = settings.request_timeout
        self._api_timeout = settings.api_timeout
        self._backoff = settings.retry_backoff
        #: The one request path (routing to the coordinator, retries, deadline).
        self.requests = RequestPath(cluster, RetryPolicy(*self._backoff))
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False
        self._wake = asyncio.Event()
        #: Set while the member holds the assignment of its generation (its
        #: machine says so: every transition sets or clears it).
        self.stable = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._commit_lock: asyncio.Lock | None = None

    # ------------------------------------------------------------ lifecycle

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None and not self._closed:
            log.error("group %s: background task failed: %s", self.group_id, exc)
            self.member._fail(exc)

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self.settings.enable_auto_commit:
            self.spawn(self._auto_commit_loop())

    async def stop_tasks(self) -> None:
        self._closed = True
        await cancel_and_wait(list(self._tasks))

    def polled(self) -> None:
        """Called from the application's poll (any thread): it is alive. A member
        that left for a late poll rejoins (on the event loop's thread)."""
        self.last_poll = time.monotonic()
        loop = self._loop
        if loop is None or not self.poll_expired():
            return
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if here is loop:
            self._poll_resumed()
        else:
            with contextlib.suppress(RuntimeError):  # (the loop closed: nothing to rejoin)
                loop.call_soon_threadsafe(self._poll_resumed)

    def poll_expired(self) -> bool:
        """Out of the group for a late poll, rejoining at the next (the machine's state)."""
        raise NotImplementedError

    def _poll_resumed(self) -> None:
        raise NotImplementedError

    def rejoin_soon(self) -> None:
        self._wake.set()

    @property
    def member_id(self) -> str:
        """This member's id (the machine's)."""
        raise NotImplementedError

    def in_group(self) -> bool:
        """Has this member a live generation (member epoch) to commit with?"""
        raise NotImplementedError

    def poll_overdue(self) -> bool:
        limit = self.settings.max_poll_interval_ms
        return time.monotonic() - self.last_poll > limit / 1000

    # ------------------------------------------------------------ coordinator

    def coordinator_dead(self) -> None:
        self.cluster.coordinator_is_down(self.group_id, GROUP)

    async def coordinator_request(self, req: Any, *, what: str, **kwargs: Any) -> Any:
        """Send ``req`` to the coordinator through the one request path: found
        again (with backoff) while it moves, for up to the API timeout. An
        answer still naming a coordinator error then is returned as is."""

        async def send(broker: Broker) -> Any:
            resp = await broker.request(req, **kwargs)
            code = getattr(resp, "error_code", 0)
            if code_in(code, COORDINATOR_ERRORS):
                moved = error_for_code(code)(f"{what} for group {self.group_id!r}")
                moved.response = resp  # type: ignore[attr-defined]
                raise moved
            return resp

        try:
            return await self._coordinator_call(what, send, timeout_error=False)
        except KafkaError as exc:
            answered = getattr(exc, "response", None)
            if answered is not None:
                return answered
            if isinstance(exc, BrokerResponseError) or self.group_id in exc.message:
                raise
            raise type(exc)(
                f"{what} for group {self.group_id!r}: {exc.message}",
                retriable=exc.retriable,
            ) from exc

    # ------------------------------------------------------------ listener

    async def revoke(self, tps: set[TopicPartition], *, lost: bool = False) -> None:
        if not tps:
            return
        # No record of these partitions reaches the application from now on. The
        # commit sends only what the application moved past (at-least-once): it
        # may hold records of them now, so first give it a bounded time to ask for
        # more -- as a Java rebalance waits for poll() -- or the next owner
        # re-reads them.
        self.member._freeze_partitions(set(tps))
        if not lost and self.settings.enable_auto_commit:
            await self.member._wait_processed(set(tps), self.processed_wait())
            try:
                await self.commit(self._existing(self._owned_offsets(tps)))
            except KafkaError as exc:
                log.warning("group %s: commit before revoking failed: %s", self.group_id, exc)
        method = "on_partitions_lost" if lost else "on_partitions_revoked"
        try:
            await self.member._call_listener(method, set(tps))
        finally:
            self.member._remove_partitions(set(tps))

    async def assign(self, tps: set[TopicPartition]) -> None:
        self.member._add_partitions(set(tps))
        await self.member._call_listener("on_partitions_assigned", set(tps))

    def _existing(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """``offsets`` without the topics a pattern subscription saw deleted (the
        metadata asks for every topic then): an automatic commit for one would be
        retried until the API timeout, holding up the rebalance it is part of."""
        if self.pattern is None:
            return dict(offsets)
        known = self.cluster.snapshot.topics
        return {tp: om for tp, om in offsets.items() if tp.topic in known}

    def _owned_offsets(self, tps: set[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        offsets = self.member._processed_offsets()
        return {tp: om for tp, om in offsets.items() if tp in tps}

    def processed_wait(self) -> float:
        """How long a revocation waits for the application to move past the records
        it holds (seconds): half the session timeout (or max_poll_interval_ms, if
        lower), since heartbeats may wait behind it."""
        s = self.settings
        return min(s.session_timeout_ms, s.max_poll_interval_ms) / 2000

    # ------------------------------------------------------------ commits

    def commit_identity(self) -> tuple[int, str]:
        """(generation id or member epoch, member id) to commit with (the machine's)."""
        raise NotImplementedError

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Commit ``offsets``; one commit of this member at a time (in call order),
        so an earlier commit can never land after a later one -- not even when a
        coordinator failover makes the first one retry."""
        if not offsets:
            return
        # The identity the offsets were chosen under, not the one in force when the
        # commit gets its turn or is resent: a rebalance while it waits (behind an
        # earlier commit, or retried across a coordinator move) must fence it.
        identity = self.commit_identity()
        if self._commit_lock is None:
            self._commit_lock = asyncio.Lock()
        async with self._commit_lock:
            await self._commit(offsets, identity)
        self.member._on_committed(offsets)

    async def _commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], identity: tuple[int, str]
    ) -> None:
        generation, member_id = identity
        topics: dict[str, list[Any]] = defaultdict(list)
        for tp, om in offsets.items():
            topics[tp.topic].append(
                OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=tp.partition,
                    committed_offset=om.offset,
                    committed_leader_epoch=om.leader_epoch,
                    committed_metadata=om.metadata,
                )
            )
        req = OffsetCommitRequest(
            group_id=self.group_id,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            group_instance_id=self.instance_id if member_id else None,
            retention_time_ms=-1,
            topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps)
                for t, ps in topics.items()
            ],
        )
        metrics = self.member.metrics_registry

        async def send(broker: Broker) -> None:
            started = time.monotonic()
            resp = await broker.request(req, max_version=_OFFSET_COMMIT_MAX)
            if metrics is not None:  # commit-latency: one OffsetCommit round trip
                metrics.sensor("commit-latency").record((time.monotonic() - started) * 1000.0)
            codes = [
                (f"{t.name}-{p.partition_index}", p.error_code)
                for t in resp.topics
                for p in t.partitions
            ]
            again: KafkaError | None = None
            for where, code in codes:
                if not code:
                    continue
                err = error_for_code(code)
                if issubclass(err, STALE_GENERATION_ERRORS):
                    if self.on_generation_error(code, (generation, member_id)):
                        raise CommitFailedError(
                            f"commit of {where} for group {self.group_id!r} failed: "
                            f"{err.__name__} (generation {generation}, member "
                            f"{member_id!r}); the group went on without this member (or it "
                            "was evicted for exceeding max_poll_interval_ms) and the partition "
                            f"may belong to another member now; {self.fenced_note}"
                        )
                    if (generation, member_id) == self.commit_identity():
                        why = "the group is rebalancing; this member keeps its partitions"
                    else:
                        why = (
                            "the group rebalanced after these offsets were chosen (the "
                            "partitions may be another member's now)"
                        )
                    raise RebalanceInProgressCommitError(
                        f"commit of {where} for group {self.group_id!r} not applied: "
                        f"{err.__name__} (generation {generation}): {why}. Retrying now "
                        "cannot help: retry after poll() -- the next poll completes the "
                        "rebalance and hands records out under the new generation -- then "
                        "commit again"
                    )
                if not err.retriable:
                    raise err(f"OffsetCommit of {where} for group {self.group_id!r}")
                again = again or err(f"OffsetCommit of {where} for group {self.group_id!r}")
            if again is not None:
                raise again  # coordinator moved or another retriable error: resent

        await self._coordinator_call("OffsetCommit", send)

    async def _coordinator_call(
        self, what: str, send: Callable[[Broker], Awaitable[R]], *, timeout_error: bool = True
    ) -> R:
        """``send(broker)`` to the coordinator through the one request path (found
        again while it moves; a retriable error is resent with backoff). Past the
        API timeout the last error is raised -- with ``timeout_error`` a retriable
        one becomes a KafkaTimeoutError naming the group."""
        try:
            return await self.requests.call(
                what,
                ToCoordinator(self.group_id, GROUP),
                send,
                timeout=self._api_timeout,
                cut=False,
            )
        except KafkaError as exc:
            if not timeout_error or not exc.retriable or isinstance(exc, KafkaTimeoutError):
                raise
            raise KafkaTimeoutError(
                f"{what} for group {self.group_id!r} timed out: {exc.message}"
            ) from exc

    def on_generation_error(self, code: int, sent_with: tuple[int, str] | None = None) -> bool:
        """A commit (``sent_with``: the generation and member id it carried) or a
        heartbeat found the generation gone (subclasses rejoin). True: the commit
        failed for good (the member is out of that generation: CommitFailedError);
        False: the group is rebalancing and the member may commit again after its
        next poll (RebalanceInProgressCommitError)."""
        self.rejoin_soon()
        return not code_in(code, RebalanceInProgressError)

    async def fetch_committed(
        self, tps: list[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        topics: dict[str, list[int]] = defaultdict(list)
        for tp in tps:
            topics[tp.topic].append(tp.partition)
        stable = self.settings.read_committed

        async def send(broker: Broker) -> Any:
            version = await broker.api_version(OffsetFetchRequest, _OFFSET_FETCH_MAX)
            req = offset_fetch_request(version, self.group_id, topics, require_stable=stable)
            resp = await broker.request(req, version=version)
            code, rtopics = offset_fetch_answer(resp, version)
            bad = [c for c in [code] + [p.error_code for t in rtopics for p in t.partitions] if c]
            if bad:  # a coordinator move or another retriable error is resent
                raise error_for_code(bad[0])(f"OffsetFetch for group {self.group_id!r}")
            return rtopics

        rtopics = await self._coordinator_call("OffsetFetch", send, timeout_error=False)
        out: dict[TopicPartition, OffsetAndMetadata | None] = dict.fromkeys(tps)
        for t in rtopics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if p.committed_offset >= 0:
                    out[tp] = OffsetAndMetadata(
                        p.committed_offset, p.metadata or "", p.committed_leader_epoch
                    )
        return out

    async def _auto_commit_loop(self) -> None:
        interval = self.settings.auto_commit_interval_ms / 1000
        while not self._closed:
            await asyncio.sleep(interval)
            # only what the application moved past (records it holds may be unprocessed)
            offsets = self._existing(self.member._processed_offsets())
            if not offsets or not self.stable.is_set():
                continue
            try:
                await self.commit(offsets)
            except KafkaError as exc:
                log.warning("group %s: auto-commit failed: %s", self.group_id, exc)

    # ------------------------------------------------------------ protocol hooks

    def subscribe(self, topics: list[str]) -> None:
        raise NotImplementedError

    def subscribe_pattern(self, pattern: Pattern) -> None:
        raise NotImplementedError

    async def leave(self) -> None:
        raise NotImplementedError


async def call_maybe_async(fn: Callable[..., Any] | None, *args: Any) -> None:
    if fn is None:
        return
    res = fn(*args)
    if inspect.isawaitable(res):
        await res
